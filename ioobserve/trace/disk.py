"""A trace part on disk, and what is done when the disk fails.

A part is its `.pfw.gz` and its member index, appended member by member at explicit offsets.
A member the disk does not take whole (full, read-only, an I/O error) is cut off again, with
its index line, so a part always ends on a whole member its index describes and everything
before the failure still loads. Whether writing may be tried again is asked of the file
system (there, writable, room for a few flushes), never found out by losing more events.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from ioobserve.trace.index import index_path
from ioobserve.trace.output import create_private_file

RESUME_FREE_BYTES = 4 << 20  # room a file system must have again before a new part is tried
RESUME_CHECK_S = 2.0  # how often that is asked, at first
RESUME_CHECK_MAX_S = 60.0  # the interval doubles after each try that failed, up to this


class PartFile:
    """One part of a trace, open for appending: data and index created 0600, never through a symlink."""

    def __init__(self, directory: Path, name: str) -> None:
        self.path = Path(directory) / name
        self._data = create_private_file(self.path.parent, self.path.name)
        try:
            index = index_path(self.path)
            self._index = create_private_file(index.parent, index.name)
        except BaseException:
            os.close(self._data)
            self.path.unlink(missing_ok=True)
            raise
        self.size = self._index_size = 0

    def append(self, member: bytes, index_line: bytes) -> None:
        """Write a member, then its index line; if either fails both files are cut back to
        where they were and the OSError is raised."""
        try:
            _write_all(self._data, member, self.size)
            _write_all(self._index, index_line, self._index_size)
        except OSError:
            for fd, size in ((self._data, self.size), (self._index, self._index_size)):
                try:
                    os.ftruncate(fd, size)
                except OSError:
                    pass  # a read-only or failing disk may refuse this too: the reader skips a torn tail
            raise
        self.size += len(member)
        self._index_size += len(index_line)

    def check_present(self) -> None:
        """Raise FileNotFoundError if the part was deleted while open (writes would vanish)."""
        if os.fstat(self._data).st_nlink == 0:
            raise FileNotFoundError(errno.ENOENT, "the trace file was deleted while being written", str(self.path))

    def close(self) -> None:
        """Flush both files to disk and close them; an OSError from the disk is raised, after closing."""
        try:
            for fd in (self._data, self._index):
                os.fsync(fd)
        finally:
            self.discard()

    def discard(self) -> None:
        """Close both files without waiting for the disk (after a failure)."""
        for fd in (self._data, self._index):
            try:
                os.close(fd)
            except OSError:
                pass  # EIO on close: nothing more to do for a part given up
        self._data = self._index = -1


    def remove(self) -> None:
        """Delete both files (a part that holds nothing); errors ignored, the disk is failing."""
        for path in (self.path, index_path(self.path)):
            try:
                path.unlink()
            except OSError:
                pass


def _write_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


def writable_again(directory: Path) -> bool:
    """Whether a new part may be tried in `directory`: it exists, is writable and mounted
    read-write, and its file system has RESUME_FREE_BYTES free."""
    try:
        fs = os.statvfs(directory)
    except OSError:
        return False
    if fs.f_flag & os.ST_RDONLY or not os.access(directory, os.W_OK | os.X_OK):
        return False
    return fs.f_bavail * fs.f_frsize >= RESUME_FREE_BYTES


def describe_failure(exc: OSError) -> str:
    """What went wrong, for one line: 'No space left on device (ENOSPC)'."""
    name = errno.errorcode.get(exc.errno or 0)
    reason = exc.strerror or str(exc)
    return f"{reason} ({name})" if name else reason
