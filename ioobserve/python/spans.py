"""Application-level Python spans, built from the stacks of I/O events as they arrive: no
decorator, no change to the program.

With each traced call's Python stack the kernel says how many of its levels, from the
outermost down, are the same calls (frame and first arguments) as in the thread's previous
stacked call (`py_same`, see python_stacks.bpf.c). A run of a thread's consecutive stacked
events that keep level k is one call of level k's function: a PYTHON-layer span from its
first event's start to its last event's end, parented to the span of level k - 1 that holds
it, as the I/O events are to their innermost span. DFTracer's application-level unoverlapped
I/O is then computable from the spans alone.

SpanBuilder keeps each thread's open spans (those holding its last stacked event) from one
batch to the next, so the spans written are those the whole recording gives at once: a span
is given out once it has ended, that is when its thread's next stacked event leaves the call,
when its process is gone, or at the end (`close`).

What a span cannot see: the call's time before its first I/O and after its last; calls with
no traced I/O (and, under --py-stacks N, the calls between walked ones); calls seen only in
stacks deeper than --py-depth, whose levels cannot be counted from the outermost frame (such
an I/O event has its stack but no span).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from ioobserve.data import events as ev
from ioobserve.data import schema as s

PY_SAME = "py_same"  # an enriched batch's extra column: levels shared with the thread's previous stack
# A span starts 2 ns per level above the innermost before its first event's start, and 2 ns
# more: spans of one event are strictly nested in time and each has its own ts (the key its
# children refer to), 2 ns apart, so that the 1 ns a µs-precision trace may add to a parent
# key (ioobserve.trace.lines) never makes it another span's.
_TS_ROOM = ev.PY_MAX_FRAMES + 1
_KEY = [s.PID, s.TID]
_BY_LEVEL = [*_KEY, "_level"]
# What a span takes from its first event (what names its process, cgroup and context comes later).
_CARRIED = [s.UID, s.CGROUP]
# A span names its code as its first event's stack and the frame of it (PY_FRAME) it is.
_NAMED = [s.PY_STACK, s.PY_FRAME, s.PY_FUNCTION, s.PY_FILE, s.PY_LINE]
LEVELS_SCHEMA = {s.PY_STACK: pl.UInt32, "_level": pl.UInt32, "_depth": pl.UInt32, s.PY_FUNCTION: pl.String,
                 s.PY_FILE: pl.String, s.PY_LINE: pl.Int32}
"""A stack's frames, one row per level, outermost (0) first."""
_SPAN_SCHEMA = {name: dtype for name, dtype in s.ID_BATCH_SCHEMA.items() if name not in (s.FILE, s.FILE2)}
"""A span's columns: an id batch's; it names no file."""
_OPEN_SCHEMA = {s.PID: pl.UInt32, s.TID: pl.UInt32, "_level": pl.UInt32, "_key": pl.UInt64, "_end": pl.UInt64,
                "_parent": pl.UInt64, s.PY_STACK: pl.UInt32, s.PY_FRAME: pl.UInt16,
                s.PY_FUNCTION: pl.String, s.PY_FILE: pl.String, s.PY_LINE: pl.Int32,
                s.UID: pl.UInt32, s.CGROUP: pl.UInt64}


