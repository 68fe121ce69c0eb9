"""Named event frames (schema.EVENT_SCHEMA, as tests and benchmarks make them) handed to a
TraceWriter as the collector hands its batches: with file ids and the tables naming the ids."""

from __future__ import annotations

import polars as pl

from ioobserve.collect.enrich import KDEV, NAME, NAME2, FileIds
from ioobserve.data import schema as s
from ioobserve.data.model import ENV_JOB, ENV_STEP, ROW_SCHEMA, BatchTables, Stack, parse_cgroup_path


class Batches:
    """Turns named frames into id batches (ID_BATCH_SCHEMA) and their BatchTables, file ids
    kept across calls."""

    def __init__(self) -> None:
        self.file_ids = FileIds()

    def __call__(self, frame: pl.DataFrame, stacks: dict[int, Stack] | None = None) -> tuple[pl.DataFrame, BatchTables]:
        """The frame with its file ids, and its tables; `stacks`: the Python stacks first used here."""
        named, files = self.file_ids.assign(as_path_arguments(frame))
        cgroups = {cgroup: parse_cgroup_path(path)
                   for cgroup, path in frame.select(s.CGROUP, s.CGROUP_PATH).unique().drop_nulls().iter_rows()}
        users = dict(frame.select(s.UID, s.USER).unique().drop_nulls().iter_rows())
        tables = BatchTables(files=files, cgroups=cgroups, users=users, contexts=_context_rows(frame, cgroups),
                             stacks=dict(stacks or {}))
        return named.select(list(s.ID_BATCH_SCHEMA)).cast(s.ID_BATCH_SCHEMA), tables


def as_path_arguments(frame: pl.DataFrame) -> pl.DataFrame:
    """A named frame as FileIds takes a batch: its paths as path arguments (no file open)."""
    return frame.with_columns(pl.col(s.DEV).alias(KDEV), pl.col(s.PATH).cast(pl.String).alias(NAME),
                              pl.col(s.PATH2).cast(pl.String).alias(NAME2)).drop(s.PATH, s.PATH2)


def _context_rows(frame: pl.DataFrame, cgroups: dict) -> pl.DataFrame:
    """A row where each process's context changes, from its first event in it; job and step
    as the environment's where the cgroup names none."""
    cgroup_job = pl.col(s.CGROUP).replace_strict(
        list(cgroups), [c.job for c in cgroups.values()], default=None, return_dtype=pl.String)
    rows = frame.sort(s.PID, s.TS).select(
        s.PID, pl.col(s.TS).alias("since"),
        pl.when(cgroup_job.is_null()).then(pl.col(s.JOB)).alias(ENV_JOB),
        pl.when(cgroup_job.is_null()).then(pl.col(s.STEP)).alias(ENV_STEP),
        *s.PROCESS_CONTEXT_SCHEMA,
    ).with_columns(pl.col(s.TAGS).fill_null(pl.lit([], pl.List(s.TAG_ENTRY))))
    context = [c for c in ROW_SCHEMA if c not in (s.PID, "since")]
    key = pl.struct(context).hash(1)
    changed = (key != key.shift(1).over(s.PID)).fill_null(True)
    return rows.filter(changed).cast(ROW_SCHEMA)
