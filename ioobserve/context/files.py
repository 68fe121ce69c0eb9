"""File identities to paths: (dev, ino) from kernel path records, and path arguments
joined to the directory they are relative to."""

from __future__ import annotations

import os
import threading

import polars as pl

from ioobserve.data.decode import NameRecord, PathRecord, name_frame

UNKNOWN_BASE = "?"


class FileTable:
    """Paths by kernel (dev, ino), as a Polars frame for joins. The collector's reader thread
    adds paths while its worker reads them (hence the lock)."""

    def __init__(self) -> None:
        self.by_id: dict[tuple[int, int], str] = {}
        self._frame = pl.DataFrame(schema={"kdev": pl.UInt32, "ino": pl.UInt64, "path": pl.String})
        self._pending: list[tuple[int, int, str]] = []
        self._replaced = False  # a pending row supersedes one already in the frame
        self._lock = threading.Lock()

    def _learn(self, key: tuple[int, int], path: str) -> None:
        self._replaced |= key in self.by_id
        self.by_id[key] = path
        self._pending.append((key[0], key[1], path))

    def add(self, records: list[PathRecord]) -> None:
        """Learn paths; a later record for the same file replaces the earlier one (the collector's
        worker, in the order of the events: the file renamed, or a new file with the inode of
        one deleted, whose earlier events keep the earlier name)."""
        with self._lock:
            for rec in records:
                if self.by_id.get((rec.dev, rec.ino)) != rec.path:
                    self._learn((rec.dev, rec.ino), rec.path)

    def add_new(self, records: list[PathRecord]) -> None:
        """Learn the paths of files not known yet, ahead of the events (the collector's reader:
        a library is probed as soon as it is mapped); replacements wait for `add`."""
        with self._lock:
            for rec in records:
                if (rec.dev, rec.ino) not in self.by_id:
                    self._learn((rec.dev, rec.ino), rec.path)

    def rename(self, old: str, new: str) -> None:
        """A traced rename moved `old` (or a directory's contents) to `new`."""
        prefix = old.rstrip("/") + "/"
        with self._lock:
            for key, path in list(self.by_id.items()):
                if path == old or path.startswith(prefix):
                    self._learn(key, new + path[len(old) :])

    def frame(self) -> pl.DataFrame:
        """kdev, ino, path: one row per known file."""
        with self._lock:
            pending, replaced = self._pending, self._replaced
            self._pending, self._replaced = [], False
        if pending:
            new = pl.DataFrame(pending, schema=self._frame.schema, orient="row")
            # Appending is cheap; deduplicating the whole table is needed only after a replacement.
            self._frame = pl.concat([self._frame, new], rechunk=self._frame.n_chunks() > 64)
            if replaced:
                self._frame = self._frame.unique(subset=["kdev", "ino"], keep="last", maintain_order=True)
        return self._frame

    def join_name(self, rec: NameRecord) -> str:
        """The absolute path a path argument names."""
        name = rec.name
        if name.startswith("/") or not name:
            if _plain(name):  # most are: normpath would cost as much again as the rest of a name's way
                return name
            return os.path.normpath(name) if name else ""
        base = self.by_id.get((rec.base_dev, rec.base_ino), UNKNOWN_BASE)
        return os.path.normpath(os.path.join(base, rec.name))

    def names_frame(self, names: list[tuple]) -> pl.DataFrame:
        """tid, ts_ns, index, path for batches of path arguments (_core.aux_split's columns):
        most name their path themselves (`fast`); the others are joined here, one by one."""
        frame = name_frame(names)
        paths = frame.get_column("name")
        slow = frame.with_row_index("row").filter(~pl.col("fast"))
        if slow.height:
            joined = [self.join_name(NameRecord(0, 0, 0, base_dev, base_ino, name))
                      for base_dev, base_ino, name in slow.select("base_dev", "base_ino", "name").iter_rows()]
            paths = paths.scatter(slow.get_column("row"), pl.Series(joined, dtype=pl.String))
        return frame.select("tid", "ts_ns", "index").with_columns(paths.alias("path"))


def _plain(name: str) -> bool:
    """An absolute path normpath would leave as it is: no empty, "." or ".." component, no
    trailing slash (a component starting with a dot is sent to normpath too)."""
    return "//" not in name and "/." not in name and (len(name) == 1 or not name.endswith("/"))
