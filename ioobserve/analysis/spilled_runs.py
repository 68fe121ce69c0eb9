"""Intervals kept as runs sorted by start (in memory while small, then in a private temporary
directory), and the length of their union per key by a streaming k-way merge: an analysis
holds one block of each run at a time, however many intervals its traces have.

Keys are small named tuples (a layer, a job, a scope); each run stores them as codes. Runs of
several stores (chunks, traces, Dask tasks) are combined by listing them together, each with
its own code mapping, so nothing already written is rewritten.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from ioobserve.analysis.intervals import END, START

ROW = np.dtype([("key", "<u4"), ("start", "<i8"), ("end", "<i8")])  # 20 bytes, packed
SPILL_ROWS = 1 << 18  # a store holds this many rows in memory (5 MiB) before writing runs out
MERGE_BYTES = 4 << 20  # of blocks read at once while merging, over all runs (a block of 200 k rows is merged in ~50 MB)
MIN_BLOCK_ROWS = 4096


_root: tuple[int, Path] | None = None  # (the pid it is for, the directory)


def _runs_root() -> Path:
    """This process's directory of runs (0700, under $TMPDIR), removed when it exits (a forked
    child makes its own, and leaves its parent's alone)."""
    global _root
    if _root is None or _root[0] != os.getpid():
        _root = (os.getpid(), Path(tempfile.mkdtemp(prefix="ioobserve-runs-")))
        atexit.register(_remove_if_mine, *_root)
    return _root[1]


def _remove_if_mine(pid: int, directory: Path) -> None:
    if os.getpid() == pid:
        shutil.rmtree(directory, True)


class _Directory:
    """A private temporary directory (0700), removed once no run in it is left."""

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(dir=_runs_root()))
        self.files = 0
        weakref.finalize(self, shutil.rmtree, self.path, True)

    def new_file(self) -> Path:
        """A name no other run in the directory has."""
        self.files += 1
        return self.path / f"{self.files}.run"


@dataclass
class _Run:
    """Rows sorted by start: in `rows`, or in the file `path` (`count` rows) of `directory`;
    `codes` maps the run's key codes to its store's."""

    codes: np.ndarray
    count: int
    last_start: int
    rows: np.ndarray | None = None
    path: Path | None = None
    directory: _Directory | None = None  # kept alive while the run is
    own: bool = True  # made by its store, which may append to it (not another store's file)

    def read(self, at: int, n: int) -> np.ndarray:
        """Rows [at, at + n)."""
        if self.rows is not None:
            return self.rows[at:at + n]
        return np.fromfile(self.path, dtype=ROW, count=min(n, self.count - at), offset=at * ROW.itemsize)

    def loaded(self) -> _Run:
        """The run with its rows in memory (to send to another machine)."""
        return _Run(self.codes, self.count, self.last_start, rows=self.read(0, self.count))


class IntervalRuns:
    """Intervals (START, END) under keys, as sorted runs; `union_lengths` measures them.
    `key`: the tuple type a frame's key columns are taken as (a NamedTuple of them)."""

    def __init__(self, key: Callable[..., Hashable] | None = None) -> None:
        self.key = key or _plain_tuple
        self.keys: list[Hashable] = []
        self._codes: dict[Hashable, int] = {}
        self._runs: list[_Run] = []
        self._directory: _Directory | None = None

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
        """Intervals of `frame` (key columns, START, END), under the key of their key columns."""
        frame = frame.filter(pl.col(END) > pl.col(START))
        if not frame.height:
            return
        distinct = frame.select(key_columns).unique()  # a few keys: coded here, joined back
        codes = distinct.with_columns(pl.Series("_key", [self.code(self.key(*row)) for row in distinct.iter_rows()], dtype=pl.UInt32))
        keyed = frame.join(codes, on=list(key_columns), how="left", nulls_equal=True).sort(START)
        rows = np.empty(keyed.height, dtype=ROW)
        rows["key"] = keyed.get_column("_key").to_numpy()
        rows["start"] = keyed.get_column(START).to_numpy()
        rows["end"] = keyed.get_column(END).to_numpy()
        self._append(rows)

    def _append(self, rows: np.ndarray) -> None:
        """Sorted rows in the store's codes: continue the last run when they start after it
        (a trace read in time order makes one run), else start another."""
        last = self._runs[-1] if self._runs else None
        identity = np.arange(len(self.keys), dtype=np.uint32)
        if last is None or not last.own or rows["start"][0] < last.last_start or not _is_identity(last.codes):
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
        self._directory = self._directory or _Directory()
        for run in self._runs:
            if run.rows is not None:
                run.path, run.directory = self._directory.new_file(), self._directory
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
                self._runs.append(_Run(mapping[run.codes], run.count, run.last_start, path=run.path,
                                       directory=run.directory, own=False))

    def split(self, piece: Callable[[np.ndarray, np.ndarray], np.ndarray], pieces: int,
              bounds: np.ndarray | None = None) -> list[IntervalRuns]:
        """The intervals dealt into `pieces` stores, in one pass over the runs: each row goes to
        the store `piece(keys, starts)` says (keys as this store's key indices). With `bounds`
        (pieces + 1 ascending times), a row is cut at them instead, each part to its range's
        store: unions measured per range add up to the whole's."""
        out = [IntervalRuns(self.key) for _ in range(pieces)]
        for run in self._runs:
            for at in range(0, run.count, SPILL_ROWS):
                rows = run.read(at, SPILL_ROWS).copy()
                rows["key"] = run.codes[rows["key"]]
                if bounds is None:
                    chosen = piece(rows["key"], rows["start"])
                    for index, store in enumerate(out):
                        store._take(self.keys, rows[chosen == index])
                    continue
                for index, store in enumerate(out):
                    low, high = bounds[index], bounds[index + 1]
                    cut = rows[(rows["start"] < high) & (rows["end"] > low)].copy()
                    cut["start"], cut["end"] = np.maximum(cut["start"], low), np.minimum(cut["end"], high)
                    store._take(self.keys, cut)
        return out

    def _take(self, keys: list[Hashable], rows: np.ndarray) -> None:
        """Rows sorted by start whose key codes index `keys`."""
        if len(rows):
            mapping = np.zeros(len(keys), dtype=np.uint32)
            for code in np.unique(rows["key"]).tolist():  # only the keys it holds: a piece measures no others
                mapping[code] = self.code(keys[code])
            rows["key"] = mapping[rows["key"]]
            self._append(rows)

    def __getstate__(self) -> dict:
        return {"key": self.key, "keys": self.keys, "runs": [run.loaded() for run in self._runs]}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["key"])
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
        carry = (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64))  # per target: [cutoff, furthest end)
        while any(at[i] < run.count for i, run in enumerate(runs)):
            blocks = {i: run.read(at[i], block) for i, run in enumerate(runs) if at[i] < run.count}
            # Rows up to `cutoff` are all read: beyond its block, each run starts at or after it
            unfinished = [rows["start"][-1] for i, rows in blocks.items() if at[i] + len(rows) < runs[i].count]
            cutoff = int(min(unfinished)) if unfinished else None
            taken = []
            for i, rows in blocks.items():
                n = len(rows) if cutoff is None else int(np.searchsorted(rows["start"], cutoff, side="right"))
                at[i] += n
                part = rows[:n]
                taken.append((table[runs[i].codes[part["key"]]], part["start"], part["end"]))
            targets, starts, ends = _expanded(taken)
            targets, starts, ends = (np.concatenate([c, x]) for c, x in zip(carry, (targets, starts, ends)))
            if cutoff is None:
                _add_union_lengths(totals, targets, starts, ends)
                break
            # The union before the cutoff is complete: later rows start at or after it. What
            # reaches beyond it is carried as one interval per target, [cutoff, furthest end).
            _add_union_lengths(totals, targets, starts, np.minimum(ends, cutoff))
            beyond = ends > cutoff
            furthest = np.full(len(names), np.iinfo(np.int64).min, dtype=np.int64)
            np.maximum.at(furthest, targets[beyond], ends[beyond])
            carried = np.nonzero(furthest > cutoff)[0]
            carry = (carried, np.full(len(carried), cutoff, dtype=np.int64), furthest[carried])
        return {target: int(totals[code]) for target, code in names.items()}


