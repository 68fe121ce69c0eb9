"""Time covered by events: the union of their [ts, ts + dur) intervals, per group, so that
overlapping I/O (threads, processes, nodes) is counted once, as DFTracer's analyzer does."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from ioobserve.data import schema as s

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


def merge_now(intervals: pl.DataFrame, by: Sequence[str] = ()) -> pl.DataFrame:
    """merge, at once, in numpy: groups numbered exactly (a dense rank of their keys), each
    group's intervals together in time order (a stable radix sort of the numbers), and the
    running furthest end restarting at each group (each group's times offset into a range of
    its own). Several times faster than windows per group, or a query per group; the windows
    stay where the offsets would overflow 64 bits (times decades apart)."""
    frame = intervals.select(*by, START, END).filter(pl.col(END) > pl.col(START))
    if not frame.height:
        return frame
    starts = frame.get_column(START).to_numpy().astype(np.int64)
    ends = frame.get_column(END).to_numpy().astype(np.int64)
    codes = (frame.select(pl.struct(by).rank("dense")).to_series().to_numpy().astype(np.int64) - 1 if by
             else np.zeros(frame.height, np.int64))
    first, span = int(starts.min()), int(ends.max() - starts.min()) + 1
    if (int(codes.max()) + 1) * span >= 1 << 62:
        return merge(frame.lazy(), by).collect()
    if (starts[1:] < starts[:-1]).any():
        order = np.argsort(starts, kind="stable")
        starts, ends, codes, rows = starts[order], ends[order], codes[order], order
    else:
        rows = np.arange(frame.height)
    order = np.argsort(codes.astype(np.uint16) if codes.max() < 1 << 16 else codes, kind="stable")
    starts, ends, codes, rows = starts[order], ends[order], codes[order], rows[order]
    offset = codes * span - first
    reached = np.maximum.accumulate(ends + offset) - offset
    begins = np.empty(len(codes), dtype=bool)
    begins[0] = True
    begins[1:] = (codes[1:] != codes[:-1]) | (starts[1:] > reached[:-1])
    heads = np.flatnonzero(begins)
    tails = np.append(heads[1:] - 1, len(codes) - 1)
    by_start = np.argsort(starts[heads], kind="stable")
    heads, tails = heads[by_start], tails[by_start]
    merged = pl.DataFrame([pl.Series(START, starts[heads]).cast(frame.schema[START]),
                           pl.Series(END, reached[tails]).cast(frame.schema[END])])
    return pl.concat([frame.select(by).gather(rows[heads]), merged], how="horizontal") if by else merged


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
