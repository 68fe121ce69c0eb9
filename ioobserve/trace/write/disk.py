"""A trace part on disk, and the disk process that makes its file-system calls.

Every file-system call of a trace (create, write, fsync, statvfs) is made by a process of its
own, one request at a time over a socket: a write to a hung disk (a hung NFS server, a stuck
FUSE daemon) sleeps in the kernel where no signal reaches it, and a thread of ours stuck there
would keep the recorder from ever exiting; a process stuck there is left behind and the
recorder still stops by its deadline. The process is

    python -m ioobserve.trace.write.disk FD

Requests are (op, args) tuples; each gets ("ok", value) or ("error", kind, errno, message,
filename). It ends when the socket closes; signals from the terminal are the recorder's to act
on. It imports little: the recorder's side imports the index module (numpy, polars) only when
it opens a part.

A part is its `.pfw.gz` and its member index, appended member by member at explicit offsets.
A member the disk does not take whole (full, read-only, an I/O error) is cut off again, with
its index line, so a part always ends on a whole member its index describes and everything
before the failure still loads. Whether writing may be tried again is asked of the file
system (there, writable, room for a few flushes), never found out by losing more events.
"""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import socket
import subprocess
import sys
from multiprocessing.connection import Connection
from pathlib import Path

from ioobserve.plumbing.thread_names import name_this_thread
from ioobserve.trace.output import OutputError, create_private_file

RESUME_FREE_BYTES = 4 << 20  # room a file system must have again before a new part is tried
RESUME_CHECK_S = 2.0  # how often that is asked, at first
RESUME_CHECK_MAX_S = 60.0  # the interval doubles after each try that failed, up to this
REAP_S = 1.0  # how long closing waits for the disk process to end (a stuck one is left behind)


class DiskProcess:
    """The process making one trace's file-system calls; one caller thread at a time."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair()
        with theirs:
            # Not our stdout and stderr: a process stuck on a hung disk would hold them open, and
            # whoever reads the recorder's output to its end would wait for it too.
            self._proc = subprocess.Popen([sys.executable, "-m", "ioobserve.trace.write.disk", str(theirs.fileno())],
                                          pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._conn = Connection(ours.detach())

    @property
    def pid(self) -> int:
        """The process's id."""
        return self._proc.pid

    def call(self, op: str, *args):
        """Run one operation there; its OSError or OutputError is raised here."""
        try:
            self._conn.send((op, args))
            reply = self._conn.recv()
        except (EOFError, OSError) as exc:  # the process died: every later call fails the same way
            raise OSError(errno.EPIPE, f"the disk process ended ({exc or 'no answer'})") from None
        if reply[0] == "ok":
            return reply[1]
        _, kind, number, message, filename = reply
        raise OutputError(message) if kind == "output" else OSError(number, message, filename)

    def close(self) -> None:
        """Let the process end (it does once the socket closes) and reap it if it does soon."""
        self._conn.close()
        try:
            self._proc.wait(REAP_S)
        except subprocess.TimeoutExpired:
            pass  # stuck in the kernel on a hung disk: it ends when the disk answers


class PartFile:
    """One part of a trace, open for appending: data and index created 0600, never through a symlink."""

    def __init__(self, disk: DiskProcess, directory: Path, name: str) -> None:
        from ioobserve.trace.members import index_path  # here: the disk process must not import numpy and polars

        self.disk = disk
        self.path = Path(directory) / name
        disk.call("open", str(self.path), str(index_path(self.path)))
        self.size = 0

    def append(self, member: bytes, index_line: bytes) -> None:
        """Write a member, then its index line; if either fails both files are cut back to
        where they were and the OSError is raised."""
        self.disk.call("append", member, index_line)
        self.size += len(member)

    def check_present(self) -> None:
        """Raise FileNotFoundError if the part was deleted while open (writes would vanish)."""
        self.disk.call("check_present")

    def close(self) -> None:
        """Flush both files to disk and close them; an OSError from the disk is raised, after closing."""
        self.disk.call("close")

    def discard(self) -> None:
        """Close both files without waiting for the disk (after a failure)."""
        try:
            self.disk.call("discard")
        except OSError:
            pass  # nothing more to do for a part given up

    def remove(self) -> None:
        """Delete both files (a part that holds nothing); errors ignored, the disk is failing."""
        try:
            self.disk.call("remove")
        except OSError:
            pass


