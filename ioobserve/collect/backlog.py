"""The capture process's backlog: the stream bytes the recorder has not read yet, first in
first out. The first `memory_bytes` wait in memory; beyond them, while a spill file is
open, they wait in that file (unlinked, 0600, on a local disk: spill_directory), so a
burst the recorder is behind on sits in the page cache, which the kernel can write back
under pressure, rather than in the capture process's own memory. Nothing is dropped here:
the caller stops reading the rings once `size` reaches its bound, and the kernel counts
the loss."""

from __future__ import annotations

import collections
import contextlib
import ctypes
import os
from dataclasses import dataclass

SPILL_FALLBACK = "/var/tmp"  # where the backlog spills when the trace's directory is not on a local disk
# What is read back from the spill file at a time, once the memory before it is written out.
SPILL_READ = 4 << 20
FALLOC_FL_KEEP_SIZE = 1
FALLOC_FL_PUNCH_HOLE = 2
# statfs(2)'s f_type of the local disk file systems: ext2/3/4, XFS, Btrfs, F2FS.
LOCAL_DISK_TYPES = {0xEF53, 0x58465342, 0x9123683E, 0xF2F52010}
STATFS_BYTES = 120  # struct statfs on 64-bit Linux; f_type comes first
_libc = ctypes.CDLL(None, use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]


@dataclass(frozen=True)
class BacklogLimits:
    """How much a burst may queue in the capture process before the kernel drops (total),
    how much of it in memory, and the directory of the spill file for the rest (None: all
    in memory)."""

    total_bytes: int = 1 << 30  # ~8 M events
    memory_bytes: int = 64 << 20
    spill_dir: str | None = None


def open_spill(directory: str) -> int:
    """An unlinked file in `directory` for the backlog's overflow (O_TMPFILE: it has no name,
    so nothing can be put in its way and nothing is left behind); OSError where the file
    system cannot make one."""
    return os.open(directory, os.O_TMPFILE | os.O_RDWR | os.O_EXCL | os.O_CLOEXEC, 0o600)


def on_local_disk(directory: str) -> bool:
    """Whether `directory` is on a local disk's file system. The capture process must never
    wait: a network or FUSE file system can make a write sleep until the server answers, and
    tmpfs would hold the backlog in memory all the same."""
    buffer = ctypes.create_string_buffer(STATFS_BYTES)
    if _libc.statfs(os.fsencode(directory), buffer) != 0:
        return False
    return ctypes.c_long.from_buffer(buffer).value in LOCAL_DISK_TYPES


def spill_directory(candidates: list[str]) -> str | None:
    """The first of `candidates` where the backlog may spill (a local disk that can make an
    unlinked file), or None: it stays in memory."""
    for directory in candidates:
        if not on_local_disk(directory):
            continue
        try:
            os.close(open_spill(directory))
        except OSError:
            continue
        return directory
    return None


class SpillFile:
    """A byte stream appended at one end and read at the other, in a file: the read part's
    blocks are given back as it goes, and the file is emptied whenever it is all read."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._read = self._written = 0
        self.peak = 0  # the most it held at once, bytes

    @property
    def size(self) -> int:
        """Bytes written and not read back yet."""
        return self._written - self._read

    def append(self, data) -> bool:
        """Write `data` at the end; False (nothing appended) if the file system refused it."""
        view, done = memoryview(data), 0
        try:
            while done < len(view):
                done += os.pwrite(self.fd, view[done:], self._written + done)
        except OSError:
            return False  # a full disk: the caller keeps it in memory
        self._written += done
        self.peak = max(self.peak, self.size)
        return True

    def take(self, limit: int) -> bytes:
        """The oldest bytes, at most `limit`."""
        data = os.pread(self.fd, min(limit, self.size), self._read)
        self._read += len(data)
        if self._read == self._written:
            with contextlib.suppress(OSError):  # only gives the space back early: writing restarts at 0 either way
                os.ftruncate(self.fd, 0)
            self._read = self._written = 0
        else:  # the page cache and disk blocks of what was read go back now, not at the end
            _libc.fallocate(self.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, self._read & ~4095)
        return data


class Backlog:
    """The stream's bytes waiting for the recorder, in order: in memory, then in the spill
    file, then (where the file system refused them) in memory again behind it."""

    def __init__(self, memory_bytes: int, spill: SpillFile | None) -> None:
        self.memory_bytes = memory_bytes
        self.spill = spill
        self._head: collections.deque = collections.deque()  # goes out first
        self._tail: collections.deque = collections.deque()  # after the spill's bytes
        self._in_memory = 0

    @property
    def size(self) -> int:
        """Bytes waiting, in memory and in the spill file."""
        return self._in_memory + (self.spill.size if self.spill else 0)

    @property
    def spilled_peak(self) -> int:
        """The most the spill file held at once, bytes."""
        return self.spill.peak if self.spill else 0

    def __bool__(self) -> bool:
        return self.size > 0

    def add(self, piece) -> None:
        """Queue `piece` (bytes-like) behind everything already waiting."""
        if not piece:
            return
        queue = self._tail if self._tail else self._head
        over = self._in_memory + len(piece) > self.memory_bytes
        if queue is self._head and self.spill is not None and (self.spill.size or over):
            if self.spill.append(piece):
                return
            queue = self._tail  # the file system refused it: in memory, behind the spill's bytes
        queue.append(memoryview(piece))
        self._in_memory += len(piece)

    def write_to(self, fd: int) -> int:
        """Write the oldest bytes to `fd` (non-blocking) until it is full or nothing waits;
        returns the bytes written."""
        written = 0
        while True:
            if not self._head:
                self._refill()
                if not self._head:
                    return written
            try:
                n = os.write(fd, self._head[0])
            except BlockingIOError:
                return written
            written += n
            self._in_memory -= n
            if n == len(self._head[0]):
                self._head.popleft()
            else:
                self._head[0] = self._head[0][n:]

    def _refill(self) -> None:
        """Move the next bytes in line to the head: from the spill file, or, once that is
        empty, what waited behind it in memory."""
        if self.spill is not None and self.spill.size:
            data = self.spill.take(SPILL_READ)
            self._head.append(memoryview(data))
            self._in_memory += len(data)
        elif self._tail:
            self._head, self._tail = self._tail, self._head
