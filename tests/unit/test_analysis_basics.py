"""Busy time as the union of intervals, bandwidth over it, and Darshan's access-size buckets,
on hand-built events whose answers are worked out by hand."""

from __future__ import annotations

import random

import polars as pl

from ioobserve.analysis.intervals import BUSY_NS, END, START, bandwidth, busy_intervals, busy_time, merge, merge_now
from ioobserve.analysis.sizes import access_sizes
from ioobserve.data import schema as s
from ioobserve.data.operations import KIND, op_kind


def _events(rows: list[tuple]) -> pl.LazyFrame:
    """(pid, ts, dur, op, bytes_req, bytes) rows of syscall events."""
    return pl.DataFrame(rows, orient="row", schema={
        s.PID: pl.UInt32, s.TS: pl.UInt64, s.DUR: pl.UInt64, s.OP: pl.String, s.BYTES_REQ: pl.UInt64,
        s.BYTES: pl.UInt64}).with_columns(pl.lit(s.LAYER_SYSCALL).alias(s.LAYER), pl.lit(0, pl.UInt16).alias(s.FLAGS)
                         ).with_columns(op_kind().alias(KIND)).lazy()


# pid 1: [0,10) and [5,20) overlap, [20,25) touches, [40,50) apart -> busy 25 + 10 = 35
# pid 2: [100,110) inside nothing else -> 10; both pids together: 35 + 10 = 45
EVENTS = _events([
    (1, 0, 10, "read", 4096, 4096), (1, 5, 15, "read", 4096, 4096), (1, 20, 5, "write", 100, 100),
    (1, 40, 10, "pread64", 1025, 1000), (2, 100, 10, "read", 0, 0),
])


def test_overlapping_and_touching_intervals_merge():
    intervals = busy_intervals(EVENTS, [s.PID]).collect()
    assert intervals.rows() == [(1, 0, 25), (1, 40, 50), (2, 100, 110)]


def test_merged_at_once_the_intervals_are_the_same():
    """merge_now (numpy, the analysis's) and merge (Polars windows) on random groups, nulls
    among the keys, out of order, empty and touching intervals; and times decades apart."""
    rng = random.Random(5)
    for trial in range(200):
        rows = []
        for _ in range(rng.randrange(0, 200)):
            start = rng.randrange(0, 5000) + (rng.choice([0, 10**18]) if trial % 10 == 0 else 0)
            rows.append((rng.choice(["a", "b", None]), rng.choice([1, 2]), start, start + rng.randrange(-10, 200)))
        frame = pl.DataFrame(rows, orient="row", schema={"k": pl.String, "j": pl.Int32, START: pl.Int64, END: pl.Int64})
        for by in ([], ["k"], ["k", "j"]):
            expected, merged = merge(frame.lazy(), by).collect(), merge_now(frame, by)
            assert merged.get_column(START).is_sorted()
            assert merged.sort(expected.columns, nulls_last=True).equals(expected.sort(expected.columns, nulls_last=True))


def test_busy_time_per_group_and_overall():
    assert busy_time(EVENTS, [s.PID]).collect().rows() == [(1, 35), (2, 10)]
    assert busy_time(EVENTS).collect().item(0, BUSY_NS) == 45


def test_bandwidth_is_bytes_over_busy_time():
    per_pid = {row[s.PID]: row["bytes_per_s"] for row in bandwidth(EVENTS, [s.PID]).collect().iter_rows(named=True)}
    assert per_pid[1] == (4096 + 4096 + 100 + 1000) * 1e9 / 35
    assert per_pid[2] == 0
    assert bandwidth(EVENTS).collect().item(0, "bytes_per_s") == 9292 * 1e9 / 45


def test_access_sizes_in_darshans_buckets():
    sizes = access_sizes(EVENTS).collect()
    assert sizes.select("kind", pl.col("bucket").cast(pl.String), "count").rows() == [
        ("read", "0-100", 1), ("read", "1K-10K", 3), ("write", "0-100", 1)]
    bounds = _events([(1, 0, 1, "write", size, size) for size in (100, 101, 1024, 1025, 1 << 30, (1 << 30) + 1)])
    assert access_sizes(bounds).collect().select(pl.col("bucket").cast(pl.String), "count").rows() == [
        ("0-100", 1), ("100-1K", 2), ("1K-10K", 1), ("100M-1G", 1), ("1G+", 1)]
