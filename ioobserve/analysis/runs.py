"""Intervals kept as runs sorted by start (in memory while small, then in a private temporary
directory), and the length of their union per key by a streaming k-way merge: an analysis
holds one block of each run at a time, however many intervals its traces have.

Keys are small tuples (a layer, a job, a scope); each run stores them as codes. Runs of
several stores (chunks, traces, Dask tasks) are combined by listing them together, each with
its own code mapping, so nothing already written is rewritten.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from ioobserve.analysis.intervals import END, START, merge

ROW = np.dtype([("key", "<u4"), ("start", "<i8"), ("end", "<i8")])  # 20 bytes, packed
SPILL_ROWS = 1 << 20  # a store holds this many rows in memory (20 MiB) before writing runs out
MERGE_BYTES = 64 << 20  # of blocks read at once while merging, over all runs
MIN_BLOCK_ROWS = 4096
_TARGET = "_target"


@dataclass
class _Run:
    """Rows sorted by start: in `rows`, or in the file `path` (`count` rows); `codes` maps
    the run's key codes to its store's."""

    codes: np.ndarray
    count: int
    last_start: int
    rows: np.ndarray | None = None
    path: Path | None = None

    def read(self, at: int, n: int) -> np.ndarray:
        """Rows [at, at + n)."""
        if self.rows is not None:
            return self.rows[at:at + n]
        return np.fromfile(self.path, dtype=ROW, count=min(n, self.count - at), offset=at * ROW.itemsize)

    def loaded(self) -> _Run:
        """The run with its rows in memory (to send to another machine)."""
        return _Run(self.codes, self.count, self.last_start, rows=self.read(0, self.count))


class IntervalRuns:
    """Intervals (START, END) under keys, as sorted runs; `union_lengths` measures them."""

    def __init__(self) -> None:
        self.keys: list[Hashable] = []
        self._codes: dict[Hashable, int] = {}
        self._runs: list[_Run] = []
        self._directory: Path | None = None
        self._keep: list[IntervalRuns] = []  # stores whose run files this one lists

    def __len__(self) -> int:
        return sum(run.count for run in self._runs)

    def code(self, key: Hashable) -> int:
        """The store's code of `key` (given one now if new)."""
        found = self._codes.get(key)
        if found is None:
            found = self._codes[key] = len(self.keys)
            self.keys.append(key)
        return found

    def add(self, frame: pl.DataFrame, key_columns: Sequence[str]) -> None:
        """Intervals of `frame` (key columns, START, END), under the tuple of their key columns."""
        frame = frame.filter(pl.col(END) > pl.col(START))
        if not frame.height:
            return
        keyed = frame.with_columns(pl.struct(*key_columns).rank("dense").cast(pl.UInt32).alias("_key") - 1)
        distinct = keyed.unique("_key").sort("_key")
        codes = np.array([self.code(tuple(row[:-1])) for row in distinct.select(*key_columns, "_key").iter_rows()],
                         dtype=np.uint32)
        keyed = keyed.sort(START)
        rows = np.empty(keyed.height, dtype=ROW)
        rows["key"] = codes[keyed.get_column("_key").to_numpy()]
        rows["start"] = keyed.get_column(START).to_numpy()
        rows["end"] = keyed.get_column(END).to_numpy()
        self._append(rows)

    def _append(self, rows: np.ndarray) -> None:
        """Sorted rows in the store's codes: continue the last run when they start after it
        (a trace read in time order makes one run), else start another."""
        last = self._runs[-1] if self._runs else None
        identity = np.arange(len(self.keys), dtype=np.uint32)
        if last is None or rows["start"][0] < last.last_start or not _is_identity(last.codes):
            last = _Run(identity, 0, int(rows["start"][0]), rows=rows[:0])
            self._runs.append(last)
        last.codes = identity  # its codes are the store's, which may have grown
        if last.path is not None:
            with open(last.path, "ab") as out:
                rows.tofile(out)
        else:
            last.rows = np.concatenate([last.rows, rows])
        last.count += len(rows)
        last.last_start = int(rows["start"][-1])
        if last.rows is not None and sum(run.count for run in self._runs if run.rows is not None) > SPILL_ROWS:
            self._spill()

    def _spill(self) -> None:
        """Write the runs held in memory to files."""
        if self._directory is None:
            self._directory = Path(tempfile.mkdtemp(prefix="ioobserve-runs-"))  # 0700
            weakref.finalize(self, shutil.rmtree, self._directory, True)
        for number, run in enumerate(self._runs):
            if run.rows is not None:
                run.path = self._directory / f"{id(run):x}-{number}.run"
                run.rows.tofile(run.path)
                run.rows = None

    def extend(self, other: IntervalRuns) -> None:
        """Take `other`'s runs: rows in memory join this store's (continuing its last run
        when they start after it), files are listed where they are."""
        mapping = np.array([self.code(key) for key in other.keys], dtype=np.uint32)
        for run in other._runs:
            if run.rows is not None:
                if run.count:
                    rows = run.rows.copy()
                    rows["key"] = mapping[run.codes[rows["key"]]]
                    self._append(rows)
            else:
                self._runs.append(_Run(mapping[run.codes], run.count, run.last_start, path=run.path))
                self._keep.append(other)  # its finalizer would delete the file

    def __getstate__(self) -> dict:
        return {"keys": self.keys, "runs": [run.loaded() for run in self._runs]}

    def __setstate__(self, state: dict) -> None:
        self.__init__()
        for key in state["keys"]:
            self.code(key)
        self._runs = state["runs"]

    def union_lengths(self, targets: Callable[[Hashable], Sequence[Hashable]]) -> dict[Hashable, int]:
        """The length of the union of the intervals of each target, where `targets(key)` says
        which targets a key's intervals count for."""
        names: dict[Hashable, int] = {}
        expansion = [[names.setdefault(t, len(names)) for t in targets(key)] for key in self.keys]
        width = max((len(row) for row in expansion), default=0)
        table = np.full((len(self.keys), max(width, 1)), -1, dtype=np.int64)
        for code, row in enumerate(expansion):
            table[code, :len(row)] = row
        totals = np.zeros(len(names), dtype=np.int64)
        runs = [run for run in self._runs if run.count]
        at = [0] * len(runs)
        block = max(MIN_BLOCK_ROWS, MERGE_BYTES // max(len(runs), 1) // ROW.itemsize)
        carry = pl.DataFrame(schema={_TARGET: pl.Int64, START: pl.Int64, END: pl.Int64})
        while any(at[i] < run.count for i, run in enumerate(runs)):
            blocks = {i: run.read(at[i], block) for i, run in enumerate(runs) if at[i] < run.count}
            # Rows up to `cutoff` are all read: beyond its block, each run starts at or after it
            unfinished = [rows["start"][-1] for i, rows in blocks.items() if at[i] + len(rows) < runs[i].count]
            cutoff = min(unfinished) if unfinished else None
            taken = []
            for i, rows in blocks.items():
                n = len(rows) if cutoff is None else int(np.searchsorted(rows["start"], cutoff, side="right"))
                at[i] += n
                part = rows[:n]
                taken.append((table[runs[i].codes[part["key"]]], part["start"], part["end"]))
            batch = _expanded(taken)
            merged = merge(pl.concat([carry, batch]).lazy(), [_TARGET]).collect()
            length = (pl.col(END) - pl.col(START)).sum().alias("_length")
            if cutoff is None:
                closed, carry = merged, carry.clear()
            else:  # each target's last interval may grow with the next rows
                last = pl.col(START) == pl.col(START).max().over(_TARGET)
                closed, carry = merged.filter(~last), merged.filter(last)
            sums = closed.group_by(_TARGET).agg(length)
            np.add.at(totals, sums.get_column(_TARGET).to_numpy(), sums.get_column("_length").to_numpy())
        return {target: int(totals[code]) for target, code in names.items()}


def _is_identity(codes: np.ndarray) -> bool:
    return bool((codes == np.arange(len(codes), dtype=codes.dtype)).all())


def _expanded(taken: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> pl.DataFrame:
    """(targets per row, starts, ends) of several blocks as one frame, a row per target."""
    targets = np.concatenate([t for t, _, _ in taken]) if taken else np.empty((0, 1), dtype=np.int64)
    starts = np.concatenate([s for _, s, _ in taken]) if taken else np.empty(0, dtype=np.int64)
    ends = np.concatenate([e for _, _, e in taken]) if taken else np.empty(0, dtype=np.int64)
    wanted = targets >= 0
    rows = np.nonzero(wanted)[0]
    return pl.DataFrame({_TARGET: targets[wanted], START: starts[rows], END: ends[rows]},
                        schema={_TARGET: pl.Int64, START: pl.Int64, END: pl.Int64})
