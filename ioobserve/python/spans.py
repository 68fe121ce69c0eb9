"""Application-level Python spans, derived from the stacks of I/O events: no decorator, no
change to the program.

Each frame of a stack carries a call id (the frame's address and first arguments, hashed in
the kernel). Consecutive stacked I/O events of a thread that share the same frames from the
outermost down to level k were made inside one call of that level's function: that run is
a PYTHON-layer span named by the function, from its first event's start to its last
event's end, parented to the span of level k - 1 that holds it (its `parent_ts`), as the
I/O events are to their innermost span. DFTracer's application-level unoverlapped I/O is
then computable from the spans alone.

What a span cannot see: the call's time before its first I/O and after its last; calls
with no traced I/O (and, under --py-stacks N, the calls between walked ones); and two calls
of one function from one place with the same first arguments and no I/O of the caller
between them, which reuse one frame and are one span.
"""

from __future__ import annotations

import polars as pl

from ioobserve import events as ev
from ioobserve import schema as s

# A span starts this many ns before its first event, less one per level down: spans of one
# event are strictly nested in time and each has its own ts (the id children refer to).
_TS_ROOM = ev.PY_MAX_FRAMES + 1
_KEY = [s.PID, s.TID]
_CARRIED = [s.PPID, s.UID, s.COMM, s.CGROUP, *s.CGROUP_CONTEXT_SCHEMA, s.USER, *s.PROCESS_CONTEXT_SCHEMA]
STACK_TABLE_SCHEMA = {"stack": pl.UInt32, "frames": pl.List(pl.Struct(
    {"function": pl.String, "file": pl.String, "line": pl.Int32, "call": pl.UInt64}))}


def _levels(stacks: pl.DataFrame) -> pl.DataFrame:
    """A row per frame of each stack, outermost (level 0) first, with the key of the calls
    from the outermost down to it."""
    outer_first = stacks.select(pl.col("stack").alias(s.PY_STACK), pl.col("frames").list.reverse())
    return (
        outer_first.with_columns(
            pl.int_ranges(pl.col("frames").list.len()).alias("_level"),
            pl.col("frames").list.eval(pl.element().struct.field("call")).alias("_calls"),
        )
        .explode("frames", "_level")
        .with_columns(pl.col("_calls").list.head(pl.col("_level") + 1).hash().alias("_prefix"))
        .unnest("frames")
        .select(s.PY_STACK, "_level", "_prefix", "function", "file", "line")
    )


