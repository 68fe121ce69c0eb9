"""Naming one trace file's raw events by its own metadata records: files, processes, cgroups,
users, Python stacks and process contexts become the named columns of ioobserve.data.schema
(the files here, the rest by ioobserve.data.naming, as while recording)."""

from __future__ import annotations

import polars as pl

from ioobserve.data import events as ev
from ioobserve.data import schema as s
from ioobserve.data.derived import bytes_moved, errno_of
from ioobserve.data.model import ENV_JOB, ENV_STEP
from ioobserve.data.naming import Names, module_and_request_id, with_context, with_names
from ioobserve.trace.read import parse
from ioobserve.trace.read.tables import (
    cgroup_table,
    context_table,
    file_table,
    process_table,
    stack_frames,
    user_table,
    with_file_ids,
)


class TraceNames:
    """The tables of one trace file that name its raw events, built once from its metadata
    records: naming a long trace chunk by chunk rebuilt them per chunk, and their cost grows
    with the trace (a context row per process change), which made building the copy of a
    100 M-event trace three times slower per event than of a 5 M one."""

    def __init__(self, lines: pl.DataFrame) -> None:
        files = file_table(lines)
        # FILE_ID per file, not per event: an event's comes with its path
        self.files = with_file_ids(files).lazy()
        self.second_files = files.lazy().select(pl.col("fhash").alias("fhash2"), pl.col(s.PATH).alias(s.PATH2))
        cgroups, users, frames, contexts = cgroup_table(lines), user_table(lines), stack_frames(lines), context_table(lines)
        self.names = Names(processes=process_table(lines).lazy(), cgroups=cgroups.lazy(), users=users.lazy(),
                           frames=frames.lazy(), contexts=contexts, slack_ns=_context_slack(lines))
        self.null_columns = _null_columns(cgroups, users, frames, contexts)

    def name(self, raw: pl.DataFrame, file_ids: bool = False) -> pl.DataFrame:
        """Raw events (parse.RAW_SCHEMA) with the columns of ioobserve.data.schema (schema.COPY_SCHEMA's
        with file_ids), sorted by time."""
        flags = pl.col("evflags").fill_null(0)
        ret = pl.col("ret")
        # Sorted while the rows are narrow (the members of a flush, one per shape, interleave in
        # time); then one lazy query, so that no intermediate frame of every event is built, with
        # left joins that keep the rows' order.
        raw = raw.sort(pl.col("ts") * 1000 + pl.col("tns").fill_null(0).cast(pl.Int64), maintain_order=True)  # one key: 2x faster
        joined = raw.lazy().join(self.files, on="fhash", how="left", maintain_order="left")
        if raw.get_column("fhash2").null_count() == raw.height:  # most batches rename nothing: skip a costly join
            joined = joined.with_columns(pl.lit(None, pl.String).alias(s.PATH2))
        else:
            joined = joined.join(self.second_files, on="fhash2", how="left", maintain_order="left")
        ids = joined.rename({"cgroup": s.CGROUP, "pystack": s.PY_STACK, "pyframe": s.PY_FRAME})
        frame = (
            with_names(ids, self.names)
            .select(
                (pl.col("ts").cast(pl.UInt64) * 1000 + pl.col("tns").fill_null(0)).alias(s.TS),
                (pl.col("dur").cast(pl.UInt64) * 1000 + pl.col("dns").fill_null(0)).alias(s.DUR),
                pl.col("pid").alias(s.PID), pl.col("tid").alias(s.TID), pl.col(s.PPID), pl.col(s.UID),
                pl.col(s.COMM), pl.col("cat").alias(s.LAYER), pl.col("name").alias(s.OP), pl.col(s.PATH), pl.col(s.PATH2),
                pl.col("fd").alias(s.FD), ret.alias(s.RET),
                errno_of(ret, pl.col("cat")).alias(s.ERRNO),
                pl.col("count").alias(s.BYTES_REQ), pl.lit(0, pl.UInt64).alias(s.BYTES), pl.col("offset").alias(s.OFFSET),
                pl.col(s.DEV).fill_null(0), pl.col(s.INO).fill_null(0),  # 0 without a file, as when live
                pl.col(s.CGROUP), pl.col("arg").alias(s.ARG),
                flags.alias(s.FLAGS), ((flags & ev.F_REPEAT) == 0).alias(s.COUNTED), pl.col("pts").alias(s.PARENT_TS),
                pl.col(s.PY_STACK), pl.when(pl.col(s.PY_STACK).is_not_null()).then(pl.col(s.PY_FRAME)).alias(s.PY_FRAME),
                pl.col(s.PY_FUNCTION), pl.col(s.PY_FILE), pl.col(s.PY_LINE),
                *module_and_request_id(pl.col("cat"), pl.col("module")), pl.col("status").alias(s.STATUS),
                *(pl.col(key) for key in s.CGROUP_CONTEXT_SCHEMA), pl.col(s.USER),
                *([pl.col(s.FILE_ID)] if file_ids else []),
            )
            .with_columns(bytes_moved(pl.col(s.OP), pl.col(s.RET), pl.col(s.BYTES_REQ)).alias(s.BYTES))
        )
        schema = s.COPY_SCHEMA if file_ids else s.EVENT_SCHEMA
        columns = {name: dtype for name, dtype in schema.items() if name not in s.PROCESS_CONTEXT_SCHEMA}
        # The in-memory engine: Polars' streaming one held 2-3x the rows' size in buffers here
        events = frame.cast(columns).collect(engine="in-memory")
        events = events if events.get_column(s.TS).is_sorted() else events.sort(s.TS)
        return with_context(events, self.names).select(list(schema)).cast(schema)


def name_events(raw: pl.DataFrame, lines: pl.DataFrame) -> pl.DataFrame:
    """One file's raw events (parse.RAW_SCHEMA) with the columns of ioobserve.data.schema, named by
    the file's metadata lines and sorted by time (TraceNames, for a file read in chunks)."""
    return TraceNames(lines).name(raw)


def _null_columns(cgroups: pl.DataFrame, users: pl.DataFrame, frames: pl.DataFrame, contexts: pl.DataFrame) -> frozenset[str]:
    """The columns null in every event because the table that names them has no value for any
    id (a node's events have no pod, no rank; a trace without Python stacks, no frames): the
    copy leaves them out, as Parquet's cost is per column however empty."""
    def empty(table: pl.DataFrame, column: str) -> bool:
        values = table.get_column(column)
        return values.null_count() == table.height or (isinstance(values.dtype, pl.List) and values.list.len().max() == 0)

    null = {column for column in s.CGROUP_CONTEXT_SCHEMA if empty(cgroups, column)}
    null -= {column for column, env in ((s.JOB, ENV_JOB), (s.STEP, ENV_STEP)) if not empty(contexts, env)}  # its fallback
    null |= {column for column in s.PROCESS_CONTEXT_SCHEMA if empty(contexts, column)}
    null |= {column for column in (s.PY_FUNCTION, s.PY_FILE, s.PY_LINE) if empty(frames, column)}
    return frozenset(null | ({s.USER} if empty(users, s.USER) else set()))


def _context_slack(lines: pl.DataFrame) -> int:
    """ns an event may have started after its ts: 999 in a trace written in µs (its start
    record says so), where context changes keep their ns; 0 in ns and in older traces."""
    starts = lines.filter((pl.col("name") == "start") & (pl.col("cat") == parse.CAT_META))
    precision = starts.select(pl.col("args").struct.field("precision")).to_series().drop_nulls()
    return 999 if precision.len() and precision[0] == "us" else 0
