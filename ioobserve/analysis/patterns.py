"""How each file descriptor was read and written: consecutive (at the offset the previous
access of the same direction ended), sequential (at or beyond it) or random (before it),
as Darshan counts them; consecutive accesses are also sequential."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from ioobserve.data import schema as s
from ioobserve.data.operations import DATA_KINDS, KIND

CONSECUTIVE, SEQUENTIAL, RANDOM = "consecutive", "sequential", "random"
UNALIGNED = "unaligned"  # accesses whose offset or size asked for is not a multiple of 4 KiB
PAGE = 4096


def access_patterns(events: pl.LazyFrame, by: Sequence[str] = ()) -> pl.LazyFrame:
    """Per group and KIND (read, write): how many accesses were CONSECUTIVE, SEQUENTIAL,
    RANDOM and UNALIGNED (to 4 KiB pages). Events need KIND, in time order; those without an offset
    (memory-mapped, DFTracer's read()) are left out. A stream's first access is sequential, and
    consecutive when it starts at 0."""
    stream = list(dict.fromkeys([*by, s.PID, s.FD, KIND]))  # by should hold the file (PATH or FILE_ID)
    data = events.filter(pl.col(KIND).is_in(DATA_KINDS) & (pl.col(s.OFFSET) >= 0)).select(
        *stream, s.TS, s.OFFSET, s.BYTES, s.BYTES_REQ)
    ended = (pl.col(s.OFFSET) + pl.col(s.BYTES).cast(pl.Int64)).shift(1).over(stream).fill_null(0)
    # In time order, each stream's accesses are too: the window needs no sort by stream.
    classified = data.with_columns(
        (pl.col(s.OFFSET) == ended).alias(CONSECUTIVE), (pl.col(s.OFFSET) >= ended).alias(SEQUENTIAL))
    return (
        classified.group_by(*by, KIND).agg(
            pl.col(CONSECUTIVE).sum().cast(pl.UInt64), pl.col(SEQUENTIAL).sum().cast(pl.UInt64),
            (~pl.col(SEQUENTIAL)).sum().cast(pl.UInt64).alias(RANDOM),
            (((pl.col(s.OFFSET) % PAGE) != 0) | ((pl.col(s.BYTES_REQ) % PAGE) != 0)).sum().cast(pl.UInt64).alias(UNALIGNED))
        .sort(*by, KIND)
    )
