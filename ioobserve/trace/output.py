"""Safe places for traces: they hold every user's file names and are written as root.

A trace directory must be a real directory (not a symlink), not writable by other users,
and trace files are created 0600 with O_EXCL|O_NOFOLLOW relative to the directory's fd,
so nothing can redirect the write.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from ioobserve.plumbing.host import node_name


class OutputError(Exception):
    """The output location is unsafe or unusable; the message says what to do."""


def check_output_dir(directory: Path) -> Path:
    """Create `directory` (0700) if missing, else check it is safe; returns it."""
    directory = Path(directory)
    try:
        info = os.lstat(directory)
    except FileNotFoundError:
        parent = directory.parent
        if not parent.is_dir():
            raise OutputError(f"output directory {directory}: its parent {parent} does not exist") from None
        try:
            os.mkdir(directory, 0o700)
        except OSError as exc:
            raise OutputError(f"cannot create output directory {directory}: {exc.strerror}") from None
        return directory
    if stat.S_ISLNK(info.st_mode):
        raise OutputError(f"output directory {directory} is a symlink; give the real directory")
    if not stat.S_ISDIR(info.st_mode):
        raise OutputError(f"output path {directory} is not a directory")
    if info.st_mode & stat.S_IWOTH or (info.st_mode & stat.S_IWGRP and info.st_gid != 0):
        raise OutputError(
            f"output directory {directory} is writable by other users; use a directory only you can write "
            f"(e.g. mkdir -m 700 DIR)"
        )
    if info.st_uid not in (0, os.geteuid()):
        raise OutputError(f"output directory {directory} belongs to uid {info.st_uid}; use a directory you own")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise OutputError(f"output directory {directory} is not writable")
    return directory


def trace_name(part: int | None = None, when: float | None = None, pid: int | None = None) -> str:
    """<host>-<YYYYmmddTHHMMSS>-<pid>[-<part>].pfw.gz"""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.localtime(when))
    suffix = f"-{part}" if part else ""
    return f"{node_name()}-{stamp}-{pid or os.getpid()}{suffix}.pfw.gz"


def create_private_file(directory: Path, name: str) -> int:
    """Open a new file 0600 in `directory` without following symlinks; returns the fd."""
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
    except FileExistsError:
        raise OutputError(f"{directory / name} already exists; not overwriting it") from None
    finally:
        os.close(dir_fd)
    os.fchmod(fd, 0o600)  # whatever the umask said
    return fd
