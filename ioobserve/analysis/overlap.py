"""I/O that compute did not hide. A thread counts as computing between its I/O calls (from
its first to its last): unoverlapped I/O is the time some thread was in I/O while no thread
was computing, the part of the I/O a job waited for, as DFTracer's analyzer reports it."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from ioobserve import schema as s
from ioobserve.analysis.intervals import END, START, busy_intervals, merge, uncovered

UNOVERLAPPED_NS = "unoverlapped_ns"
THREAD = (s.PID, s.TID)


def io_and_compute(events: pl.LazyFrame, by: Sequence[str] = (), unit: Sequence[str] = THREAD) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """(I/O, compute) intervals per group, each merged: the union of every unit's (thread's)
    busy intervals, and the union of the gaps between them."""
    keys = list(dict.fromkeys([*by, *unit]))
    io = busy_intervals(events, keys)
    gaps = io.select(*keys, pl.col(END).alias(START), pl.col(START).shift(-1).over(keys).alias(END)).drop_nulls(END)
    return merge(io, by), merge(gaps.filter(pl.col(END) > pl.col(START)), by)


def unoverlapped(io: pl.LazyFrame, compute: pl.LazyFrame, by: Sequence[str] = ()) -> pl.LazyFrame:
    """UNOVERLAPPED_NS per group: I/O time with no compute beside it."""
    return uncovered(io, compute, by, UNOVERLAPPED_NS)
