"""The host as this process reaches it: directly, or from a container through a mount of the
host's root (IOOBSERVE_HOST_ROOT, e.g. /host), where the host's absolute symlinks must be
followed inside that mount."""

from __future__ import annotations

import contextlib
import errno
import os
import socket
from pathlib import Path, PurePosixPath

HOST_ROOT_VARIABLE = "IOOBSERVE_HOST_ROOT"
NODE_VARIABLE = "IOOBSERVE_NODE"
MAX_LINKS = 40  # as the kernel's own limit on symlinks followed in one lookup


def host_root() -> Path:
    """Where the host's root file system is seen from here: IOOBSERVE_HOST_ROOT, else /."""
    return Path(os.environ.get(HOST_ROOT_VARIABLE) or "/")


def node_name() -> str:
    """The node's name, for trace names, their host record and the metrics: IOOBSERVE_NODE (a
    DaemonSet sets it to the Kubernetes node name), else the host's /etc/hostname through the
    host-root mount (a container's own host name is its pod's or its id), else this host name."""
    if named := os.environ.get(NODE_VARIABLE, "").strip():
        return named
    root = host_root()
    if root != Path("/"):
        with contextlib.suppress(OSError, UnicodeDecodeError):
            if hostname := (root / "etc" / "hostname").read_text().strip().split("\n")[0].strip():
                return hostname
    return socket.gethostname()


def in_root(root: Path, path: str | Path) -> Path:
    """The host's `path` as reached through `root`, every symlink followed there (an absolute
    target is the host's, so it is taken under `root`); like realpath when `root` is /."""
    todo = list(PurePosixPath(path).parts[1:])
    here, links = PurePosixPath("/"), 0
    while todo:
        part = todo.pop(0)
        if part == "..":
            here = here.parent
            continue
        if part == ".":
            continue
        seen = root / (here / part).relative_to("/")
        if not seen.is_symlink():
            here = here / part
            continue
        links += 1
        if links > MAX_LINKS:
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), str(path))
        target = PurePosixPath(os.readlink(seen))
        if target.is_absolute():
            here = PurePosixPath("/")
            todo = list(target.parts[1:]) + todo
        else:
            todo = list(target.parts) + todo
    return root / here.relative_to("/")
