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
    sorted; touching intervals merge, empty ones vanish."""
    ordered = intervals.select(*by, START, END).filter(pl.col(END) > pl.col(START)).sort(*by, START)
    reached = _over(pl.col(END).cum_max(), by)  # the furthest end up to each interval
    # Sorted, each maximal interval is a run of rows: it starts where the row starts beyond
    # everything before it in its group, and ends at the furthest end reached by its last row.
    begins = _over((pl.col(START) > pl.col("_reached").shift(1)).fill_null(True), by)
    runs = ordered.with_columns(reached.alias("_reached")).with_columns(begins.alias("_begins"))
    ends = _over(pl.col("_begins").shift(-1).fill_null(True), by)
    return runs.with_columns(ends.alias("_ends")).select(
        *(pl.col(key).filter(pl.col("_begins")) for key in by),
        pl.col(START).filter(pl.col("_begins")), pl.col("_reached").filter(pl.col("_ends")).alias(END))


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


def uncovered(intervals: pl.LazyFrame, cover: pl.LazyFrame, by: Sequence[str] = (), name: str = BUSY_NS) -> pl.LazyFrame:
    """Per group, the length of `intervals` that `cover` leaves uncovered (both merged, with
    the same group columns), by a sweep over their ends."""
    def edges(frame: pl.LazyFrame, column: str) -> pl.LazyFrame:
        step = pl.lit(1, pl.Int64)
        return pl.concat([
            frame.select(*by, pl.col(START).alias("_t"), step.alias(column)),
            frame.select(*by, pl.col(END).alias("_t"), (-step).alias(column)),
        ])

    points = pl.concat([edges(intervals, "_in"), edges(cover, "_cover")], how="diagonal").fill_null(0).sort(*by, "_t")
    inside = _over(pl.col("_in").cum_sum(), by)
    covered = _over(pl.col("_cover").cum_sum(), by)
    gap = _over(pl.col("_t").shift(-1), by) - pl.col("_t")
    swept = points.with_columns(
        pl.when((inside > 0) & (covered == 0)).then(gap).otherwise(0).fill_null(0).alias("_gap"))
    total = pl.col("_gap").sum().cast(pl.UInt64).alias(name)
    return swept.group_by(*by).agg(total).sort(*by) if by else swept.select(total)


def bandwidth(events: pl.LazyFrame, by: Sequence[str] = ()) -> pl.LazyFrame:
    """Bytes moved per second of busy time, per group (BYTES summed over BUSY_NS); the
    events should be one layer's, so no byte is counted twice."""
    moved = events.group_by(*by).agg(pl.col(s.BYTES).sum()) if by else events.select(pl.col(s.BYTES).sum())
    busy = busy_time(events, by)
    joined = moved.join(busy, on=list(by), how="left") if by else pl.concat([moved, busy], how="horizontal")
    return joined.with_columns(
        pl.when(pl.col(BUSY_NS) > 0).then(pl.col(s.BYTES) * 1e9 / pl.col(BUSY_NS)).alias("bytes_per_s"))
