"""Root file systems of their own for the kernel tests' jobs (ci/roots.sh builds them): Debian's
unstable suite with its own libc, CPython 3.13, 3.14, 3.15 and 3.13t, entered by chroot or by
a new mount namespace and pivot_root, as jobs in containers and images run."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import ROOT

ROOTS = Path(os.environ.get("IOOBSERVE_ROOTS", "/var/cache/ioobserve/roots"))
UNSTABLE = ROOTS / "unstable"
# The interpreters in it, by name: Debian's packages, and the free-threaded build from source.
INTERPRETERS = {"3.13": "/usr/bin/python3.13", "3.14": "/usr/bin/python3.14", "3.15": "/usr/bin/python3.15",
                "3.13t": "/opt/python3.13t/bin/python3.13t"}
WAYS = ("chroot", "pivot")  # how a job enters its root (tests/workloads/in_root.c)
LAUNCHER_SOURCE = ROOT / "tests" / "workloads" / "in_root.c"


@dataclass(frozen=True)
class JobRoot:
    """A root file system jobs run in, and the launcher that puts them there."""

    path: Path  # on the host
    launcher: Path

    def command(self, way: str, argv: list[str]) -> list[str]:
        """`argv` (paths inside the root) run in it, entered `way`."""
        return [str(self.launcher), way, str(self.path), *argv]

    def traced_path(self, inside: str, way: str) -> str:
        """How a trace names a file a job calls `inside`: a chroot's files by the host's path
        (the chroot is a directory of the host's tree), a container's by its own."""
        return f"{self.path}{inside}" if way == "chroot" else inside

    def scratch(self) -> tuple[str, Path]:
        """A new directory in the root: (its path inside, its path on the host)."""
        inside = f"/tmp/ioobserve-test-{uuid.uuid4().hex[:12]}"
        host = self.path / inside.lstrip("/")
        host.mkdir(parents=True)
        return inside, host

    def copy_in(self, source: Path, directory: Path) -> str:
        """Copy a host file into a scratch directory of the root; its path inside."""
        shutil.copy(source, directory / source.name)
        return str(Path("/") / (directory / source.name).relative_to(self.path))


def missing_root() -> str | None:
    """Why the test root cannot be used (None: it can)."""
    if not (UNSTABLE / ".ioobserve-key").is_file():
        return f"no test root at {UNSTABLE}: run ci/roots.sh (make test does)"
    lost = [name for name, path in INTERPRETERS.items() if not (UNSTABLE / path.lstrip("/")).exists()]
    return f"the test root at {UNSTABLE} lacks {', '.join(lost)}: run ci/roots.sh" if lost else None


def build_launcher(directory: Path) -> Path:
    """tests/workloads/in_root.c, compiled into `directory`."""
    binary = directory / "in_root"
    subprocess.run(["cc", "-O2", "-o", str(binary), str(LAUNCHER_SOURCE)], check=True)
    return binary


def mount_proc(root: Path) -> bool:
    """/proc in the root for chroot'ed jobs (True: mounted now, to be unmounted after)."""
    if os.path.ismount(root / "proc"):
        return False
    subprocess.run(["mount", "-t", "proc", "proc", str(root / "proc")], check=True)
    return True
