"""The one table of operations: what kind of I/O each operation a trace may name is (data
read, data write, sync, metadata, other), in every layer of ours and in DFTracer's names, and
which layer each of our op codes belongs to. The summary, `top`, `serve` and the analysis
all classify through it (a leaf module: events and schema only)."""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from ioobserve.data import events as ev
from ioobserve.data import schema as s

KIND = "kind"
READ, WRITE, SYNC, METADATA, OTHER = "read", "write", "sync", "metadata", "other"
KINDS = (READ, WRITE, SYNC, METADATA, OTHER)
DATA_KINDS = (READ, WRITE)

# By the name each layer gives its ops in a trace (POSIX wrappers are labelled like the
# syscall: "read", "pread"; DFTracer's POSIX layer uses libc's names: "read", "pread64").
READ_NAMES = frozenset(ev.READ_OPS | ev.ASYNC_READ_LABELS | ev.NET_READ_LABELS | ev.TLS_READ_OPS | {"pread", "fread", "fgets", "fscanf", "vfscanf", "vfs_read",
                                                               "vfs_kernel_read",
                                                               "block_read", "H5Dread", "H5Aread"}
                       | {name for name in ev.OP_NAMES if name.startswith("MPI_File_read")})
WRITE_NAMES = frozenset(ev.WRITE_OPS | ev.ASYNC_WRITE_LABELS | ev.NET_WRITE_LABELS | ev.TLS_WRITE_OPS | {"pwrite", "fwrite", "fputs", "fprintf", "vfprintf",
                                                                  "vfs_write", "block_write", "H5Dwrite", "H5Awrite"}
                        | {name for name in ev.OP_NAMES if name.startswith("MPI_File_write")})
# An HTTP request (the HTTP layer's events): a GET reads an object, a PUT or POST writes one;
# of S3's operations, GetObject reads one and the uploads write (the others are metadata).
HTTP_READS = frozenset({"GET", "GetObject", "SelectObjectContent"})
HTTP_WRITES = frozenset({"PUT", "POST", "PutObject", "UploadPart", "UploadPartCopy", "CopyObject", "PostObject"})
SYNC_NAMES = frozenset({"fsync", "fdatasync", "fdsync", "sync_file_range", "syncfs", "vfs_fsync", "block_flush",
                        "fflush", "H5Fflush", "MPI_File_sync", "msync"})
# Not I/O of a file's data or its metadata: the page cache's and the interpreter's view of the
# same work, and descriptor bookkeeping.
# The syscalls of asynchronous I/O carry requests the IO_URING and AIO layers count.
ASYNC_SYSCALL_NAMES = frozenset(ev.OP_NAMES[ev.FIRST_ASYNC_SYSCALL_OP:ev.FIRST_URING_OP])
OTHER_NAMES = frozenset({"cache_miss", "cache_add", "readahead", "readahead_async", "block_discard", "block_other",
                         "import", "dup", "dup2", "dup3", "fcntl", "mmap", "setvbuf"} | ASYNC_SYSCALL_NAMES)
OPEN_NAMES = frozenset({"open", "openat", "openat2", "creat", "open64", "openat64", "fopen", "fopen64", "fdopen"})
STAT_NAMES = frozenset({"stat", "lstat", "fstat", "newfstatat", "statx", "access", "faccessat", "faccessat2",
                        "xstat", "xstat64", "lxstat", "lxstat64", "fxstat", "fxstat64", "__xstat", "__xstat64",
                        "__lxstat", "__lxstat64", "__fxstat", "__fxstat64", "fstatat"})
# The layers that see every call a program made, best first: the totals come from one of
# them, so that the same I/O seen at several layers is counted once.
IO_LAYERS = (s.LAYER_SYSCALL, s.LAYER_POSIX, s.LAYER_STDIO, s.LAYER_MPIIO, s.LAYER_HDF5)
# The kernel's view, counted as one: every file syscall, and the io_uring and AIO requests,
# whose I/O no read or write syscall carries (the syscall layer sees only io_uring_enter and
# io_submit, which are OTHER).
KERNEL_VIEW = (s.LAYER_SYSCALL, s.LAYER_IO_URING, s.LAYER_AIO)

