"""Access sizes in Darshan's buckets (darshan-common's DARSHAN_BUCKET_INC: 0-100, 100-1K,
..., 1G+, upper bounds inclusive, K = 1024), per group, for reads and writes apart."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from ioobserve.data import schema as s
from ioobserve.data.operations import DATA_KINDS, KIND

BUCKET_BOUNDS = (100, 1024, 10240, 102400, 1 << 20, 4 << 20, 10 << 20, 100 << 20, 1 << 30)
BUCKETS = ("0-100", "100-1K", "1K-10K", "10K-100K", "100K-1M", "1M-4M", "4M-10M", "10M-100M", "100M-1G", "1G+")
BUCKET, COUNT = "bucket", "count"


def access_sizes(events: pl.LazyFrame, by: Sequence[str] = ()) -> pl.LazyFrame:
    """COUNT of reads and writes per KIND and size BUCKET, per group; the size is what the
    call asked for (BYTES_REQ), as Darshan counts. Events need KIND (ioobserve.data.operations)."""
    data = events.filter(pl.col(KIND).is_in(DATA_KINDS))
    # a size's bucket: how many upper bounds lie below it
    index = pl.lit(pl.Series(BUCKET_BOUNDS, dtype=pl.UInt64)).search_sorted(pl.col(s.BYTES_REQ), side="left")
    bucket = pl.lit(pl.Series(BUCKETS, dtype=pl.Enum(BUCKETS))).gather(index)
    return (
        data.select(*by, KIND, bucket.alias(BUCKET))
        .group_by(*by, KIND, BUCKET).agg(pl.len().cast(pl.UInt64).alias(COUNT))
        .sort(*by, KIND, BUCKET)
    )
