"""The library calls the uprobe layers trace, and how the probes read each one.

One row per op: the symbols that implement it (aliases at one address are probed once) and
where its descriptor, byte count, offset and stat buffer are among the C arguments. The
rows become the `call_specs` map of ebpf_probes/calls.bpf.c, like the syscall table.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ioobserve.data import events as ev


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
    handle: int = -1


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

# HDF5's C API (also as bundled in wheels such as h5py's). An hid_t names no descriptor: a
# file's handle takes the file its opening syscalls touched, and the datasets and attributes
# opened through it inherit that file. `arg` keeps the object's hid.
_H5 = {"library": ev.LIB_HDF5}
_H5_NEW = {**_H5, "flags": ev.C_RET_HANDLE}  # returns a new hid on the file of handle (if any)
_H5_USE = {**_H5, "handle": 0, "aux": 0}
_H5_CLOSE = {**_H5_USE, "flags": ev.C_CLOSE_HANDLE}
HDF5 = (
    CallSpec("H5Fcreate", ("H5Fcreate",), **_H5_NEW, aux=1),
    CallSpec("H5Fopen", ("H5Fopen",), **_H5_NEW, aux=1),
    CallSpec("H5Fflush", ("H5Fflush",), **_H5_USE),
    CallSpec("H5Fclose", ("H5Fclose",), **_H5_CLOSE),
    CallSpec("H5Dcreate2", ("H5Dcreate2",), **_H5_NEW, handle=0, aux=0),
    CallSpec("H5Dopen2", ("H5Dopen2",), **_H5_NEW, handle=0, aux=0),
    CallSpec("H5Dread", ("H5Dread",), **_H5_USE),
    CallSpec("H5Dwrite", ("H5Dwrite",), **_H5_USE),
    CallSpec("H5Dclose", ("H5Dclose",), **_H5_CLOSE),
    CallSpec("H5Acreate2", ("H5Acreate2",), **_H5_NEW, handle=0, aux=0),
    CallSpec("H5Aopen", ("H5Aopen",), **_H5_NEW, handle=0, aux=0),
    CallSpec("H5Aread", ("H5Aread",), **_H5_USE),
    CallSpec("H5Awrite", ("H5Awrite",), **_H5_USE),
    CallSpec("H5Aclose", ("H5Aclose",), **_H5_CLOSE),
    CallSpec("H5Oopen", ("H5Oopen",), **_H5_NEW, handle=0, aux=0),  # any object by path: h5py's f["name"]
    CallSpec("H5Acreate_by_name", ("H5Acreate_by_name",), **_H5_NEW, handle=0, aux=0),
    CallSpec("H5Aopen_by_name", ("H5Aopen_by_name",), **_H5_NEW, handle=0, aux=0),
    # h5py closes every object by dropping its reference: recorded for the tracked ones only.
    CallSpec("H5Idec_ref", ("H5Idec_ref",), **_H5_USE, flags=ev.C_CLOSE_HANDLE | ev.C_KNOWN_HANDLE),
)

# MPI-IO, by its MPI_ names (PMPI_ ones share their address). The MPI_File handle names the
# file MPI_File_open's syscalls touched. `count` is bytes where the datatype is an MPICH
# builtin (MPICH, MVAPICH and Intel MPI encode its size in the handle), `arg` the element
# count, `offset` the explicit offset in etype units, `ret` MPI's error code.
_MPI = {"library": ev.LIB_MPIIO, "handle": 0}


def _mpi_data(op: str, at: bool) -> CallSpec:
    """A read/write: (fh, [offset,] buf, count, datatype, status); MPI-4's large-count `_c`
    twin (which mpi4py prefers) has the same arguments."""
    first = 2 if at else 1
    return CallSpec(op, (op, f"{op}_c"), **_MPI, flags=ev.C_MPI_TYPE, offset=1 if at else -1, count=first + 1,
                    size=first + 2, aux=first + 1)


MPIIO = (
    CallSpec("MPI_File_open", ("MPI_File_open",), library=ev.LIB_MPIIO, flags=ev.C_OUT_HANDLE, handle=4, aux=2),
    CallSpec("MPI_File_close", ("MPI_File_close",), **_MPI, flags=ev.C_HANDLE_PTR | ev.C_CLOSE_HANDLE),
    CallSpec("MPI_File_set_view", ("MPI_File_set_view",), **_MPI, offset=1),
    CallSpec("MPI_File_seek", ("MPI_File_seek",), **_MPI, offset=1, aux=2),
    CallSpec("MPI_File_sync", ("MPI_File_sync",), **_MPI),
    *(_mpi_data(f"MPI_File_{kind}{suffix}", at="_at" in suffix)
      for suffix in ("", "_at", "_all", "_at_all") for kind in ("read", "write")),
    *(_mpi_data(f"MPI_File_{kind}_{how}", at=False) for how in ("shared", "ordered") for kind in ("read", "write")),
)

# The interpreter (libpython or a python binary holding the runtime): every import statement
# calls PyImport_ImportModuleLevelObject(name, ...), even for a module already loaded, so only
# the ones that did file I/O are kept; imports made while importing are their own events.
# Python's open() is _io.open, whose C function _io_open has no symbol in a stripped binary:
# ioobserve.python.methods finds it through the _io module's method table.
PYTHON = (
    CallSpec("py_import", ("PyImport_ImportModuleLevelObject",), library=ev.LIB_PYTHON,
             flags=ev.C_NESTS | ev.C_NEEDS_IO | ev.C_PY_NAME | ev.C_RET_OBJECT),
    CallSpec("py_open", ("_io_open",), library=ev.LIB_PYTHON, flags=ev.C_NESTS | ev.C_RET_OBJECT),
)


# OpenSSL's libssl: the plaintext a program reads and writes through an SSL, and the socket
# SSL_set_fd puts it on (the SSL * is the handle every later call names the socket by). The
# _ex forms return 1 and the bytes through their fourth argument.
_SSL = {"library": ev.LIB_SSL, "handle": 0}
TLS = (
    CallSpec("SSL_read", ("SSL_read",), **_SSL, count=2),
    CallSpec("SSL_write", ("SSL_write",), **_SSL, count=2),
    CallSpec("SSL_read_ex", ("SSL_read_ex",), **_SSL, flags=ev.C_OUT_BYTES, count=2, aux=3),
    CallSpec("SSL_write_ex", ("SSL_write_ex",), **_SSL, flags=ev.C_OUT_BYTES, count=2, aux=3),
    CallSpec("SSL_set_fd", ("SSL_set_fd",), **_SSL, flags=ev.C_BIND_HANDLE, fd=1),
)


# Calls that return a C int (status or descriptor), whose register's upper half is noise.
INT_RETURNS = frozenset(
    {"fclose", "fputs", "fprintf", "vfprintf", "fscanf", "vfscanf", "fseek", "fseeko", "fflush", "setvbuf"}
    | {spec.op for spec in POSIX if spec.op not in ("posix_read", "posix_write", "posix_pread", "posix_pwrite", "posix_lseek")}
    | {"H5Fflush", "H5Fclose", "H5Dread", "H5Dwrite", "H5Dclose", "H5Aread", "H5Awrite", "H5Aclose", "H5Idec_ref"}
    | {spec.op for spec in MPIIO} | {spec.op for spec in TLS}
)


def call_spec_array(specs: tuple[CallSpec, ...] = LIBC + HDF5 + MPIIO + TLS) -> np.ndarray:
    """The `call_specs` map contents: a row per op code (zero rows for other ops)."""
    table = np.zeros(ev.MAX_OPS, dtype=ev.CALL_SPEC)
    for spec in specs:
        table[ev.OP_CODES[spec.op]] = (
            spec.library, spec.flags | (ev.C_RET_INT if spec.op in INT_RETURNS else 0), spec.stream, spec.fd, spec.count, spec.size, spec.offset, spec.aux, spec.stat,
            spec.handle,
        )
    return table


def entry_program(op: str) -> str:
    """Name of the entry program for an op in the .bpf.c file (one per op: the op is its constant)."""
    return f"enter_{op}"


def call_entries(specs: tuple[CallSpec, ...] = LIBC + HDF5 + MPIIO + TLS + PYTHON) -> str:
    """The entry programs of these ops, as calls.bpf.c's CALL_ENTRY list (its
    IOO_CALL_ENTRIES): `CALL_ENTRY(op, IOO_OP_<OP>)` each, the op's constant in common.h."""
    return " ".join(f"CALL_ENTRY({spec.op}, IOO_OP_{spec.op.upper()})" for spec in specs)
