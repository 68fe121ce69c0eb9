"""The one declaration of the sums every view keeps per key (a process, a file, a job, a
label set): what each one is over events, and how sums of parts combine. The recording's
summary, `top`, the analysis partials and `serve` all take theirs from here, beside
ioobserve.data.operations, which says what kind of I/O each event is (a leaf module: schema and
operations only).

Two levels, so that a view can sum either way and get the same numbers:
- over events (with their KIND column): `over_events(...)`;
- over rows already summed per KIND (a group of events, a partial, a kernel aggregate):
  the kind-split totals (bytes read and written, metadata calls) by `by_kind(...)`, and
  any total's parts combined by `combined(...)`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from ioobserve.data import schema as s
from ioobserve.data.operations import KIND, METADATA, OTHER, READ, WRITE

CALLS = "calls"  # calls, each once: a two-file call's second record (COUNTED false) is not another
EVENTS = "events"  # records, however many a call has
BYTES = "bytes"  # bytes moved, whatever the kind
TIME_NS = "time_ns"  # time in the records (a two-file call's second one repeats its time)
MAX_NS = "max_ns"  # the longest call
ERRORS = "errors"  # failed records of I/O (not OTHER: the interpreter's spans, readahead, ...)
PLACED_BYTES = "placed_bytes"  # bytes of calls with a known offset (DFTracer's read() has none)
FIRST_NS = "first_ns"  # the first call's start
LAST_NS = "last_ns"  # the last call's end
LAST_START_NS = "last_start_ns"  # the last call's start
READ_BYTES = "read_bytes"
WRITE_BYTES = "write_bytes"
METADATA_CALLS = "metadata_calls"


@dataclass(frozen=True)
class Total:
    """A sum kept per key: its value over events, and how values of parts combine."""

    over_events: Callable[[], pl.Expr]
    combine: Callable[[pl.Expr], pl.Expr]


def _kind(kind: str) -> pl.Expr:
    return pl.col(KIND) == kind


TOTALS: dict[str, Total] = {
    CALLS: Total(lambda: pl.col(s.COUNTED).sum().cast(pl.UInt64), pl.Expr.sum),
    EVENTS: Total(lambda: pl.len().cast(pl.UInt64), pl.Expr.sum),
    BYTES: Total(lambda: pl.col(s.BYTES).sum(), pl.Expr.sum),
    TIME_NS: Total(lambda: pl.col(s.DUR).sum(), pl.Expr.sum),
    MAX_NS: Total(lambda: pl.col(s.DUR).max(), pl.Expr.max),
    ERRORS: Total(lambda: ((pl.col(s.RET) < 0) & (pl.col(KIND) != OTHER)).sum().cast(pl.UInt64), pl.Expr.sum),
    PLACED_BYTES: Total(lambda: pl.col(s.BYTES).filter(pl.col(s.OFFSET) >= 0).sum(), pl.Expr.sum),
    FIRST_NS: Total(lambda: pl.col(s.TS).min(), pl.Expr.min),
    LAST_NS: Total(lambda: (pl.col(s.TS) + pl.col(s.DUR)).max(), pl.Expr.max),
    LAST_START_NS: Total(lambda: pl.col(s.TS).max(), pl.Expr.max),
    READ_BYTES: Total(lambda: pl.col(s.BYTES).filter(_kind(READ)).sum(), pl.Expr.sum),
    WRITE_BYTES: Total(lambda: pl.col(s.BYTES).filter(_kind(WRITE)).sum(), pl.Expr.sum),
    METADATA_CALLS: Total(lambda: (pl.col(s.COUNTED) & _kind(METADATA)).sum().cast(pl.UInt64), pl.Expr.sum),
}
"""Every total, by name."""

_BY_KIND = {READ_BYTES: (BYTES, READ), WRITE_BYTES: (BYTES, WRITE), METADATA_CALLS: (CALLS, METADATA)}


def over_events(*names: str) -> list[pl.Expr]:
    """Aggregations of the named totals over events (columns of ioobserve.data.schema and KIND)."""
    return [TOTALS[name].over_events().alias(name) for name in names]


def combined(*names: str) -> list[pl.Expr]:
    """Aggregations combining columns of the named totals, each of a part, into the whole's."""
    return [TOTALS[name].combine(pl.col(name)).alias(name) for name in names]


def by_kind(*names: str) -> list[pl.Expr]:
    """Aggregations of kind-split totals (READ_BYTES, WRITE_BYTES, METADATA_CALLS) over rows
    that hold BYTES and CALLS per KIND."""
    return [pl.col(_BY_KIND[name][0]).filter(_kind(_BY_KIND[name][1])).sum().alias(name) for name in names]
