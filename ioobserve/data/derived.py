"""Columns derived from what the probes report, computed the same way live and when a trace
is read back."""

from __future__ import annotations

import polars as pl

from ioobserve.data import events as ev
from ioobserve.data import schema as s

_BYTES_OPS = sorted(ev.BYTES_OPS)
_MPIIO_TRANSFER_OPS = sorted(ev.MPIIO_TRANSFER_OPS)
# Layers whose failures return -errno; library calls return their own codes (-1, MPI errors).
_ERRNO_LAYERS = [s.LAYER_SYSCALL, s.LAYER_IO_URING, s.LAYER_AIO, s.LAYER_NET, s.LAYER_VFS, s.LAYER_BLOCK, s.LAYER_CACHE]


def bytes_moved(op: pl.Expr, ret: pl.Expr, bytes_req: pl.Expr) -> pl.Expr:
    """Bytes an event moved: its return for the ops that return bytes, what an MPI-IO
    read or write asked for when it succeeded, 0 for the others."""
    return (pl.when(op.is_in(_BYTES_OPS)).then(ret.clip(lower_bound=0))
            .when(op.is_in(_MPIIO_TRANSFER_OPS) & (ret == 0)).then(bytes_req)
            .otherwise(0).cast(pl.UInt64))


def errno_of(ret: pl.Expr, layer: pl.Expr) -> pl.Expr:
    """The errno of a failed kernel-side event (-ret); 0 for the others and for library calls."""
    return pl.when((ret < 0) & layer.is_in(_ERRNO_LAYERS)).then(-ret).otherwise(0).cast(pl.Int16, strict=False)  # MAX_ERRNO is 4095
