"""Kernel headers for bcc's compiler, when the running kernel has none of its own.

bcc needs a kernel build tree only for its bootstrap headers (kconfig.h, the bpf helper
definitions); ioobserve takes every struct layout from BTF. Debian splits its headers into
`linux-headers-<v>-common` and `linux-headers-<v>-<flavour>`, which bcc cannot combine by
itself, so we build a merged tree of symlinks in our cache directory and point
BCC_KERNEL_SOURCE at it. Nothing under /usr or /lib/modules is touched.

In a container the host's headers come in by mounts: /lib/modules and /usr/src at their own
paths (with Debian's /usr/lib/linux-kbuild-*), or the host's whole root read-only at a path
named by IOOBSERVE_HOST_ROOT (e.g. /host), where the host's absolute symlinks are followed
inside that root.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ioobserve.plumbing.host import HOST_ROOT_VARIABLE, host_root, in_root

CACHE_DIR = Path(os.environ.get("IOOBSERVE_CACHE_DIR", "/var/cache/ioobserve"))


@dataclass(frozen=True)
class Headers:
    """The header tree bcc will use."""

    path: Path | None  # None: bcc's default (/lib/modules/<release>/build)
    matching: bool  # built for the running kernel
    description: str

    def environment(self) -> dict[str, str]:
        """Variables to set before bcc compiles."""
        return {"BCC_KERNEL_SOURCE": str(self.path)} if self.path else {}


class HeadersMissing(Exception):
    """No usable kernel headers are installed."""


def _has_kconfig(tree: Path) -> bool:
    return (tree / "include" / "linux" / "kconfig.h").exists()


def _debian_pairs(usr_src: Path) -> list[tuple[str, Path, Path]]:
    """(version, common dir, flavour dir) for each installed Debian header pair, newest first."""
    pairs = []
    for common in usr_src.glob("linux-headers-*-common"):
        version = common.name[len("linux-headers-") : -len("-common")]
        for flavour in usr_src.glob(f"linux-headers-{version}-*"):
            if flavour != common and (flavour / "include" / "generated").is_dir():
                pairs.append((version, common, flavour))
    key = lambda item: [int(x) if x.isdigit() else x for x in re.split(r"[.-]", item[0])]
    return sorted(pairs, key=key, reverse=True)


def _missing_message(release: str, usr_src: Path, root: Path) -> str:
    if root != Path("/"):
        return (f"no kernel headers for {release} under the host's root at {root} (its /lib/modules/{release}/build "
                f"and /usr/src): install the host's kernel headers package on the host")
    return (f"no kernel headers for {release} and none in {usr_src}: run 'make setup' (installs linux-headers-amd64) "
            f"or set BCC_KERNEL_SOURCE; in a container, mount the host's /lib/modules and /usr/src read-only at the same "
            f"paths (Debian and Ubuntu: also /usr/lib/linux-kbuild-*), or its root read-only at /host with "
            f"{HOST_ROOT_VARIABLE}=/host")


def _link_tree(source: Path, target: Path, host: Path) -> None:
    """Mirror `source` (under the host's root, seen at `host`) into `target` as symlinks to
    absolute paths, the host's links followed inside it; later calls override."""
    for root, dirs, files in os.walk(source):
        rel = Path(root).relative_to(source)
        dest_dir = target / rel
        dest_dir.mkdir(parents=True, exist_ok=True)
        for name in files + [d for d in dirs if (Path(root) / d).is_symlink()]:
            src, dest = Path(root) / name, dest_dir / name
            if dest.is_symlink() or dest.is_file():
                dest.unlink()
            # Resolve links (scripts -> ../../lib/...) so they work from here.
            os.symlink(in_root(host, PurePosixPath("/") / src.relative_to(host)), dest)


def merged_debian_tree(common: Path, flavour: Path, cache_dir: Path = CACHE_DIR, root: Path = Path("/")) -> Path:
    """A merged header tree for a Debian header pair (under the host's `root`), built once in `cache_dir`."""
    # Its links point through `root`: a tree built through another root has another name.
    target = cache_dir / "kernel-headers" / (flavour.name if root == Path("/") else f"{flavour.name}@{root.as_posix().strip('/').replace('/', '_')}")
    if _has_kconfig(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))
    try:
        _link_tree(common, staging, root)
        _link_tree(flavour, staging, root)
        os.chmod(staging, 0o755)
        try:
            staging.rename(target)
        except OSError:
            if not _has_kconfig(target):  # another ioobserve won the race, or a stale dir
                shutil.rmtree(target, ignore_errors=True)
                staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def find_headers(release: str | None = None, usr_src: Path | None = None, cache_dir: Path = CACHE_DIR,
                 root: Path | None = None) -> Headers:
    """Choose the headers bcc compiles with: the user's, the kernel's own, else Debian's newest
    (the host's, through `root`: IOOBSERVE_HOST_ROOT by default)."""
    release = release or os.uname().release
    override = os.environ.get("BCC_KERNEL_SOURCE")
    if override:
        return Headers(Path(override), False, f"BCC_KERNEL_SOURCE={override}")
    root = root or host_root()
    for sub in ("build", "source"):
        tree = in_root(root, f"/lib/modules/{release}/{sub}")
        if _has_kconfig(tree):
            # bcc follows /lib/modules/<release>/build itself, but not through another root.
            return Headers(None if root == Path("/") else tree, True, f"{tree} (matching {release})")
    usr_src = usr_src or in_root(root, "/usr/src")
    pairs = _debian_pairs(usr_src)
    if not pairs:
        raise HeadersMissing(_missing_message(release, usr_src, root))
    version, common, flavour = pairs[0]
    tree = merged_debian_tree(common, flavour, cache_dir, root)
    matching = release.startswith(version)
    note = "matching" if matching else f"not matching {release}; layouts come from BTF"
    return Headers(tree, matching, f"{flavour.name} merged with -common ({note})")
