"""The recording's file ids with Polars (a struct hash per row and replace_strict), as before
the compiled core's rows_by_file (issue 46): the oracle that ioobserve/collect/enrich.py
is compared with. Not used by the package."""

from __future__ import annotations

import polars as pl

from ioobserve.data import events as ev
from ioobserve.data import schema as s
from ioobserve.data.model import FILE_ROW_SCHEMA

_SEED = 0x10B5  # any fixed seed: row hashes only find files within one batch
# The columns a batch gives its files by: the kernel's dev of an open file, and the path
# arguments (its first, and a rename's target).
KDEV, NAME, NAME2 = "_kdev", "_name", "_name2"
_ARGUMENTS = {KDEV: pl.UInt32, NAME: pl.String, NAME2: pl.String}
MAX_FILES_KEPT = 1 << 20


class FileIds:
    """Gives each distinct file of a batch its recording-wide id: the path, DEV and INO of an
    open file, or of a path argument (with its DEV and INO, 0 if none), and each PATH2."""

    def __init__(self) -> None:
        self._ids: dict[tuple[str, int, int], int] = {}
        self._next_id = 1

    def assign(self, frame: pl.DataFrame, known: pl.DataFrame | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The frame (with FLAGS, KDEV, DEV, INO, NAME and NAME2) with FILE and FILE2 columns
        (null where it names no file) in place of KDEV, NAME and NAME2, and the files it names
        (FILE_ROW_SCHEMA). An event's path is the one `known` (kdev, ino, path: the paths
        learnt so far) gives its open file (FLAGS has F_FILE), else its path argument, NAME."""
        # Events made here, not drained (Python spans), name no file: they lack these columns.
        frame = frame.with_columns(pl.lit(None, dtype).alias(name) for name, dtype in _ARGUMENTS.items()
                                   if name not in frame.columns)
        opened = (pl.col(s.FLAGS) & ev.F_FILE) != 0
        # Rows find their file through a 64-bit hash of numbers and the path argument, which is
        # null but for the few calls that name a path: the paths of open files are looked up for
        # the batch's few distinct files, and only those go through Python.
        first = pl.struct(opened, pl.col(KDEV), pl.col(s.DEV), pl.col(s.INO), pl.col(NAME)).hash(_SEED)
        second = pl.when(pl.col(NAME2).is_not_null()).then(pl.col(NAME2).hash(_SEED))
        keyed = frame.with_columns(first.alias("_k1"), second.alias("_k2"))
        if known is None:
            known = pl.DataFrame(schema={"kdev": pl.UInt64, "ino": pl.UInt64, "path": pl.String})
        files = (
            keyed.select("_k1", opened.alias("_opened"), KDEV, s.DEV, s.INO, NAME).unique("_k1")
            .join(known.rename({"kdev": KDEV, "ino": s.INO, "path": "_known"}), on=[KDEV, s.INO],
                  how="left")
            .select(pl.col("_k1").alias("k"), pl.coalesce(pl.when("_opened").then("_known"), NAME).alias(s.PATH),
                    s.DEV, s.INO)
        )
        if keyed.get_column("_k2").null_count() < keyed.height:  # a rename's target
            renamed_to = keyed.select(pl.col("_k2").alias("k"), pl.col(NAME2).alias(s.PATH), pl.lit(0, pl.UInt64).alias(s.DEV),
                                      pl.lit(0, pl.UInt64).alias(s.INO)).drop_nulls("k").unique("k")
            files = pl.concat([files, renamed_to])
        distinct = files.drop_nulls(s.PATH)
        if len(self._ids) + distinct.height > MAX_FILES_KEPT:
            self._ids.clear()
        keys, ids, rows = [], [], {}
        for key, path, dev, ino in distinct.iter_rows():
            file_id = self._ids.get((path, dev, ino))
            if file_id is None:
                file_id = self._ids[(path, dev, ino)] = self._next_id
                self._next_id += 1
            keys.append(key)  # several keys may find one file (opened, and named by a path argument)
            ids.append(file_id)
            rows[file_id] = (file_id, path, dev, ino)
        files = pl.DataFrame(list(rows.values()), schema=FILE_ROW_SCHEMA, orient="row")
        lookup = pl.Series(keys, dtype=pl.UInt64), pl.Series(ids, dtype=pl.UInt32)
        named = keyed.select(
            pl.exclude("_k1", "_k2", KDEV, NAME, NAME2),
            pl.col("_k1").replace_strict(*lookup, default=None, return_dtype=pl.UInt32).alias(s.FILE),
            pl.col("_k2").replace_strict(*lookup, default=None, return_dtype=pl.UInt32).alias(s.FILE2),
        )
        return named, files