def writable_again(disk: DiskProcess, directory: Path) -> bool:
    """Whether a new part may be tried in `directory`: it exists, is writable and mounted
    read-write, and its file system has RESUME_FREE_BYTES free."""
    try:
        return disk.call("writable", str(directory), RESUME_FREE_BYTES)
    except OSError:
        return False


def describe_failure(exc: OSError) -> str:
    """What went wrong, for one line: 'No space left on device (ENOSPC)'."""
    name = errno.errorcode.get(exc.errno or 0)
    reason = exc.strerror or str(exc)
    return f"{reason} ({name})" if name else reason


# The disk process's own side: python -m ioobserve.trace.write.disk FD


class _Part:
    """The open part: data and index appended at explicit offsets, cut back when a write fails."""

    def __init__(self, data_path: str, index_file: str) -> None:
        self.paths = (data_path, index_file)
        self.data = create_private_file(os.path.dirname(data_path), os.path.basename(data_path))
        try:  # readers see the file is being written (ioobserve.trace.read.columnar); a file system without locks just does not say
            fcntl.flock(self.data, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            pass
        try:
            self.index = create_private_file(os.path.dirname(index_file), os.path.basename(index_file))
        except BaseException:
            os.close(self.data)
            os.unlink(data_path)
            raise
        self.sizes = [0, 0]

    def append(self, member: bytes, index_line: bytes) -> None:
        try:
            for which, (fd, data) in enumerate(((self.data, member), (self.index, index_line))):
                _write_all(fd, data, self.sizes[which])
        except OSError:
            for fd, size in zip((self.data, self.index), self.sizes, strict=True):
                try:
                    os.ftruncate(fd, size)
                except OSError:
                    pass  # a read-only or failing disk may refuse this too: the reader skips a torn tail
            raise
        self.sizes[0] += len(member)
        self.sizes[1] += len(index_line)

    def check_present(self) -> None:
        if os.fstat(self.data).st_nlink == 0:
            raise FileNotFoundError(errno.ENOENT, "the trace file was deleted while being written", self.paths[0])

    def close(self) -> None:
        try:
            for fd in (self.data, self.index):
                os.fsync(fd)
        finally:
            self.discard()

    def discard(self) -> None:
        for fd in (self.data, self.index):
            try:
                os.close(fd)
            except OSError:
                pass  # EIO on close: nothing more to do for a part given up
        self.data = self.index = -1

    def remove(self) -> None:
        for path in self.paths:
            try:
                os.unlink(path)
            except OSError:
                pass


def _write_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


def _writable(directory: str, free_bytes: int) -> bool:
    try:
        fs = os.statvfs(directory)
    except OSError:
        return False
    if fs.f_flag & os.ST_RDONLY or not os.access(directory, os.W_OK | os.X_OK):
        return False
    return fs.f_bavail * fs.f_frsize >= free_bytes


def serve(conn: Connection) -> None:
    """Answer requests until the socket closes."""
    part: _Part | None = None
    while True:
        try:
            op, args = conn.recv()
        except (EOFError, OSError):
            return
        try:
            result = None
            if op == "open":
                part = _Part(*args)
            elif op == "writable":
                result = _writable(*args)
            elif part is None:
                raise OSError(errno.EBADF, "no trace part is open")
            else:
                getattr(part, op)(*args)  # append, check_present, close, discard, remove
            reply = ("ok", result)
        except OutputError as exc:
            reply = ("error", "output", 0, str(exc), None)
        except OSError as exc:
            reply = ("error", "os", exc.errno, exc.strerror or str(exc), exc.filename)
        try:
            conn.send(reply)
        except OSError:
            return  # the recorder is gone


def main() -> None:
    """The process's entry point: FD is its end of the socket."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # the recorder decides when we end
        signal.signal(signum, signal.SIG_IGN)
    name_this_thread("ioo-disk")
    serve(Connection(int(sys.argv[1])))


if __name__ == "__main__":
    main()
