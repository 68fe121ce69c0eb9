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


def merge(intervals: pl.LazyFrame, by: Sequence[str] = ()) -> pl.LazyFrame:
    """Intervals (START, END columns) as their union per group: one row per maximal interval,
    in START order; touching intervals merge, empty ones vanish."""
    # In time order (one sort, a no-op on sorted input) every group is in time order too, so
    # window functions find the runs without sorting by group: a run starts where an interval
    # starts beyond all earlier ones of its group, and ends at the furthest end its last row reached.
    ordered = intervals.select(*by, START, END).filter(pl.col(END) > pl.col(START)).sort(START)
    runs = (
        ordered.with_columns(_over(pl.col(END).cum_max(), by).alias("_reached"))
        .with_columns(_over((pl.col(START) > pl.col("_reached").shift(1)).fill_null(True), by).alias("_begins"))
        .with_columns(_over(pl.col("_begins").shift(-1).fill_null(True), by).alias("_ends"))
        .with_columns(_over(pl.when(pl.col("_ends")).then(pl.col("_reached")).backward_fill(), by).alias("_end"))
    )
    return runs.filter(pl.col("_begins")).select(*by, START, pl.col("_end").alias(END))


def merge_now(intervals: pl.DataFrame, by: Sequence[str] = (), few: int = 64) -> pl.DataFrame:
    """merge, at once. With `few` groups or fewer (one job, one rank, three scopes: the usual
    case) each group is merged on its own, without windows per group, which is much faster."""
    if not by or not intervals.height:
        return merge(intervals.lazy(), by).collect()
    if intervals.select(by).unique().height > few:
        return merge(intervals.lazy(), by).collect()
    parts = []
    for part in intervals.partition_by(by, maintain_order=False):
        keys = [pl.lit(part.get_column(key).first(), intervals.schema[key]).alias(key) for key in by]
        parts.append(merge(part.lazy()).collect().select(*keys, START, END))
    return pl.concat(parts).sort(START)


def event_intervals(events: pl.LazyFrame, by: Sequence[str] = ()) -> pl.LazyFrame:
    """Each event's [TS, TS + DUR) as START, END, with the group columns."""
    return events.select(*by, pl.col(s.TS).alias(START), (pl.col(s.TS) + pl.col(s.DUR)).alias(END))


def busy_intervals(events: pl.LazyFrame, by: Sequence[str] = ()) -> pl.LazyFrame:
    """The union of the events' intervals per group: one row per maximal busy interval
    (START, END in ns; touching intervals merge)."""
    return merge(event_intervals(events, by), by)


def length(intervals: pl.LazyFrame, by: Sequence[str] = (), name: str = BUSY_NS) -> pl.LazyFrame:
    """Total length of disjoint intervals per group, as column `name`."""
    total = (pl.col(END) - pl.col(START)).sum().alias(name)
    return intervals.group_by(*by).agg(total).sort(*by) if by else intervals.select(total)


def busy_time(events: pl.LazyFrame, by: Sequence[str] = ()) -> pl.LazyFrame:
    """BUSY_NS per group: the time at least one of its events was in progress."""
    return length(busy_intervals(events, by), by)


def bandwidth(events: pl.LazyFrame, by: Sequence[str] = ()) -> pl.LazyFrame:
    """Bytes moved per second of busy time, per group (BYTES summed over BUSY_NS); the
    events should be one layer's, so no byte is counted twice."""
    moved = events.group_by(*by).agg(pl.col(s.BYTES).sum()) if by else events.select(pl.col(s.BYTES).sum())
    busy = busy_time(events, by)
    joined = moved.join(busy, on=list(by), how="left") if by else pl.concat([moved, busy], how="horizontal")
    return joined.with_columns(
        pl.when(pl.col(BUSY_NS) > 0).then(pl.col(s.BYTES) * 1e9 / pl.col(BUSY_NS)).alias("bytes_per_s"))