def python_spans(events: pl.DataFrame, stacks: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(spans in the columns of ioobserve.schema, (pid, tid, ts, span ts) of each stacked
    event's innermost span) from events and their stack table (STACK_TABLE_SCHEMA)."""
    stacked = (
        events.filter(pl.col(s.PY_STACK).is_not_null()).sort(*_KEY, s.TS)
        .with_columns(pl.int_range(pl.len()).over(_KEY).alias("_seq"))
    )
    rows = stacked.select(*_KEY, s.TS, s.DUR, s.PY_STACK, "_seq", *_CARRIED).join(
        _levels(stacks), on=s.PY_STACK, how="inner").sort(*_KEY, "_level", "_seq")
    by_level = [*_KEY, "_level"]
    continues = (pl.col("_prefix") == pl.col("_prefix").shift(1).over(by_level)) & (
        pl.col("_seq") == pl.col("_seq").shift(1).over(by_level) + 1)
    rows = rows.with_columns((~continues.fill_null(False)).cast(pl.UInt32).cum_sum().over(by_level).alias("_run"))
    spans = rows.group_by(*by_level, "_run").agg(
        pl.col(s.TS).min().alias("_start"), (pl.col(s.TS) + pl.col(s.DUR)).max().alias("_end"),
        pl.col("_seq").min().alias("_first"), pl.col("function").first(), pl.col("file").first(), pl.col("line").first(),
        *(pl.col(column).first() for column in _CARRIED),
    ).with_columns((pl.col("_start") - (_TS_ROOM - pl.col("_level"))).cast(pl.UInt64).alias("_ts"))
    span_ts = spans.select(*by_level, "_run", "_ts")
    run_of = rows.select(*_KEY, "_seq", "_level", "_run")
    parents = (
        spans.select(*_KEY, "_level", "_run", "_first")
        .join(run_of.rename({"_run": "_parent_run"}).with_columns(pl.col("_level") + 1),
              left_on=[*_KEY, "_first", "_level"], right_on=[*_KEY, "_seq", "_level"], how="inner")
        .join(span_ts.rename({"_run": "_parent_run", "_ts": "_parent_ts"}).with_columns(pl.col("_level") + 1),
              on=[*by_level, "_parent_run"], how="inner")
        .select(*by_level, "_run", "_parent_ts")
    )
    spans = spans.join(parents, on=[*by_level, "_run"], how="left")
    innermost = (
        rows.join(span_ts, on=[*by_level, "_run"], how="inner")
        .group_by(*_KEY, "_seq").agg(pl.col("_ts").sort_by("_level").last().alias("_span_ts"))
        .join(stacked.select(*_KEY, "_seq", s.TS), on=[*_KEY, "_seq"], how="inner")
        .select(*_KEY, s.TS, "_span_ts")
        .unique([*_KEY, s.TS], keep="first")  # a two-file call's two records: one span
    )
    return _as_events(spans), innermost


def _as_events(spans: pl.DataFrame) -> pl.DataFrame:
    """Spans as PYTHON-layer events: named by the function, no file, no bytes."""
    frame = spans.select(
        pl.col("_ts").alias(s.TS), (pl.col("_end") - pl.col("_ts")).cast(pl.UInt64).alias(s.DUR), *_KEY,
        pl.lit(s.LAYER_PYTHON).alias(s.LAYER), pl.col("function").alias(s.OP),
        pl.lit(0, pl.Int64).alias(s.RET), pl.lit(0, pl.Int32).alias(s.ERRNO), pl.lit(0, pl.UInt64).alias(s.BYTES_REQ),
        pl.lit(0, pl.UInt64).alias(s.BYTES), pl.lit(-1, pl.Int64).alias(s.OFFSET), pl.lit(-1, pl.Int32).alias(s.FD),
        pl.lit(0, pl.UInt64).alias(s.DEV), pl.lit(0, pl.UInt64).alias(s.INO), pl.lit(0, pl.UInt64).alias(s.ARG),
        pl.lit(0, pl.UInt16).alias(s.FLAGS), pl.lit(True).alias(s.COUNTED), pl.col("_parent_ts").alias(s.PARENT_TS),
        pl.col("function").alias(s.PY_FUNCTION), pl.col("file").alias(s.PY_FILE), pl.col("line").alias(s.PY_LINE),
        *(pl.col(column) for column in _CARRIED),
    )
    missing = [pl.lit(None, dtype).alias(name) for name, dtype in s.EVENT_SCHEMA.items() if name not in frame.columns]
    return frame.with_columns(missing).select(list(s.EVENT_SCHEMA)).cast(s.EVENT_SCHEMA)


def with_python_spans(events: pl.DataFrame, stacks: pl.DataFrame) -> pl.DataFrame:
    """Events plus their Python spans, time-sorted; stacked events without a parent of their
    own (a library call's) get their innermost span as parent."""
    if stacks.is_empty() or events.get_column(s.PY_STACK).null_count() == events.height:
        return events
    spans, innermost = python_spans(events, stacks)
    parented = events.join(innermost, on=[*_KEY, s.TS], how="left", maintain_order="left").with_columns(
        pl.coalesce(s.PARENT_TS, "_span_ts").alias(s.PARENT_TS)).drop("_span_ts")
    return pl.concat([parented, spans]).sort(s.TS, maintain_order=True)
