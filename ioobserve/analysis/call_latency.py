"""How long calls take, per layer and operation: a histogram of durations in buckets a quarter
of a power of two wide, summed exactly across chunks, traces and nodes, and the percentiles
read from it (each within 9% of the exact one: the bucket's geometric middle is given)."""

from __future__ import annotations

import polars as pl

from ioobserve.data import schema as s

BUCKETS_PER_OCTAVE = 4
DUR_BUCKET, COUNT = "dur_bucket", "count"
PERCENTILES = {"p50_ns": 0.50, "p90_ns": 0.90, "p99_ns": 0.99}
LATENCY_KEYS = [s.LAYER, s.OP, DUR_BUCKET]


def call_latencies(events: pl.LazyFrame) -> pl.LazyFrame:
    """COUNT of calls (records that stand for a call of their own) per layer, operation and
    DUR_BUCKET: floor(BUCKETS_PER_OCTAVE x log2 of the duration in ns), 0 for 1 ns or less."""
    bucket = (pl.col(s.DUR).clip(lower_bound=1).cast(pl.Float64).log(2) * BUCKETS_PER_OCTAVE).floor().cast(pl.Int16)
    return (events.filter(pl.col(s.COUNTED)).group_by(s.LAYER, s.OP, bucket.alias(DUR_BUCKET))
            .agg(pl.len().cast(pl.UInt64).alias(COUNT)))


def percentiles(histogram: pl.DataFrame) -> pl.DataFrame:
    """Per layer and operation: calls and the PERCENTILES of their duration, from a histogram
    (LATENCY_KEYS: COUNT); the most calls first."""
    schema = {s.LAYER: pl.String, s.OP: pl.String, "calls": pl.UInt64, **dict.fromkeys(PERCENTILES, pl.Float64)}
    if histogram.is_empty():
        return pl.DataFrame(schema=schema)
    by = [s.LAYER, s.OP]
    ranked = (histogram.with_columns(pl.col(by).cast(pl.String)).group_by(*by, DUR_BUCKET).agg(pl.col(COUNT).sum())
              .sort(*by, DUR_BUCKET)
              .with_columns(pl.col(COUNT).cum_sum().over(by).alias("_below"), pl.col(COUNT).sum().over(by).alias("calls")))
    middle = (pl.lit(2.0).pow((pl.col(DUR_BUCKET).cast(pl.Float64) + 0.5) / BUCKETS_PER_OCTAVE))
    # each percentile: the first bucket whose calls up to it reach that share of all
    return (ranked.group_by(by).agg(
        pl.col("calls").first(),
        *(middle.filter(pl.col("_below") >= pl.col("calls") * share).first().alias(name) for name, share in PERCENTILES.items()))
        .cast(schema).sort("calls", *by, descending=[True, False, False]))
