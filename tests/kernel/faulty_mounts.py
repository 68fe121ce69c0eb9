"""Real file systems that fail for the fault tests: a small tmpfs (fills, remounts read-only)
and tests/workloads/faulty_fs.py over FUSE (slow, failing or hanging writes)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import ROOT
from tests.waiting import wait_until

FAULTY_FS = str(ROOT / "tests" / "workloads" / "faulty_fs.py")
FUSE_CONNECTIONS = Path("/sys/fs/fuse/connections")  # fusectl: where a hung server's connection is aborted


def _mounted(point: Path) -> bool:
    return any(line.split()[1] == str(point) for line in Path("/proc/self/mounts").read_text().splitlines())


def _remove_mount_point(point: Path) -> None:
    """The emptied mount point removed, if it can be: a mount namespace made while it was
    mounted (a container's, started by another test or program) keeps a copy of the mount,
    and the directory stays busy until that namespace ends. An empty directory under /tmp is
    left then, rather than a test failed for what it does not test."""
    with contextlib.suppress(OSError):
        point.rmdir()


@contextlib.contextmanager
def small_tmpfs(size: str) -> Iterator[Path]:
    """A private tmpfs of `size` (mount's syntax: 4m), unmounted afterwards."""
    point = Path(tempfile.mkdtemp(prefix="ioobserve-tmpfs-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "ioobserve-test", str(point)], check=True)
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=True)
        _remove_mount_point(point)


def fill(directory: Path, leave: int = 0) -> Path:
    """A file taking all the room of directory's file system but `leave` bytes."""
    filler = directory / "filler"
    room = os.statvfs(directory).f_bavail * os.statvfs(directory).f_frsize - leave
    with open(filler, "wb") as handle:
        chunk = b"\0" * (1 << 20)
        while room > 0:
            try:
                room -= handle.write(chunk[: min(room, len(chunk))])
            except OSError:  # full already: tmpfs rounds to pages
                break
    return filler


class FaultyFs:
    """A mounted faulty_fs.py: where, and how to heal it."""

    def __init__(self, point: Path, heal_file: Path) -> None:
        self.point, self.heal_file = point, heal_file

    def heal(self) -> None:
        """Writes succeed from now on."""
        self.heal_file.touch()

    def abort(self) -> None:
        """Abort the connection: every request held, and every later one, fails at once."""
        _abort(self.point)


def _abort(point: Path) -> None:
    with contextlib.suppress(OSError):  # aborted already, or not mounted
        minor = os.minor(os.stat(point).st_dev)
        (FUSE_CONNECTIONS / str(minor) / "abort").write_text("1")


@contextlib.contextmanager
def faulty_fs(*options: str) -> Iterator[FaultyFs]:
    """tests/workloads/faulty_fs.py mounted with these options; afterwards its connection is
    aborted (writers it holds get an error), it is unmounted and the server ends."""
    if not _mounted(FUSE_CONNECTIONS):
        subprocess.run(["mount", "-t", "fusectl", "fusectl", str(FUSE_CONNECTIONS)], check=True)
    point = Path(tempfile.mkdtemp(prefix="ioobserve-fuse-"))
    heal_file = point.with_name(point.name + ".heal")
    server = subprocess.Popen([sys.executable, FAULTY_FS, str(point), "--heal-file", str(heal_file), *options],
                              stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: _mounted(point) or server.poll() is not None, "the FUSE file system mounted")
        assert server.poll() is None, f"faulty_fs.py ended: {server.stderr.read()}"
        yield FaultyFs(point, heal_file)
    finally:
        _abort(point)
        subprocess.run(["umount", "-l", str(point)], check=False)
        server.kill()  # libfuse's loop runs in C: a SIGTERM handler of Python's would never run
        server.communicate(timeout=30)
        _remove_mount_point(point)
        heal_file.unlink(missing_ok=True)
