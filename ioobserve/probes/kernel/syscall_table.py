"""Which syscalls the syscall layer traces, their numbers per architecture, and how
the probes read each one's arguments (the `syscall_specs` map)."""

from __future__ import annotations

import platform
from dataclasses import dataclass

import numpy as np

from ioobserve.data import events as ev


class UnsupportedArchitecture(Exception):
    """No syscall numbers are known for this machine's architecture."""


@dataclass(frozen=True)
class Spec:
    """How one syscall's arguments map onto an event (argument indexes, -1 for none)."""

    op: str
    flags: int = 0
    fd: int = -1
    path: int = -1
    dirfd: int = -1
    count: int = -1
    offset: int = -1
    aux: int = -1
    buf: int = -1
    fd2: int = -1
    path2: int = -1
    dirfd2: int = -1
    net_op: str = ""  # the op when its descriptor is an Internet socket (the net layer); "": not traced then
    net_only: bool = False  # a socket call: in the table only with the net layer on


_POS = ev.S_FILE_POS
SPECS: tuple[Spec, ...] = (
    Spec("open", ev.S_RET_FD, path=0, aux=1),
    Spec("openat", ev.S_RET_FD, dirfd=0, path=1, aux=2),
    Spec("openat2", ev.S_RET_FD | ev.S_HOW_FLAGS, dirfd=0, path=1, aux=2),
    Spec("creat", ev.S_RET_FD, path=0, aux=1),
    Spec("close", fd=0),
    Spec("close_range", aux=1, offset=0),
    Spec("read", _POS, fd=0, count=2, net_op="net_read"),
    Spec("pread64", fd=0, count=2, offset=3),
    Spec("readv", _POS | ev.S_IOV, fd=0, count=2, net_op="net_readv"),
    Spec("preadv", ev.S_IOV, fd=0, count=2, offset=3),
    Spec("preadv2", ev.S_IOV | ev.S_OFFSET_NEG, fd=0, count=2, offset=3, aux=5),
    Spec("write", _POS, fd=0, count=2, net_op="net_write"),
    Spec("pwrite64", fd=0, count=2, offset=3),
    Spec("writev", _POS | ev.S_IOV, fd=0, count=2, net_op="net_writev"),
    Spec("pwritev", ev.S_IOV, fd=0, count=2, offset=3),
    Spec("pwritev2", ev.S_IOV | ev.S_OFFSET_NEG, fd=0, count=2, offset=3, aux=5),
    Spec("lseek", fd=0, offset=1, aux=2),
    Spec("fsync", fd=0),
    Spec("fdatasync", fd=0),
    Spec("sync_file_range", fd=0, offset=1, count=2, aux=3),
    Spec("syncfs", fd=0),
    Spec("stat", ev.S_STATBUF, path=0, buf=1),
    Spec("lstat", ev.S_STATBUF, path=0, buf=1),
    Spec("fstat", fd=0),
    Spec("newfstatat", ev.S_STATBUF | ev.S_EMPTY_PATH, dirfd=0, path=1, buf=2, aux=3),
    Spec("statx", ev.S_STATX | ev.S_EMPTY_PATH, dirfd=0, path=1, aux=2, buf=4),
    Spec("access", path=0, aux=1),
    Spec("faccessat", dirfd=0, path=1, aux=2),
    Spec("faccessat2", dirfd=0, path=1, aux=2),
    Spec("unlink", path=0),
    Spec("unlinkat", dirfd=0, path=1, aux=2),
    Spec("rename", path=0, path2=1),
    Spec("renameat", dirfd=0, path=1, dirfd2=2, path2=3),
    Spec("renameat2", dirfd=0, path=1, dirfd2=2, path2=3, aux=4),
    Spec("mkdir", path=0, aux=1),
    Spec("mkdirat", dirfd=0, path=1, aux=2),
    Spec("rmdir", path=0),
    Spec("getdents64", fd=0, count=2),
    Spec("truncate", path=0, offset=1),
    Spec("ftruncate", fd=0, offset=1),
    Spec("fallocate", fd=0, aux=1, offset=2, count=3),
    Spec("mmap", ev.S_MMAP, fd=4, count=1, offset=5, aux=3),
    Spec("sendfile", ev.S_PAIR | ev.S_OFFSET_PTR, fd=1, fd2=0, offset=2, count=3),
    Spec("copy_file_range", ev.S_PAIR | ev.S_OFFSET_PTR, fd=0, offset=1, fd2=2, count=4),
    Spec("splice", ev.S_PAIR | ev.S_OFFSET_PTR, fd=0, offset=1, fd2=2, count=4),
    Spec("dup", fd=0),
    Spec("dup2", fd=0, aux=1),
    Spec("dup3", fd=0, aux=1),
    Spec("fcntl", ev.S_FCNTL_DUP, fd=0, aux=1),
    # Asynchronous I/O: the requests are the IO_URING and AIO layers' events (their parent is
    # the call that submitted them); arg is the AIO context's id or the ring's fd.
    Spec("io_setup", aux=0),
    Spec("io_destroy", aux=0),
    Spec("io_submit", aux=0),
    Spec("io_cancel", aux=0),
    Spec("io_getevents", aux=0),
    Spec("io_pgetevents", aux=0),
    Spec("io_uring_setup", aux=0),
    Spec("io_uring_enter", aux=0),
    Spec("io_uring_register", aux=0),
    # The net layer's own: calls only sockets take (a connect's peer is described at its exit;
    # an accept's new socket is its return). A connect's arg is its address's length.
    Spec("recvfrom", fd=0, count=2, aux=3, net_op="recvfrom", net_only=True),
    Spec("sendto", fd=0, count=2, aux=3, net_op="sendto", net_only=True),
    Spec("recvmsg", ev.S_MSGHDR, fd=0, count=1, aux=2, net_op="recvmsg", net_only=True),
    Spec("sendmsg", ev.S_MSGHDR, fd=0, count=1, aux=2, net_op="sendmsg", net_only=True),
    Spec("connect", ev.S_PEER_AT_EXIT, fd=0, aux=2, net_op="connect", net_only=True),
    Spec("accept", ev.S_RET_FD, net_op="accept", net_only=True),
    Spec("accept4", ev.S_RET_FD, aux=3, net_op="accept4", net_only=True),
)

