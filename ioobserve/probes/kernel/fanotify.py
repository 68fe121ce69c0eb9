"""fanotify(7), the little of it the exec gate needs: a group that hears every exec of a file
on the marked file systems before the exec goes on (FAN_OPEN_EXEC_PERM, Linux 5.0+), and
answers each one. The exec'ing task waits in the kernel, killable only: its signals, its
parent's waitpid() and its threads see nothing. Closing the group lets every exec it holds go
on, and removes its marks."""

from __future__ import annotations

import contextlib
import ctypes
import os
import struct
from dataclasses import dataclass

FAN_CLOEXEC, FAN_NONBLOCK, FAN_CLASS_CONTENT = 0x1, 0x2, 0x4
FAN_UNLIMITED_QUEUE, FAN_UNLIMITED_MARKS = 0x10, 0x20
FAN_OPEN_EXEC_PERM = 0x40000
FAN_MARK_ADD, FAN_MARK_IGNORED_MASK, FAN_MARK_IGNORED_SURV_MODIFY = 0x1, 0x20, 0x40
FAN_MARK_FILESYSTEM, FAN_MARK_EVICTABLE = 0x100, 0x200
FAN_ALLOW = 0x01
FAN_NOFD = -1
AT_FDCWD = -100
# File systems no program is exec'd from (or that fanotify cannot mark).
PSEUDO_FILESYSTEMS = frozenset({
    "proc", "sysfs", "cgroup", "cgroup2", "devpts", "devtmpfs", "mqueue", "tracefs", "debugfs", "securityfs",
    "pstore", "bpf", "configfs", "fusectl", "hugetlbfs", "autofs", "binfmt_misc", "efivarfs", "rpc_pipefs", "nsfs",
})
_EVENT = struct.Struct("<IBBHQii")  # event_len, vers, reserved, metadata_len, mask, fd, pid
_RESPONSE = struct.Struct("<iI")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.fanotify_init.argtypes = [ctypes.c_uint, ctypes.c_uint]
_libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int, ctypes.c_char_p]


def _checked(result: int, what: str) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")
    return result


@dataclass(frozen=True)
class ExecEvent:
    """One exec waiting for an answer: the file being exec'd (an fd of ours) and the process."""

    fd: int
    pid: int


class ExecPermissions:
    """A fanotify group of exec permission events (root only)."""

    def __init__(self):
        flags = FAN_CLASS_CONTENT | FAN_CLOEXEC | FAN_NONBLOCK | FAN_UNLIMITED_QUEUE | FAN_UNLIMITED_MARKS
        self.fd = _checked(_libc.fanotify_init(flags, os.O_RDONLY | os.O_CLOEXEC | os.O_LARGEFILE), "fanotify_init")

    def mark_filesystem(self, path: str) -> None:
        """Hear every exec of a file on the file system holding `path` (OSError if refused)."""
        _checked(_libc.fanotify_mark(self.fd, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, FAN_OPEN_EXEC_PERM, AT_FDCWD,
                                     path.encode()), f"fanotify_mark {path}")

    def ignore(self, fd: int) -> bool:
        """Hear no more execs of the file at `fd` (until the kernel evicts its inode); False
        where the kernel refuses (before 5.19: no evictable marks, so none, as they would pin
        every inode)."""
        flags = FAN_MARK_ADD | FAN_MARK_IGNORED_MASK | FAN_MARK_IGNORED_SURV_MODIFY | FAN_MARK_EVICTABLE
        return _libc.fanotify_mark(self.fd, flags, FAN_OPEN_EXEC_PERM, fd, None) == 0

    def read(self) -> list[ExecEvent]:
        """The execs waiting now ([] if none)."""
        try:
            data = os.read(self.fd, 64 * _EVENT.size)
        except BlockingIOError:
            return []
        found, at = [], 0
        while at + _EVENT.size <= len(data):
            length, _, _, _, _, fd, pid = _EVENT.unpack_from(data, at)
            if length < _EVENT.size:
                break
            if fd != FAN_NOFD:
                found.append(ExecEvent(fd, pid))
            at += length
        return found

    def allow(self, event: ExecEvent) -> None:
        """Let the exec go on, and close its fd."""
        try:
            os.write(self.fd, _RESPONSE.pack(event.fd, FAN_ALLOW))
        finally:
            os.close(event.fd)

    def close(self) -> None:
        """Let every exec still waiting go on, and drop the marks (safe to call twice)."""
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1


def filesystems(mountinfo: str) -> dict[int, list[str]]:
    """{kernel dev_t: [mount points]} of the file systems programs may be exec'd from, as a
    /proc/PID/mountinfo text lists them."""
    found: dict[int, list[str]] = {}
    for line in mountinfo.splitlines():
        fields = line.split()
        try:
            separator = fields.index("-")
            kind, (major, minor) = fields[separator + 1], fields[2].split(":")
        except (ValueError, IndexError):
            continue
        if kind in PSEUDO_FILESYSTEMS:
            continue
        point = fields[4].replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
        found.setdefault((int(major) << 20) | int(minor), []).append(point)
    return found