def _add_union_lengths(totals: np.ndarray, targets: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> None:
    """Add to totals[target] the length of the union of each target's [start, end)."""
    keep = ends > starts
    targets, starts, ends = targets[keep], starts[keep], ends[keep]
    if not len(targets):
        return
    first, span = int(starts.min()), int(ends.max() - starts.min()) + 1
    if (int(targets.max()) + 1) * span >= 1 << 62:
        _add_union_lengths_by_sweep(totals, targets, starts, ends)
        return
    if (starts[1:] < starts[:-1]).any():  # several runs' rows (one run's are in time order already)
        order = np.argsort(starts, kind="stable")
        targets, starts, ends = targets[order], starts[order], ends[order]
    # Each target's intervals together, still in time order (a stable sort by a small integer
    # is a radix sort); then each one covers what it reaches beyond the furthest end of the
    # target's earlier ones: a running maximum that starts again at each target.
    small = targets.astype(np.uint16) if targets.max() < 1 << 16 else targets
    order = np.argsort(small, kind="stable")
    targets, starts, ends = targets[order], starts[order], ends[order]
    offset = targets * span - first  # each target's times in a range of its own
    reached = np.maximum.accumulate(ends + offset) - offset
    before = np.empty_like(reached)
    before[0], before[1:] = starts[0], reached[:-1]
    boundaries = np.flatnonzero(targets[1:] != targets[:-1]) + 1
    before[boundaries] = starts[boundaries]  # a target's first interval follows none of its own
    covered = np.maximum(ends - np.maximum(starts, before), 0)
    heads = np.concatenate([[0], boundaries])
    totals[targets[heads]] += np.add.reduceat(covered, heads)


def _add_union_lengths_by_sweep(totals: np.ndarray, targets: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> None:
    """_add_union_lengths where targets times times overflow 64 bits: a sweep over the
    intervals' ends, in time order per target, counting where one is open (each target's +1s
    and -1s cancel, so the running count is 0 between targets)."""
    times = np.concatenate([starts, ends])
    owner = np.concatenate([targets, targets])
    step = np.concatenate([np.ones(len(starts), np.int64), np.full(len(ends), -1, np.int64)])
    order = np.lexsort((times, owner))
    times, owner, open_ = times[order], owner[order], np.cumsum(step[order])
    covered = (times[1:] - times[:-1]) * (open_[:-1] > 0)
    np.add.at(totals, owner[:-1], covered)


def _plain_tuple(*values) -> tuple:
    return values


def _is_identity(codes: np.ndarray) -> bool:
    return bool((codes == np.arange(len(codes), dtype=codes.dtype)).all())


def _expanded(taken: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(targets per row, starts, ends) of several blocks as one row per target: targets,
    starts, ends (int64)."""
    if not taken:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64)
    targets = np.concatenate([t for t, _, _ in taken])
    starts = np.concatenate([s for _, s, _ in taken]).astype(np.int64)
    ends = np.concatenate([e for _, _, e in taken]).astype(np.int64)
    wanted = targets >= 0
    rows = np.nonzero(wanted)[0]
    return targets[wanted], starts[rows], ends[rows]