class SpanBuilder:
    """The open spans of every thread, and the spans each batch closes (used by one thread)."""

    def __init__(self) -> None:
        self._open = pl.DataFrame(schema=_OPEN_SCHEMA)
        self._empty: pl.DataFrame | None = None  # no spans, as events (made once)

    def add(self, events: pl.DataFrame, levels: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        """(the events, stacked ones parented to their innermost span where they have no
        parent of their own; the spans this batch ends, as events without job context)
        from an enriched batch with a PY_SAME column and its stacks' LEVELS_SCHEMA rows."""
        if levels.is_empty():  # no event has a stack whose levels are known: nothing to do
            return events.drop(PY_SAME), self._no_spans()
        indexed = events.with_row_index("_row")
        # Only events whose stack has levels (not one cut at --py-depth): the kernel does not
        # compare the others' calls either, so they neither end nor continue a span.
        depths = levels.group_by(s.PY_STACK).agg(pl.col("_depth").first())
        stacked = (
            indexed.filter(pl.col(s.PY_STACK).is_in(depths.get_column(s.PY_STACK).implode()))
            .sort(*_KEY, s.TS, maintain_order=True)
            .join(depths, on=s.PY_STACK, how="left", maintain_order="left")
        )
        if stacked.is_empty():
            return events.drop(PY_SAME), self._no_spans()
        batch = _Batch(stacked, self._open)
        spans = np.zeros(events.height, dtype=np.uint64)
        spans[stacked.get_column("_row").to_numpy()] = batch.innermost_keys()
        has_span = np.zeros(events.height, dtype=bool)
        has_span[stacked.get_column("_row").to_numpy()] = True
        parented = indexed.with_columns(
            pl.coalesce(s.PARENT_TS, pl.when(pl.Series(has_span)).then(pl.Series(spans))).alias(s.PARENT_TS)
        ).drop("_row", PY_SAME)
        table, is_open = batch.table(levels)
        self._open = pl.concat([self._open.join(batch.threads, on=_KEY, how="anti"), table.filter(is_open)])
        return parented, _as_events(pl.concat([batch.ended_before(), table.filter(~is_open)]))

    def close(self, pids: list[int] | None = None) -> pl.DataFrame:
        """End the open spans of these processes (all if None): they are gone, or the recording is."""
        if pids is None:
            ending, self._open = self._open, self._open.clear()
        else:
            gone = pl.col(s.PID).is_in(pl.Series(pids, dtype=pl.UInt32).implode())
            ending, self._open = self._open.filter(gone), self._open.filter(~gone)
        return _as_events(ending)

    def _no_spans(self) -> pl.DataFrame:
        if self._empty is None:
            self._empty = _as_events(self._open.clear())
        return self._empty


class _Batch:
    """The runs of one batch's stacked events, as arrays: a run is one call at one level, a
    thread's consecutive events that share that level. Events are sorted by thread and time;
    a run starts at an event whose PY_SAME is at most its level, or carries on a span left
    open by the batch before (the thread's first event shares its level); it lasts until the
    thread's next event that does not share the level."""

    def __init__(self, stacked: pl.DataFrame, open_spans: pl.DataFrame):
        self.stacked = stacked
        pid, tid = stacked.get_column(s.PID).to_numpy(), stacked.get_column(s.TID).to_numpy()
        self.ts = stacked.get_column(s.TS).to_numpy()
        self.ends = self.ts + stacked.get_column(s.DUR).to_numpy()
        self.depth = stacked.get_column("_depth").to_numpy().astype(np.int64)
        self.n = len(self.ts)
        self.new_thread = np.ones(self.n, dtype=bool)
        self.new_thread[1:] = (pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1])
        self.thread = np.cumsum(self.new_thread) - 1
        self.first_of = np.flatnonzero(self.new_thread)
        self.last_of = np.append(self.first_of[1:] - 1, self.n - 1)
        self.threads = pl.DataFrame({s.PID: pid[self.first_of], s.TID: tid[self.first_of],
                                     "_t": np.arange(len(self.first_of), dtype=np.int64)})
        # The spans the last batch left open on these threads: levels 0 to some depth each.
        self.open_here = open_spans.join(self.threads, on=_KEY, how="inner")
        open_t = self.open_here.get_column("_t").to_numpy()
        open_level = self.open_here.get_column("_level").to_numpy().astype(np.int64)
        open_depth = np.zeros(len(self.first_of), dtype=np.int64)
        np.maximum.at(open_depth, open_t, open_level + 1)
        # Levels an event shares with the one before; a thread's first event, with the open spans.
        self.shared = np.minimum(stacked.get_column(PY_SAME).fill_null(0).to_numpy().astype(np.int64), self.depth)
        self.shared[self.first_of] = np.minimum(self.shared[self.first_of], open_depth)
        self.carried = open_level < self.shared[self.first_of[open_t]]
        self._runs(open_t[self.carried], open_level[self.carried])

    def _runs(self, carried_t: np.ndarray, carried_level: np.ndarray) -> None:
        """Each run's level, first and last event, key, end and parent; sorted by (level, first)."""
        counts = self.depth - self.shared
        event = np.repeat(np.arange(self.n), counts)
        level = np.arange(len(event)) - np.repeat(np.cumsum(counts) - counts, counts) + np.repeat(self.shared, counts)
        level = np.concatenate([level, carried_level])
        first = np.concatenate([event, self.first_of[carried_t]])
        source = np.concatenate([np.full(len(event), -1), np.flatnonzero(self.carried)])  # open_here row, or -1
        order = np.lexsort((first, level))
        self.level, self.first, self.source = level[order], first[order], source[order]
        self.last = np.empty_like(self.first)
        self.end = np.empty(len(self.first), dtype=np.uint64)
        ends = np.append(self.ends, np.uint64(0))  # room for reduceat's index n
        for lvl in np.unique(self.level):
            at = np.flatnonzero(self.level == lvl)
            bounds = np.append(np.flatnonzero((self.shared <= lvl) | self.new_thread), self.n)
            nxt = bounds[np.searchsorted(bounds, self.first[at], side="right")]
            self.last[at] = nxt - 1
            # A run's end is its events' latest: over [first, next) of each run (runs of a level do not overlap).
            self.end[at] = np.maximum.reduceat(ends, np.column_stack([self.first[at], nxt]).ravel())[::2]
        started = self.source < 0
        open_rows = self.source[~started]
        self.key = np.where(started, self.ts[self.first] - 2 * (_TS_ROOM - self.level).astype(np.uint64), 0).astype(np.uint64)
        self.key[~started] = self.open_here.get_column("_key").to_numpy()[open_rows]
        self.end[~started] = np.maximum(self.end[~started], self.open_here.get_column("_end").to_numpy()[open_rows])
        self.is_open = self.last == self.last_of[self.thread[self.first]]
        self._codes = self.level * (self.n + 1) + self.first
        # A new span's parent: the span one level up that holds its first event.
        parent = np.zeros(len(self.first), dtype=np.uint64)
        has_parent = started & (self.level > 0)
        parent[has_parent] = self.key[self._containing(self.first[has_parent], self.level[has_parent] - 1)]
        open_parent = self.open_here.get_column("_parent")
        self.parent = pl.Series("_parent", parent).set(pl.Series(~has_parent), None)
        if open_rows.size:
            carried_at = np.flatnonzero(~started)
            self.parent = self.parent.scatter(carried_at, open_parent.gather(open_rows))

    def _containing(self, event: np.ndarray, level: np.ndarray) -> np.ndarray:
        """The run holding each event at each level (every level of an event is in one)."""
        return np.searchsorted(self._codes, level * (self.n + 1) + event, side="right") - 1

    def innermost_keys(self) -> np.ndarray:
        """Each stacked event's innermost span's key."""
        return self.key[self._containing(np.arange(self.n), self.depth - 1)]

    def ended_before(self) -> pl.DataFrame:
        """The open spans these threads did not carry on: they ended before this batch."""
        return self.open_here.filter(pl.Series(~self.carried)).select(list(_OPEN_SCHEMA))

    def table(self, levels: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
        """The runs as open-span rows (_OPEN_SCHEMA), and which are still open."""
        started = self.source < 0
        first = self.first[started]
        named = (
            self.stacked[first].select(*_KEY, s.PY_STACK, "_depth", *_CARRIED)
            .with_columns(pl.Series("_level", self.level[started], dtype=pl.UInt32))
            .join(levels.select(s.PY_STACK, "_level", s.PY_FUNCTION, s.PY_FILE, s.PY_LINE), on=[s.PY_STACK, "_level"],
                  how="left", maintain_order="left")
            .with_columns((pl.col("_depth") - 1 - pl.col("_level")).cast(pl.UInt16).alias(s.PY_FRAME))
        )
        new = named.with_columns(pl.Series("_key", self.key[started]), pl.Series("_end", self.end[started]),
                                 self.parent.filter(pl.Series(started))).select(list(_OPEN_SCHEMA))
        carried = self.open_here[self.source[~started]].with_columns(
            pl.Series("_end", self.end[~started])).select(list(_OPEN_SCHEMA))
        table = pl.concat([new.cast(_OPEN_SCHEMA), carried.cast(_OPEN_SCHEMA)])
        return table, pl.Series(np.concatenate([self.is_open[started], self.is_open[~started]]))


def _as_events(spans: pl.DataFrame) -> pl.DataFrame:
    """Spans as PYTHON-layer events named by their function: parents (F_PARENT), no file, no bytes."""
    frame = spans.select(
        pl.col("_key").alias(s.TS), (pl.col("_end") - pl.col("_key")).cast(pl.UInt64).alias(s.DUR), *_KEY,
        pl.lit(s.LAYER_PYTHON).alias(s.LAYER), pl.col(s.PY_FUNCTION).alias(s.OP),
        pl.lit(0, pl.Int64).alias(s.RET), pl.lit(0, pl.Int16).alias(s.ERRNO), pl.lit(0, pl.UInt64).alias(s.BYTES_REQ),
        pl.lit(0, pl.UInt64).alias(s.BYTES), pl.lit(-1, pl.Int64).alias(s.OFFSET), pl.lit(-1, pl.Int32).alias(s.FD),
        pl.lit(0, pl.UInt64).alias(s.DEV), pl.lit(0, pl.UInt64).alias(s.INO), pl.lit(0, pl.UInt64).alias(s.ARG),
        pl.lit(ev.F_PARENT, pl.UInt16).alias(s.FLAGS), pl.lit(True).alias(s.COUNTED), pl.col("_parent").alias(s.PARENT_TS),
        *(pl.col(c) for c in (*_NAMED, *_CARRIED)),
    )
    missing = [pl.lit(None, dtype).alias(name) for name, dtype in _SPAN_SCHEMA.items() if name not in frame.columns]
    return frame.with_columns(missing).select(list(_SPAN_SCHEMA)).cast(_SPAN_SCHEMA)
