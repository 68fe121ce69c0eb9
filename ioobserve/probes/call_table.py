"""The library calls the uprobe layers trace, and how the probes read each one.

One row per op: the symbols that implement it (aliases at one address are probed once) and
where its descriptor, byte count, offset and stat buffer are among the C arguments. The
rows become the `call_specs` map of ebpf_probes/syscalls.bpf.c, like the syscall table.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ioobserve import events as ev


@dataclass(frozen=True)
class CallSpec:
    """One traced library function (argument indexes are C ones; -1 for none)."""

    op: str
    symbols: tuple[str, ...]
    library: int = ev.LIB_LIBC
    flags: int = 0
    stream: int = -1
    fd: int = -1
    count: int = -1
    size: int = -1
    offset: int = -1
    aux: int = -1
    stat: int = -1


# glibc's stdio: the FILE * argument names the file (its _fileno). fread/fwrite return items.
# Per-character calls (fgetc, fputc, getc, putc) are left out: a uprobe costs a trap each.
STDIO = (
    CallSpec("fopen", ("fopen", "fopen64"), flags=ev.C_RET_STREAM),
    CallSpec("fdopen", ("fdopen",), flags=ev.C_RET_STREAM, fd=0),
    CallSpec("freopen", ("freopen", "freopen64"), flags=ev.C_RET_STREAM),
    CallSpec("fclose", ("fclose",), stream=0),
    CallSpec("fread", ("fread", "fread_unlocked"), flags=ev.C_RET_ITEMS, stream=3, count=2, size=1),
    CallSpec("fwrite", ("fwrite", "fwrite_unlocked"), flags=ev.C_RET_ITEMS, stream=3, count=2, size=1),
    CallSpec("fgets", ("fgets", "fgets_unlocked"), stream=2, count=1),
    CallSpec("fputs", ("fputs", "fputs_unlocked"), stream=1),
    CallSpec("fprintf", ("fprintf",), stream=0),
    CallSpec("vfprintf", ("vfprintf",), stream=0),
    CallSpec("fscanf", ("fscanf", "__isoc99_fscanf", "__isoc23_fscanf"), stream=0),
    CallSpec("vfscanf", ("vfscanf", "__isoc99_vfscanf", "__isoc23_vfscanf"), stream=0),
    CallSpec("fseek", ("fseek",), stream=0, offset=1, aux=2),
    CallSpec("fseeko", ("fseeko", "fseeko64"), stream=0, offset=1, aux=2),
    CallSpec("ftell", ("ftell",), stream=0),
    CallSpec("ftello", ("ftello", "ftello64"), stream=0),
    CallSpec("rewind", ("rewind",), stream=0),
    CallSpec("fflush", ("fflush", "fflush_unlocked"), stream=0),
    CallSpec("setvbuf", ("setvbuf",), stream=0, count=3, aux=2),
)

# libc's POSIX wrappers, as a program calls them (libc's own internal calls are not counted).
POSIX = (
    CallSpec("posix_open", ("open", "open64"), flags=ev.C_RET_FD, aux=1),
    CallSpec("posix_openat", ("openat", "openat64"), flags=ev.C_RET_FD, aux=2),
    CallSpec("posix_creat", ("creat", "creat64"), flags=ev.C_RET_FD),
    CallSpec("posix_close", ("close",), fd=0),
    CallSpec("posix_read", ("read",), fd=0, count=2),
    CallSpec("posix_write", ("write",), fd=0, count=2),
    CallSpec("posix_pread", ("pread", "pread64"), fd=0, count=2, offset=3),
    CallSpec("posix_pwrite", ("pwrite", "pwrite64"), fd=0, count=2, offset=3),
    CallSpec("posix_lseek", ("lseek", "lseek64"), fd=0, offset=1, aux=2),
    CallSpec("posix_fsync", ("fsync",), fd=0),
    CallSpec("posix_fdatasync", ("fdatasync",), fd=0),
    CallSpec("posix_stat", ("stat", "stat64"), stat=1),
    CallSpec("posix_lstat", ("lstat", "lstat64"), stat=1),
    CallSpec("posix_fstat", ("fstat", "fstat64"), fd=0),
    CallSpec("posix_fstatat", ("fstatat", "fstatat64"), stat=2),
)

LIBC = STDIO + POSIX


def call_spec_array(specs: tuple[CallSpec, ...] = LIBC) -> np.ndarray:
    """The `call_specs` map contents: a row per op code (zero rows for other ops)."""
    table = np.zeros(ev.MAX_OPS, dtype=ev.CALL_SPEC)
    for spec in specs:
        table[ev.OP_CODES[spec.op]] = (
            spec.library, spec.flags, spec.stream, spec.fd, spec.count, spec.size, spec.offset, spec.aux, spec.stat, 0,
        )
    return table


def entry_program(op: str) -> str:
    """Name of the entry program for an op in the .bpf.c file (one per op: the op is its constant)."""
    return f"enter_{op}"
