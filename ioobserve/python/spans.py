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

import polars as pl

from ioobserve import events as ev
from ioobserve import schema as s

PY_SAME = "py_same"  # an enriched batch's extra column: levels shared with the thread's previous stack
# A span starts 2 ns per level above the innermost before its first event's start, and 2 ns
# more: spans of one event are strictly nested in time and each has its own ts (the key its
# children refer to), 2 ns apart, so that the 1 ns a µs-precision trace may add to a parent
# key (ioobserve.trace.lines) never makes it another span's.
_TS_ROOM = ev.PY_MAX_FRAMES + 1
_KEY = [s.PID, s.TID]
_BY_LEVEL = [*_KEY, "_level"]
# What a span takes from its first event (the job and process context are joined later, by time).
_CARRIED = [s.PPID, s.UID, s.COMM, s.CGROUP]
# A span names its code as its first event's stack and the frame of it (PY_FRAME) it is.
_NAMED = [s.PY_STACK, s.PY_FRAME, s.PY_FUNCTION, s.PY_FILE, s.PY_LINE]
LEVELS_SCHEMA = {s.PY_STACK: pl.UInt32, "_level": pl.UInt32, "_depth": pl.UInt32, s.PY_FUNCTION: pl.String,
                 s.PY_FILE: pl.String, s.PY_LINE: pl.Int32}
"""A stack's frames, one row per level, outermost (0) first."""
_CONTEXT = {*s.CGROUP_CONTEXT_SCHEMA, s.USER, *s.PROCESS_CONTEXT_SCHEMA}
_SPAN_SCHEMA = {name: dtype for name, dtype in s.EVENT_SCHEMA.items() if name not in _CONTEXT}
"""A span's columns: an event's, but for the job and process context joined later by time."""
_OPEN_SCHEMA = {s.PID: pl.UInt32, s.TID: pl.UInt32, "_level": pl.UInt32, "_key": pl.UInt64, "_end": pl.UInt64,
                "_parent": pl.UInt64, s.PY_STACK: pl.UInt32, s.PY_FRAME: pl.UInt16,
                s.PY_FUNCTION: pl.String, s.PY_FILE: pl.String, s.PY_LINE: pl.Int32,
                s.PPID: pl.UInt32, s.UID: pl.UInt32, s.COMM: pl.String, s.CGROUP: pl.UInt64}


