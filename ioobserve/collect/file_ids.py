"""The recording's file ids: one number per distinct (path, dev, ino) an event names, found
from the kernel's (dev, ino) of its open file or its path argument, so that the sinks key
files by number, never by string (names: ioobserve.data.naming)."""

from __future__ import annotations

import numpy as np
import polars as pl

from ioobserve import _core
from ioobserve.data import events as ev
from ioobserve.data import schema as s
from ioobserve.data.model import FILE_ROW_SCHEMA

_NO_NUMBER = (1 << 64) - 1  # a null DEV or INO, to rows_by_file (no device or inode has it)
_SEED = 0x10B5  # any fixed seed: path hashes only find files within one batch
# The columns a batch gives its files by: the kernel's dev of an open file, and the path
# arguments (its first, and a rename's target).
KDEV, NAME, NAME2 = "_kdev", "_name", "_name2"
_ARGUMENTS = {KDEV: pl.UInt32, NAME: pl.String, NAME2: pl.String}
# Files remembered; beyond this the table starts over (a node-wide `serve` meets files without
# end). Ids keep counting, so none ever names two files: a file met again gets a new id, and
# a writer describes it again (two ids for one file read back as the same file).
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
        opened = (_numbers(frame.get_column(s.FLAGS).fill_null(0)) & ev.F_FILE) != 0
        # Rows are grouped by the file they name in one compiled pass (a hash of the numbers
        # and the path argument's hash): only the batch's few distinct files go on from there.
        which, firsts = _core.rows_by_file(
            opened.view(np.uint8), *_with_validity(frame.get_column(KDEV), np.uint32),
            # A span (made here, not drained) has no DEV or INO: a value no file has stands for none.
            *(_numbers(frame.get_column(name).cast(pl.UInt64).fill_null(_NO_NUMBER)) for name in (s.DEV, s.INO)),
            *_with_validity(frame.get_column(NAME), np.uint64, hashed=True))
        firsts = np.frombuffer(firsts, dtype=np.uint32)
        if known is None:
            known = pl.DataFrame(schema={"kdev": pl.UInt64, "ino": pl.UInt64, "path": pl.String})
        groups = (
            frame.select(KDEV, s.DEV, s.INO, NAME)[firsts]
            .with_columns(pl.Series("_opened", opened[firsts]))
            .with_row_index("_group")
            .join(known.rename({"kdev": KDEV, "ino": s.INO, "path": "_known"}), on=[KDEV, s.INO], how="left",
                  maintain_order="left")
            .select("_group", pl.coalesce(pl.when("_opened").then("_known"), NAME).alias(s.PATH), s.DEV, s.INO)
        )
        rows: dict[int, tuple[int, str, int, int]] = {}
        group_ids = np.zeros(groups.height, dtype=np.uint32)  # 0: names no file
        for group, path, dev, ino in groups.drop_nulls(s.PATH).iter_rows():
            group_ids[group] = self._id_of(path, dev, ino, rows)
        named = frame.select(pl.exclude(KDEV, NAME, NAME2)).with_columns(
            pl.Series(s.FILE, group_ids[np.frombuffer(which, dtype=np.uint32)]).replace(0, None))
        targets = frame.get_column(NAME2)
        if targets.null_count() < frame.height:  # a rename's target
            distinct = targets.drop_nulls().unique(maintain_order=True).to_list()
            second = [self._id_of(path, 0, 0, rows) for path in distinct]
            named = named.with_columns(targets.replace_strict(distinct, second, default=None, return_dtype=pl.UInt32)
                                       .alias(s.FILE2))
        else:
            named = named.with_columns(pl.lit(None, pl.UInt32).alias(s.FILE2))
        return named, pl.DataFrame(list(rows.values()), schema=FILE_ROW_SCHEMA, orient="row")

    def _id_of(self, path: str, dev: int, ino: int, rows: dict) -> int:
        """The id of the file (path, dev, ino), given one if new; its row goes into `rows`."""
        if len(self._ids) >= MAX_FILES_KEPT:
            self._ids.clear()
        file_id = self._ids.get((path, dev, ino))
        if file_id is None:
            file_id = self._ids[(path, dev, ino)] = self._next_id
            self._next_id += 1
        rows[file_id] = (file_id, path, dev, ino)
        return file_id


def _numbers(column: pl.Series) -> np.ndarray:
    """A column without nulls as one contiguous numpy array."""
    return np.ascontiguousarray(column.to_numpy())


def _with_validity(column: pl.Series, dtype: type, hashed: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """A column's values as `dtype` (its hashes, for strings; 0 where null) and its validity
    (None: no null). A column of nulls only is all zeros: one value, as its nulls are."""
    nulls = column.null_count()
    if nulls == len(column):
        return np.zeros(len(column), dtype=dtype), None
    values = column.hash(_SEED) if hashed else column.fill_null(0) if nulls else column
    valid = _numbers(column.is_not_null()).view(np.uint8) if nulls else None
    return np.ascontiguousarray(values.to_numpy(), dtype=dtype), valid
