"""The disk process of a trace writer (started by ioobserve.trace.disk): it alone makes the
trace's file-system calls, one request at a time over a socket, so a disk that hangs (a hung
NFS server, a stuck FUSE daemon: a write that sleeps in the kernel and cannot be killed)
leaves this process stuck, never the recorder.

    python -m ioobserve.trace.diskd FD

Requests are (op, args) tuples; each gets ("ok", value) or ("error", kind, errno, message,
filename). It ends when the socket closes; signals from the terminal are the recorder's to act on.
"""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import sys
from multiprocessing.connection import Connection

from ioobserve.trace.output import OutputError, create_private_file
from ioobserve.thread_names import name_this_thread


class _Part:
    """The open part: data and index appended at explicit offsets, cut back when a write fails."""

    def __init__(self, data_path: str, index_path: str) -> None:
        self.paths = (data_path, index_path)
        self.data = create_private_file(os.path.dirname(data_path), os.path.basename(data_path))
        try:  # readers see the file is being written (ioobserve.trace.columnar); a file system without locks just does not say
            fcntl.flock(self.data, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            pass
        try:
            self.index = create_private_file(os.path.dirname(index_path), os.path.basename(index_path))
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
