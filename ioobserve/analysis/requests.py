"""Object-storage requests (the HTTP layer's events): per object and per operation (S3's,
GetObject, UploadPart, ..., or the method), requests, bytes and time, and per operation the
answers' statuses; per endpoint (the scheme and host of its objects' addresses), a histogram
of request latency in fixed buckets, so that partials of any chunks and nodes sum exactly."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from ioobserve.data import schema as s
from ioobserve.data.totals import BYTES, CALLS, FIRST_NS, LAST_NS, TIME_NS

# A request's duration (its head's write to its answer's last read), upper bounds inclusive, ms.
LATENCY_BOUNDS_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
LATENCY_BUCKETS = ("<=1ms", "<=2ms", "<=5ms", "<=10ms", "<=20ms", "<=50ms", "<=100ms", "<=200ms", "<=500ms", "<=1s",
                   "<=2s", "<=5s", ">5s")
LATENCY, COUNT, ENDPOINT, REQUESTS, ERRORS = "latency", "count", "endpoint", "requests", "errors"
STATUS_KEYS = [s.OP, s.STATUS]
_ENDPOINT = r"^([a-z]+://[^/]+)"


def request_latencies(events: pl.LazyFrame, by: Sequence[str] = ()) -> pl.LazyFrame:
    """COUNT of HTTP requests per group and LATENCY bucket."""
    bounds = pl.lit(pl.Series([ms * 1_000_000 for ms in LATENCY_BOUNDS_MS], dtype=pl.UInt64))
    bucket = pl.lit(pl.Series(LATENCY_BUCKETS, dtype=pl.Enum(LATENCY_BUCKETS))).gather(
        bounds.search_sorted(pl.col(s.DUR), side="left"))
    return (events.filter(pl.col(s.LAYER) == s.LAYER_HTTP)
            .group_by(*by, bucket.alias(LATENCY)).agg(pl.len().cast(pl.UInt64).alias(COUNT)))


def request_statuses(events: pl.LazyFrame) -> pl.LazyFrame:
    """COUNT of HTTP requests per operation and the answer's STATUS (null: no answer's head read)."""
    return (events.filter(pl.col(s.LAYER) == s.LAYER_HTTP)
            .group_by(STATUS_KEYS).agg(pl.len().cast(pl.UInt64).alias(COUNT)))


def statuses(counts: pl.DataFrame) -> pl.DataFrame:
    """Per operation and status: requests; by operation, then status (none last). `counts`:
    the partial's (STATUS_KEYS: COUNT)."""
    return (counts.group_by(pl.col(s.OP).cast(pl.String), s.STATUS).agg(pl.col(COUNT).sum().alias(REQUESTS))
            .sort(s.OP, s.STATUS, nulls_last=True))


def status_spread(by_status: pl.DataFrame, operation: str | None) -> str:
    """An operation's answers as "200 ×40, 404 ×2, none ×1" (none: no answer's head was read)."""
    rows = by_status.filter(pl.col(s.OP).eq_missing(operation)).select(s.STATUS, REQUESTS).rows()
    return ", ".join(f"{'none' if status is None else status} ×{count:,}" for status, count in rows)


def objects(named: pl.DataFrame) -> pl.DataFrame:
    """Per object (PATH): requests, bytes answered, time, first and last; most time first.
    `named`: the analysis's totals with PATH."""
    http = named.filter(pl.col(s.LAYER).cast(pl.String) == s.LAYER_HTTP)
    return (http.group_by(pl.col(s.PATH).cast(pl.String))
            .agg(pl.col(CALLS).sum().alias(REQUESTS), pl.col(BYTES).sum(), pl.col(TIME_NS).sum(),
                 pl.col(FIRST_NS).min(), pl.col(LAST_NS).max())
            .with_columns(pl.col(s.PATH).str.extract(_ENDPOINT).alias(ENDPOINT))
            .sort(TIME_NS, s.PATH, descending=[True, False]))


def operations(named: pl.DataFrame, by_status: pl.DataFrame) -> pl.DataFrame:
    """Per operation (OP: S3's, or the method of a request that is not S3's): requests, bytes
    answered, time and ERRORS (answers of status 400 and up); most requests first. `named`:
    the analysis's totals; `by_status`: statuses()."""
    http = named.filter(pl.col(s.LAYER).cast(pl.String) == s.LAYER_HTTP)
    errors = by_status.group_by(s.OP).agg(pl.col(REQUESTS).filter(pl.col(s.STATUS) >= 400).sum().cast(pl.UInt64).alias(ERRORS))
    return (http.group_by(pl.col(s.OP).cast(pl.String))
            .agg(pl.col(CALLS).sum().alias(REQUESTS), pl.col(BYTES).sum(), pl.col(TIME_NS).sum())
            .join(errors, on=s.OP, how="left").with_columns(pl.col(ERRORS).fill_null(0))
            .sort(REQUESTS, s.OP, descending=[True, False]))


def endpoints(latencies: pl.DataFrame, files: pl.DataFrame, per_object: pl.DataFrame) -> pl.DataFrame:
    """Per endpoint: requests, bytes, time and its latency histogram (a count per LATENCY_BUCKETS
    column). `latencies`: the partial's (FILE_ID, LATENCY: COUNT); `files`: FILE_ID, PATH."""
    if latencies.is_empty():
        return pl.DataFrame(schema={ENDPOINT: pl.String, REQUESTS: pl.UInt64, BYTES: pl.UInt64, TIME_NS: pl.UInt64,
                                    **dict.fromkeys(LATENCY_BUCKETS, pl.UInt64)})
    histogram = (latencies.join(files.select(s.FILE_ID, s.PATH), on=s.FILE_ID, how="left")
                 .with_columns(pl.col(s.PATH).cast(pl.String).str.extract(_ENDPOINT).alias(ENDPOINT),
                               pl.col(LATENCY).cast(pl.String))
                 .group_by(ENDPOINT, LATENCY).agg(pl.col(COUNT).sum())
                 .pivot(LATENCY, index=ENDPOINT, values=COUNT))
    histogram = histogram.with_columns(pl.lit(0, pl.UInt64).alias(bucket) for bucket in LATENCY_BUCKETS
                                       if bucket not in histogram.columns)
    totals = per_object.group_by(ENDPOINT).agg(pl.col(REQUESTS).sum(), pl.col(BYTES).sum(), pl.col(TIME_NS).sum())
    return (totals.join(histogram, on=ENDPOINT, how="full", coalesce=True)
            .select(ENDPOINT, REQUESTS, BYTES, TIME_NS, *(pl.col(b).fill_null(0).cast(pl.UInt64) for b in LATENCY_BUCKETS))
            .sort(REQUESTS, ENDPOINT, descending=[True, False]))