KIND_OF: dict[str, str] = {
    **dict.fromkeys(OTHER_NAMES, OTHER), **dict.fromkeys(SYNC_NAMES, SYNC), **dict.fromkeys(READ_NAMES | ev.COPY_OPS | ev.VFS_COPY_OPS, READ),
    **dict.fromkeys(WRITE_NAMES, WRITE), **dict.fromkeys(HTTP_READS, READ), **dict.fromkeys(HTTP_WRITES, WRITE),
}
"""Kind by operation name, in any layer but PYTHON's (whose calls are all OTHER); a name not
in it is METADATA. A copy (sendfile, copy_file_range, splice) is READ on its input side and
WRITE on its output side."""


def op_kind(op: pl.Expr | None = None, layer: pl.Expr | None = None, copy_out: pl.Expr | None = None) -> pl.Expr:
    """KIND of each event as an Enum of KINDS: by default from the OP, LAYER and FLAGS columns
    of ioobserve.data.schema (copy_out: whether the row is a copy's output side)."""
    op = pl.col(s.OP) if op is None else op
    layer = pl.col(s.LAYER) if layer is None else layer
    copy_out = (pl.col(s.FLAGS) & ev.F_PAIR_OUT) != 0 if copy_out is None else copy_out
    by_name = op.replace_strict(KIND_OF, default=METADATA, return_dtype=pl.String)
    return (
        pl.when(layer == s.LAYER_PYTHON).then(pl.lit(OTHER))
        .when(op.is_in(sorted(ev.COPY_OPS | ev.VFS_COPY_OPS)) & copy_out).then(pl.lit(WRITE))
        .otherwise(by_name)
        .cast(pl.Enum(KINDS))
    )


def layer_of(code: int) -> str:
    """The layer of an op code (each layer's codes are one run, see ioobserve.data.events)."""
    runs = ((len(ev.OP_NAMES), s.LAYER_SYSCALL),  # codes this version does not know: "unknown" ops
            (ev.FIRST_TLS_OP, s.LAYER_TLS), (ev.FIRST_NET_OP, s.LAYER_NET),
            (ev.FIRST_MORE_VFS_OP, s.LAYER_VFS), (ev.FIRST_AIO_OP, s.LAYER_AIO), (ev.FIRST_URING_OP, s.LAYER_IO_URING),
            (ev.FIRST_ASYNC_SYSCALL_OP, s.LAYER_SYSCALL), (ev.FIRST_PYTHON_OP, s.LAYER_PYTHON), (ev.FIRST_MPIIO_OP, s.LAYER_MPIIO), (ev.FIRST_HDF5_OP, s.LAYER_HDF5),
            (ev.FIRST_VFS_OP, s.LAYER_VFS), (ev.FIRST_POSIX_OP, s.LAYER_POSIX), (ev.FIRST_STDIO_OP, s.LAYER_STDIO),
            (ev.FIRST_CACHE_OP, s.LAYER_CACHE), (ev.FIRST_BLOCK_OP, s.LAYER_BLOCK))
    for first, layer in runs:
        if code >= first:
            return layer
    return s.LAYER_SYSCALL


def io_layer(layers: Iterable[str]) -> str | None:
    """The layer totals are taken from: the syscall layer when the trace has it (ours, with
    the IO_URING and AIO layers: totals_layers), else the highest library layer present
    (DFTracer's POSIX), else None."""
    present = set(layers)
    if present & set(KERNEL_VIEW):
        return s.LAYER_SYSCALL
    return next((layer for layer in IO_LAYERS if layer in present), None)


def kernel_view(layer: pl.Expr | None = None) -> pl.Expr:
    """LAYER (Categorical) with the IO_URING and AIO layers' events given to the syscall
    layer: the kernel's view of a program's I/O, analysed as one."""
    layer = pl.col(s.LAYER) if layer is None else layer
    return (pl.when(layer.is_in(KERNEL_VIEW)).then(pl.lit(s.LAYER_SYSCALL)).otherwise(layer.cast(pl.String))
            .cast(pl.Categorical).alias(s.LAYER))


def totals_layers(layer: str | None) -> tuple[str, ...]:
    """The layers whose events make the totals when io_layer() chose `layer`."""
    if layer is None:
        return ()
    return KERNEL_VIEW if layer == s.LAYER_SYSCALL else (layer,)