class SpanBuilder:
    """The open spans of every thread, and the spans each batch closes (used by one thread)."""

    def __init__(self) -> None:
        self._open = pl.DataFrame(schema=_OPEN_SCHEMA)

    def add(self, events: pl.DataFrame, levels: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        """(the events, stacked ones parented to their innermost span where they have no
        parent of their own; the spans this batch ends, as events without job context)
        from an enriched batch with a PY_SAME column and its stacks' LEVELS_SCHEMA rows."""
        indexed = events.with_row_index("_row")
        # Only events whose stack has levels (not one cut at --py-depth): the kernel does not
        # compare the others' calls either, so they neither end nor continue a span.
        stacked = (
            indexed.filter(pl.col(s.PY_STACK).is_in(levels.get_column(s.PY_STACK).implode()))
            .select("_row", *_KEY, s.TS, s.DUR, s.PY_STACK, pl.col(PY_SAME).fill_null(0), *_CARRIED)
            .sort(*_KEY, s.TS, maintain_order=True)
            .with_columns(pl.int_range(pl.len(), dtype=pl.UInt32).over(_KEY).alias("_seq"))
        )
        if stacked.is_empty():
            return events.drop(PY_SAME), self._no_spans()
        rows = stacked.join(levels, on=s.PY_STACK, how="inner").join(
            self._open.select(*_BY_LEVEL, pl.lit(True).alias("_was_open")), on=_BY_LEVEL, how="left")
        # A level starts a new call unless the kernel says it is the previous event's (whose
        # run at this level is the open span's, for a thread's first event of the batch).
        starts = (pl.col("_level") >= pl.col(PY_SAME)) | ((pl.col("_seq") == 0) & pl.col("_was_open").is_null())
        rows = rows.sort(*_BY_LEVEL, "_seq").with_columns(starts.cast(pl.UInt32).cum_sum().over(_BY_LEVEL).alias("_run"))
        runs = rows.group_by(*_BY_LEVEL, "_run").agg(
            pl.col(s.TS).min().alias("_start"), (pl.col(s.TS) + pl.col(s.DUR)).max().alias("_end"),
            pl.col("_seq").min().alias("_first"), pl.col("_seq").max().alias("_last"),
            (pl.col("_depth") - 1 - pl.col("_level")).first().alias(s.PY_FRAME),
            *(pl.col(c).first() for c in (s.PY_STACK, s.PY_FUNCTION, s.PY_FILE, s.PY_LINE, *_CARRIED)),
        )
        runs = self._keyed(runs, rows)
        innermost = rows.join(runs.select(*_BY_LEVEL, "_run", "_key"), on=[*_BY_LEVEL, "_run"]).group_by("_row").agg(
            pl.col("_key").sort_by("_level").last().alias("_span"))
        parented = indexed.join(innermost, on="_row", how="left", maintain_order="left").with_columns(
            pl.coalesce(s.PARENT_TS, "_span").alias(s.PARENT_TS)).drop("_row", "_span", PY_SAME)
        # Open: the spans holding their thread's last stacked event of the batch.
        last = stacked.group_by(_KEY).agg(pl.col("_seq").max().alias("_thread_last"))
        runs = runs.join(last, on=_KEY).with_columns((pl.col("_last") == pl.col("_thread_last")).alias("_open"))
        threads = last.select(_KEY)
        ended_before = self._open.join(runs.filter(pl.col("_run") == 0).select(_BY_LEVEL), on=_BY_LEVEL, how="anti").join(
            threads, on=_KEY, how="semi")
        closed = pl.concat([ended_before, runs.filter(~pl.col("_open")).select(list(_OPEN_SCHEMA))])
        self._open = pl.concat([
            self._open.join(threads, on=_KEY, how="anti"), runs.filter(pl.col("_open")).select(list(_OPEN_SCHEMA))])
        return parented, _as_events(closed)

    def _keyed(self, runs: pl.DataFrame, rows: pl.DataFrame) -> pl.DataFrame:
        """Runs with their span's key (ts), end and parent key: run 0 continues the open span."""
        continued = runs.filter(pl.col("_run") == 0).join(
            self._open.select(*_BY_LEVEL, "_key", pl.col("_end").alias("_open_end"), "_parent",
                              *(pl.col(c).alias(f"_open_{c}") for c in (*_NAMED, *_CARRIED))),
            on=_BY_LEVEL, how="inner",
        ).with_columns(
            pl.max_horizontal("_end", "_open_end").alias("_end"),
            *(pl.col(f"_open_{c}").alias(c) for c in (*_NAMED, *_CARRIED)),
        )
        new = runs.filter(pl.col("_run") > 0).with_columns(
            (pl.col("_start") - 2 * (_TS_ROOM - pl.col("_level"))).cast(pl.UInt64).alias("_key"))
        keys = pl.concat([continued.select(*_BY_LEVEL, "_run", "_key"), new.select(*_BY_LEVEL, "_run", "_key")])
        # A new span's parent: the span one level up that holds its first event.
        up = rows.select(*_KEY, "_seq", (pl.col("_level") + 1).alias("_level"), pl.col("_run").alias("_up_run"))
        parents = (
            new.select(*_BY_LEVEL, "_run", "_first")
            .join(up, left_on=[*_BY_LEVEL, "_first"], right_on=[*_BY_LEVEL, "_seq"], how="inner")
            .join(keys.select(*_KEY, (pl.col("_level") + 1).alias("_level"), pl.col("_run").alias("_up_run"),
                              pl.col("_key").alias("_parent")), on=[*_BY_LEVEL, "_up_run"], how="inner")
            .select(*_BY_LEVEL, "_run", "_parent")
        )
        new = new.join(parents, on=[*_BY_LEVEL, "_run"], how="left")
        columns = ["_run", "_first", "_last", *_OPEN_SCHEMA]
        return pl.concat([continued.select(columns), new.select(columns)], how="vertical_relaxed").cast(_OPEN_SCHEMA)

    def close(self, pids: list[int] | None = None) -> pl.DataFrame:
        """End the open spans of these processes (all if None): they are gone, or the recording is."""
        if pids is None:
            ending, self._open = self._open, self._open.clear()
        else:
            gone = pl.col(s.PID).is_in(pl.Series(pids, dtype=pl.UInt32).implode())
            ending, self._open = self._open.filter(gone), self._open.filter(~gone)
        return _as_events(ending)

    def _no_spans(self) -> pl.DataFrame:
        return _as_events(self._open.clear())


def _as_events(spans: pl.DataFrame) -> pl.DataFrame:
    """Spans as PYTHON-layer events named by their function: parents (F_PARENT), no file, no bytes."""
    frame = spans.select(
        pl.col("_key").alias(s.TS), (pl.col("_end") - pl.col("_key")).cast(pl.UInt64).alias(s.DUR), *_KEY,
        pl.lit(s.LAYER_PYTHON).alias(s.LAYER), pl.col(s.PY_FUNCTION).alias(s.OP),
        pl.lit(0, pl.Int64).alias(s.RET), pl.lit(0, pl.Int32).alias(s.ERRNO), pl.lit(0, pl.UInt64).alias(s.BYTES_REQ),
        pl.lit(0, pl.UInt64).alias(s.BYTES), pl.lit(-1, pl.Int64).alias(s.OFFSET), pl.lit(-1, pl.Int32).alias(s.FD),
        pl.lit(0, pl.UInt64).alias(s.DEV), pl.lit(0, pl.UInt64).alias(s.INO), pl.lit(0, pl.UInt64).alias(s.ARG),
        pl.lit(ev.F_PARENT, pl.UInt16).alias(s.FLAGS), pl.lit(True).alias(s.COUNTED), pl.col("_parent").alias(s.PARENT_TS),
        *(pl.col(c) for c in (*_NAMED, *_CARRIED)),
    )
    missing = [pl.lit(None, dtype).alias(name) for name, dtype in _SPAN_SCHEMA.items() if name not in frame.columns]
    return frame.with_columns(missing).select(list(_SPAN_SCHEMA)).cast(_SPAN_SCHEMA)
