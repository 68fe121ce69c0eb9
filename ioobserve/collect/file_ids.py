"""The recording's file ids: one number per distinct (path, dev, ino) an event names, so
sinks that write files (ioobserve.trace.writer) key them by number, never by string."""

from __future__ import annotations

import polars as pl

from ioobserve import schema as s
from ioobserve.model import FILE_ROW_SCHEMA

_SEED = 0x10B5  # any fixed seed: row hashes only find files within one batch
# Files remembered; beyond this the table starts over (a node-wide `serve` meets files without
# end). Ids keep counting, so none ever names two files: a file met again gets a new id, and
# a writer describes it again (two ids for one file read back as the same file).
MAX_FILES_KEPT = 1 << 20


class FileIds:
    """Gives each distinct (PATH, DEV, INO) and PATH2 of a batch its recording-wide id."""

    def __init__(self) -> None:
        self._ids: dict[tuple[str, int, int], int] = {}
        self._next_id = 1

    def assign(self, frame: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The frame with FILE and FILE2 columns (null where it names no file), and the files
        it names (FILE_ROW_SCHEMA)."""
        # Rows find their file through a 64-bit row hash of (path, dev, ino): much cheaper than
        # joining on strings, and only the batch's few distinct files go through Python.
        first = pl.struct(pl.col(s.PATH), pl.col(s.DEV), pl.col(s.INO)).hash(_SEED)
        second = pl.struct(pl.col(s.PATH2), pl.lit(0, pl.UInt64).alias(s.DEV), pl.lit(0, pl.UInt64).alias(s.INO)).hash(_SEED)
        keyed = frame.with_columns(first.alias("_k1"), second.alias("_k2"))
        distinct = pl.concat([
            keyed.select(pl.col("_k1").alias("k"), s.PATH, s.DEV, s.INO),
            keyed.select(pl.col("_k2").alias("k"), pl.col(s.PATH2).alias(s.PATH), pl.lit(0, pl.UInt64).alias(s.DEV),
                         pl.lit(0, pl.UInt64).alias(s.INO)),
        ]).drop_nulls(s.PATH).unique("k")
        if len(self._ids) + distinct.height > MAX_FILES_KEPT:
            self._ids.clear()
        keys, rows = [], []
        for key, path, dev, ino in distinct.iter_rows():
            file_id = self._ids.get((path, dev, ino))
            if file_id is None:
                file_id = self._ids[(path, dev, ino)] = self._next_id
                self._next_id += 1
            keys.append(key)
            rows.append((file_id, path, dev, ino))
        files = pl.DataFrame(rows, schema=FILE_ROW_SCHEMA, orient="row")
        lookup = pl.Series(keys, dtype=pl.UInt64), files.get_column(s.FILE)
        named = keyed.select(
            pl.exclude("_k1", "_k2"),
            pl.col("_k1").replace_strict(*lookup, default=None, return_dtype=pl.UInt32).alias(s.FILE),
            pl.col("_k2").replace_strict(*lookup, default=None, return_dtype=pl.UInt32).alias(s.FILE2),
        )
        return named, files