# Syscall numbers are kernel ABI: fixed per architecture. aarch64 uses the generic table,
# which has no open/stat/rename/... (glibc calls the *at variants there).
NUMBERS: dict[str, dict[str, int]] = {
    "x86_64": {
        "read": 0, "write": 1, "open": 2, "close": 3, "stat": 4, "fstat": 5, "lstat": 6,
        "lseek": 8, "mmap": 9, "pread64": 17, "pwrite64": 18, "readv": 19, "writev": 20,
        "access": 21, "dup": 32, "dup2": 33, "sendfile": 40, "fcntl": 72, "fsync": 74,
        "fdatasync": 75, "truncate": 76, "ftruncate": 77, "rename": 82, "mkdir": 83,
        "rmdir": 84, "creat": 85, "unlink": 87, "getdents64": 217, "openat": 257,
        "mkdirat": 258, "newfstatat": 262, "unlinkat": 263, "renameat": 264, "faccessat": 269,
        "splice": 275, "sync_file_range": 277, "fallocate": 285, "dup3": 292, "preadv": 295,
        "pwritev": 296, "syncfs": 306, "renameat2": 316, "copy_file_range": 326,
        "preadv2": 327, "pwritev2": 328, "statx": 332, "close_range": 436, "openat2": 437,
        "faccessat2": 439, "io_setup": 206, "io_destroy": 207, "io_getevents": 208, "io_submit": 209,
        "io_cancel": 210, "io_pgetevents": 333, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "connect": 42, "accept": 43, "sendto": 44, "recvfrom": 45, "sendmsg": 46,
        "recvmsg": 47, "accept4": 288,
    },
    "aarch64": {
        "getdents64": 61, "read": 63, "write": 64, "readv": 65, "writev": 66, "pread64": 67,
        "pwrite64": 68, "preadv": 69, "pwritev": 70, "sendfile": 71, "splice": 76,
        "newfstatat": 79, "fstat": 80, "fsync": 82, "fdatasync": 83, "sync_file_range": 84,
        "openat": 56, "close": 57, "lseek": 62, "mkdirat": 34, "unlinkat": 35, "renameat": 38,
        "truncate": 45, "ftruncate": 46, "fallocate": 47, "faccessat": 48, "dup": 23,
        "dup3": 24, "fcntl": 25, "mmap": 222, "syncfs": 267, "renameat2": 276,
        "copy_file_range": 285, "preadv2": 286, "pwritev2": 287, "statx": 291,
        "close_range": 436, "openat2": 437, "faccessat2": 439, "io_setup": 0, "io_destroy": 1,
        "io_submit": 2, "io_cancel": 3, "io_getevents": 4, "io_pgetevents": 292, "io_uring_setup": 425,
        "io_uring_enter": 426, "io_uring_register": 427, "accept": 202, "connect": 203, "sendto": 206,
        "recvfrom": 207, "sendmsg": 211, "recvmsg": 212, "accept4": 242,
    },
}

SPEC_ENTRIES = 512  # SPEC_ENTRIES in core.bpf.c
# The kernel function behind a syscall number, where its name is not the syscall's (the
# tables' entry points: x86_64's stat is sys_newstat); the rest are sys_<name>.
ENTRY_POINTS = {"stat": "newstat", "fstat": "newfstat", "lstat": "newlstat", "sendfile": "sendfile64"}
FUNCTION_PREFIX = {"x86_64": "__x64_sys_", "aarch64": "__arm64_sys_"}


def machine_arch() -> str:
    """The architecture name used as a key of NUMBERS."""
    arch = platform.machine()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(arch, arch)


def traced_functions(arch: str | None = None, net: bool = True) -> list[str]:
    """The kernel functions of the traced syscalls (what fentry attaches to); `net`: with the
    net layer's own."""
    arch = arch or machine_arch()
    prefix, numbers = FUNCTION_PREFIX.get(arch), NUMBERS.get(arch, {})
    if prefix is None:
        return []
    return [prefix + ENTRY_POINTS.get(spec.op, spec.op) for spec in SPECS
            if spec.op in numbers and (net or not spec.net_only)]


def spec_array(arch: str | None = None, net: bool = False) -> np.ndarray:
    """The contents of the `syscall_specs` map: one entry per syscall number. Without `net`
    (the net layer), sockets are not traced and their calls have no row: they cost nothing."""
    arch = arch or machine_arch()
    if arch not in NUMBERS:
        raise UnsupportedArchitecture(f"no syscall table for {arch}")
    numbers = NUMBERS[arch]
    table = np.zeros(SPEC_ENTRIES, dtype=ev.SYSCALL_SPEC)
    for spec in SPECS:
        nr = numbers.get(spec.op)
        if nr is None or (spec.net_only and not net):
            continue
        table[nr] = (
            ev.OP_CODES[spec.op], spec.flags, spec.fd, spec.path, spec.dirfd, spec.count,
            spec.offset, spec.aux, spec.buf, spec.fd2, spec.path2, spec.dirfd2,
            ev.OP_CODES[spec.net_op] if net and spec.net_op else 0,
        )
    return table
