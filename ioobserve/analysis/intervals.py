"""Time covered by events: the union of their [ts, ts + dur) intervals, per group, so that
overlapping I/O (threads, processes, nodes) is counted once, as DFTracer's analyzer does."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from ioobserve import schema as s

START, END = "start", "end"
BUSY_NS = "busy_ns"


def _over(expr: pl.Expr, by: Sequence[str]) -> pl.Expr:
    return expr.over(list(by)) if by else expr


def busy_intervals(events: pl.LazyFrame, by: Sequence[str] = ()) -> pl.LazyFrame:
    """The union of the events' intervals per group: one row per maximal busy interval
    (START, END in ns; touching intervals merge)."""
    ordered = events.select(*by, pl.col(s.TS).alias(START), (pl.col(s.TS) + pl.col(s.DUR)).alias(END)).sort(*by, START)
    reached = _over(pl.col(END).cum_max().shift(1), by)  # the furthest end of the earlier intervals
    segment = _over((pl.col(START) > reached).fill_null(True).cum_sum(), by)
    return (
        ordered.with_columns(segment.alias("_segment"))
        .group_by(*by, "_segment").agg(pl.col(START).min(), pl.col(END).max())
        .drop("_segment").sort(*by, START)
    )


def busy_time(events: pl.LazyFrame, by: Sequence[str] = ()) -> pl.LazyFrame:
    """BUSY_NS per group: the time at least one of its events was in progress."""
    intervals = busy_intervals(events, by)
    total = (pl.col(END) - pl.col(START)).sum().alias(BUSY_NS)
    return intervals.group_by(*by).agg(total).sort(*by) if by else intervals.select(total)


def bandwidth(events: pl.LazyFrame, by: Sequence[str] = ()) -> pl.LazyFrame:
    """Bytes moved per second of busy time, per group (BYTES summed over BUSY_NS); the
    events should be one layer's, so no byte is counted twice."""
    moved = events.group_by(*by).agg(pl.col(s.BYTES).sum()) if by else events.select(pl.col(s.BYTES).sum())
    busy = busy_time(events, by)
    joined = moved.join(busy, on=list(by), how="left") if by else pl.concat([moved, busy], how="horizontal")
    return joined.with_columns(
        pl.when(pl.col(BUSY_NS) > 0).then(pl.col(s.BYTES) * 1e9 / pl.col(BUSY_NS)).alias("bytes_per_s"))
