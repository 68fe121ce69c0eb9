"""What kind of I/O an operation is (read, write, sync, metadata), for every layer's names,
and which layer a trace's totals come from."""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from ioobserve import events as ev
from ioobserve import schema as s

KIND = "kind"
READ, WRITE, SYNC, METADATA, OTHER = "read", "write", "sync", "metadata", "other"
KINDS = (READ, WRITE, SYNC, METADATA, OTHER)
DATA_KINDS = (READ, WRITE)

# By the name each layer gives its ops in a trace (POSIX wrappers are labelled like the
# syscall: "read", "pread"; DFTracer's POSIX layer uses libc's names: "read", "pread64").
READ_NAMES = frozenset(ev.READ_OPS | {"pread", "fread", "fgets", "fscanf", "vfscanf", "vfs_read", "block_read",
                                      "H5Dread", "H5Aread"}
                       | {name for name in ev.OP_NAMES if name.startswith("MPI_File_read")})
WRITE_NAMES = frozenset(ev.WRITE_OPS | {"pwrite", "fwrite", "fputs", "fprintf", "vfprintf", "vfs_write", "block_write",
                                        "H5Dwrite", "H5Awrite"}
                        | {name for name in ev.OP_NAMES if name.startswith("MPI_File_write")})
SYNC_NAMES = frozenset({"fsync", "fdatasync", "sync_file_range", "syncfs", "vfs_fsync", "block_flush", "fflush",
                        "H5Fflush", "MPI_File_sync", "msync"})
# Not I/O of a file's data or its metadata: the page cache's and the interpreter's view of the
# same work, and descriptor bookkeeping.
OTHER_NAMES = frozenset({"cache_miss", "cache_add", "readahead", "readahead_async", "block_discard", "block_other",
                         "import", "dup", "dup2", "dup3", "fcntl", "mmap", "setvbuf"})
OPEN_NAMES = frozenset({"open", "openat", "openat2", "creat", "open64", "openat64", "fopen", "fopen64", "fdopen"})
STAT_NAMES = frozenset({"stat", "lstat", "fstat", "newfstatat", "statx", "access", "faccessat", "faccessat2",
                        "xstat", "xstat64", "lxstat", "lxstat64", "fxstat", "fxstat64", "__xstat", "__xstat64",
                        "__lxstat", "__lxstat64", "__fxstat", "__fxstat64", "fstatat"})
# The layers that see every call a program made, best first: the totals come from one of
# them, so that the same I/O seen at several layers is counted once.
IO_LAYERS = (s.LAYER_SYSCALL, s.LAYER_POSIX, s.LAYER_STDIO, s.LAYER_MPIIO, s.LAYER_HDF5)


def op_kind() -> pl.Expr:
    """KIND of each event: read, write, sync, metadata or other. The output side of a copy
    (sendfile, copy_file_range, splice) is a write, its input side a read."""
    op = pl.col(s.OP)
    copy_out = op.is_in(sorted(ev.COPY_OPS)) & ((pl.col(s.FLAGS) & ev.F_PAIR_OUT) != 0)
    return (
        pl.when(copy_out | op.is_in(sorted(WRITE_NAMES))).then(pl.lit(WRITE))
        .when(op.is_in(sorted(READ_NAMES | ev.COPY_OPS))).then(pl.lit(READ))
        .when(op.is_in(sorted(SYNC_NAMES))).then(pl.lit(SYNC))
        .when(op.is_in(sorted(OTHER_NAMES)) | (pl.col(s.LAYER) == s.LAYER_PYTHON)).then(pl.lit(OTHER))
        .otherwise(pl.lit(METADATA))
        .cast(pl.Enum(KINDS))
    )


def io_layer(layers: Iterable[str]) -> str | None:
    """The layer totals are taken from: the syscall layer when the trace has it (ours), else
    the highest library layer present (DFTracer's POSIX), else None."""
    present = set(layers)
    return next((layer for layer in IO_LAYERS if layer in present), None)
