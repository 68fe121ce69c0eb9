"""Per file: the byte ranges read (for re-reads), and opens that a stat of the same path
came just before (a metadata round trip per file)."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from ioobserve.analysis.intervals import END, START, merge
from ioobserve.data import schema as s
from ioobserve.data.operations import KIND, OPEN_NAMES, READ, STAT_NAMES

OPENS, OPENS_AFTER_STAT = "opens", "opens_after_stat"


def read_ranges(events: pl.LazyFrame, by: Sequence[str] = ()) -> pl.LazyFrame:
    """The union of the byte ranges read from each PATH (START, END in bytes), per group;
    reads without an offset are left out. Needs KIND."""
    reads = events.filter((pl.col(KIND) == READ) & (pl.col(s.OFFSET) >= 0) & (pl.col(s.BYTES) > 0)
                          & pl.col(s.PATH).is_not_null())
    ranges = reads.select(*by, s.PATH, pl.col(s.OFFSET).cast(pl.UInt64).alias(START),
                          (pl.col(s.OFFSET).cast(pl.UInt64) + pl.col(s.BYTES)).alias(END))
    return merge(ranges.unique(), [*by, s.PATH])  # a range read again is one: fewer to sort


def _thread_calls(events: pl.LazyFrame, by: Sequence[str]) -> tuple[list[str], pl.LazyFrame]:
    """The calls naming a path, in time order (as the events come: windows and groups per
    thread keep it, so nothing is sorted by thread)."""
    thread = list(dict.fromkeys([*by, s.PID, s.TID]))
    return thread, events.filter(pl.col(s.PATH).is_not_null()).select(*thread, s.TS, s.OP, s.PATH)


def stat_then_open(events: pl.LazyFrame, by: Sequence[str] = ()) -> pl.LazyFrame:
    """Per group: OPENS, and OPENS_AFTER_STAT, those whose thread's previous call (of those
    given) was a stat or access of the same path; a thread's calls are taken per group.
    The events must be in time order."""
    thread, calls = _thread_calls(events, by)
    previous_op, previous_path = pl.col(s.OP).shift(1).over(thread), pl.col(s.PATH).shift(1).over(thread)
    is_open = pl.col(s.OP).is_in(sorted(OPEN_NAMES))
    after_stat = is_open & previous_op.is_in(sorted(STAT_NAMES)) & (previous_path == pl.col(s.PATH))
    flagged = calls.with_columns(is_open.alias(OPENS), after_stat.fill_null(False).alias(OPENS_AFTER_STAT))
    return flagged.group_by(*by).agg(pl.col(OPENS).sum().cast(pl.UInt64), pl.col(OPENS_AFTER_STAT).sum().cast(pl.UInt64))


def call_edges(events: pl.LazyFrame, by: Sequence[str] = ()) -> pl.LazyFrame:
    """Per thread (within groups): its first call (TS, whether an open, path) and its last
    (whether a stat, path), so that a stat and its open in two chunks still pair up. The
    events must be in time order."""
    thread, calls = _thread_calls(events, by)
    return calls.group_by(thread).agg(
        pl.col(s.TS).first(), pl.col(s.OP).first().is_in(sorted(OPEN_NAMES)).alias("first_open"),
        pl.col(s.PATH).first().alias("first_path"), pl.col(s.OP).last().is_in(sorted(STAT_NAMES)).alias("last_stat"),
        pl.col(s.PATH).last().alias("last_path"))


def seam_opens(edges: pl.DataFrame, by: Sequence[str] = ()) -> pl.DataFrame:
    """OPENS_AFTER_STAT per group that chunk seams hid: a chunk's first call an open of the
    path the thread's previous chunk ended with a stat of."""
    thread = list(dict.fromkeys([*by, s.PID, s.TID]))
    ordered = edges.sort(s.TS).with_columns(pl.col("last_stat").shift(1).over(thread).alias("_stat"),
                                            pl.col("last_path").shift(1).over(thread).alias("_path"))
    hidden = pl.col("first_open") & pl.col("_stat").fill_null(False) & (pl.col("_path") == pl.col("first_path")).fill_null(False)
    return ordered.group_by(by).agg(hidden.sum().cast(pl.UInt64).alias(OPENS_AFTER_STAT))
