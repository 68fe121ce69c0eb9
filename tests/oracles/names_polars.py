"""The enrichment's path arguments matched with Polars joins, as before the compiled core's
match_names (issue 46): the oracle that ioobserve/csrc/match.c is compared with. Not used by
the package."""

from __future__ import annotations

import polars as pl

from ioobserve.data import events as ev
from ioobserve.data import schema as s

NAME_KEYS = ["tid", "ts_ns"]


def join_names(frame: pl.DataFrame, names: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The frame with name_path, name_path2 and PY_MODULE, and the names no event matched."""
    first = names.filter(pl.col("index") == 0).select(*NAME_KEYS, pl.col("path").alias("name_path"))
    second = names.filter(pl.col("index") == 1).select(*NAME_KEYS, pl.col("path").alias("name_path2"))
    label = names.filter(pl.col("index") == ev.NAME_LABEL).select(*NAME_KEYS, pl.col("path").alias(s.PY_MODULE))
    joined = (frame.join(first, on=NAME_KEYS, how="left").join(second, on=NAME_KEYS, how="left")
              .join(label, on=NAME_KEYS, how="left"))
    return joined, names.join(frame.select(*NAME_KEYS), on=NAME_KEYS, how="anti")
