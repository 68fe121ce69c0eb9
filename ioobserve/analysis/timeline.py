"""Events over time: counts and bytes per time bin, and each process's busy lanes. Bins are
2^k ms wide from the epoch, so the bins of several traces line up and re-bin exactly."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from ioobserve.analysis.intervals import END, START, merge_now
from ioobserve.data import schema as s

BIN, COUNT = "bin", "count"  # BIN: the bin's start, ns since the epoch
MS = 1_000_000
MAX_BINS = 2000  # per trace, before the report's own coarser bins


def bin_exponent(span_ns: int, bins: int = MAX_BINS) -> int:
    """The smallest k for which `span_ns` fits in `bins` bins of 2^k ms."""
    k = 0
    while (MS << k) * bins < span_ns:
        k += 1
    return k


def binned(events: pl.LazyFrame, exponent: int, by: Sequence[str] = ()) -> pl.LazyFrame:
    """COUNT and BYTES per group and BIN of 2^exponent ms, by each event's start."""
    width = MS << exponent
    return (
        events.group_by(*by, ((pl.col(s.TS) // width) * width).alias(BIN))
        .agg(pl.len().cast(pl.UInt64).alias(COUNT), pl.col(s.BYTES).sum())
        .sort(*by, BIN)
    )


def rebin(bins: pl.LazyFrame, exponent: int, by: Sequence[str] = ()) -> pl.LazyFrame:
    """Bins summed into wider ones of 2^exponent ms."""
    width = MS << exponent
    return (
        bins.group_by(*by, ((pl.col(BIN) // width) * width).alias(BIN))
        .agg(pl.col(COUNT).sum(), pl.col(s.BYTES).sum())
        .sort(*by, BIN)
    )


def lanes(intervals: pl.DataFrame, tolerance_ns: int, by: Sequence[str] = (s.PID,)) -> pl.DataFrame:
    """Intervals (START, END) merged per group with gaps shorter than `tolerance_ns` closed:
    a timeline's lanes, at the detail it can draw."""
    widened = intervals.with_columns(pl.col(END) + tolerance_ns)
    return merge_now(widened, by).with_columns(pl.max_horizontal(pl.col(END) - tolerance_ns, pl.col(START)).alias(END))
