"""Naming events' ids, in one place: the processes, cgroups, users and Python frames an event's
ids stand for, and its process's context at its time.

A trace's reader (ioobserve.trace.read.named) names its events by the trace's metadata records;
while recording, only the sinks that show names (the summary, `top`, the stream) name the
collector's id batches, with BatchNamer, and only the rows they show: the trace writer, which
most recordings are, never builds a name per event.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import polars as pl

from ioobserve.data import schema as s
from ioobserve.data.model import (
    KEPT_CHAINS,
    NO_LINE,
    BatchTables,
    CgroupContext,
    Process,
    Stack,
    join_process_context,
)

# A process's uid and cgroup, for events that leave theirs out (a trace's event lines do).
PROCESS_UID, PROCESS_CGROUP = "_pr_uid", "_pr_cgroup"
PROCESS_NAMES_SCHEMA = {s.PID: pl.UInt32, s.PPID: pl.UInt32, s.COMM: pl.String, PROCESS_UID: pl.UInt32,
                        PROCESS_CGROUP: pl.UInt64}
"""pid -> what names it and what its events may leave out."""
FRAME_NAMES_SCHEMA = {s.PY_STACK: pl.UInt32, s.PY_FRAME: pl.UInt16, s.PY_FUNCTION: pl.String, s.PY_FILE: pl.String,
                      s.PY_LINE: pl.Int32}
"""(Python stack id, frame: 0 the innermost) -> the frame's function, file and line."""
USER_NAMES_SCHEMA = {s.UID: pl.UInt32, s.USER: pl.String}


def context_frame(contexts: dict[int, CgroupContext]) -> pl.DataFrame:
    """A row per cgroup: its id and the columns of schema.CGROUP_CONTEXT_SCHEMA."""
    rows = [(i, c.path, c.job, c.step, c.task, c.unit, c.container, c.pod, c.namespace, c.pod_name, c.container_name)
            for i, c in contexts.items()]
    return pl.DataFrame(rows, schema={s.CGROUP: pl.UInt64, **s.CGROUP_CONTEXT_SCHEMA}, orient="row")


@dataclass
class Names:
    """The tables that name events' ids: processes (PROCESS_NAMES_SCHEMA), cgroups (CGROUP and
    schema.CGROUP_CONTEXT_SCHEMA), users (USER_NAMES_SCHEMA), Python frames (FRAME_NAMES_SCHEMA),
    and the context rows of processes (model.ROW_SCHEMA) with how much later than its ts an
    event may have started (model.join_process_context)."""

    processes: pl.LazyFrame
    cgroups: pl.LazyFrame
    users: pl.LazyFrame
    frames: pl.LazyFrame
    contexts: pl.DataFrame
    slack_ns: int = 0


def with_names(ids: pl.LazyFrame, names: Names) -> pl.LazyFrame:
    """Events with PID, UID, CGROUP, PY_STACK and PY_FRAME, with PPID (0 for a process not
    known), COMM, their cgroup's context, USER and their Python frame's function, file and line
    added (left joins that keep the rows' order); a uid or cgroup left out (null) is its process's."""
    return (
        ids.join(names.processes, on=s.PID, how="left", maintain_order="left")
        .with_columns(pl.col(s.PPID).fill_null(0), pl.coalesce(s.UID, PROCESS_UID).alias(s.UID),
                      pl.coalesce(s.CGROUP, PROCESS_CGROUP).alias(s.CGROUP))
        .drop(PROCESS_UID, PROCESS_CGROUP)
        .join(names.cgroups, on=s.CGROUP, how="left", maintain_order="left")
        .join(names.users, on=s.UID, how="left", maintain_order="left")
        .join(names.frames, on=[s.PY_STACK, s.PY_FRAME], how="left", maintain_order="left")
    )


def module_and_request_id(layer: pl.Expr, text: pl.Expr) -> list[pl.Expr]:
    """PY_MODULE and REQUEST_ID from an event's one string field (an id batch's PY_MODULE, a
    trace line's `module` or `request_id`): an HTTP event's is its request id."""
    http = layer.cast(pl.String) == s.LAYER_HTTP
    return [pl.when(~http).then(text).alias(s.PY_MODULE), pl.when(http).then(text).alias(s.REQUEST_ID)]


def with_context(events: pl.DataFrame, names: Names) -> pl.DataFrame:
    """Events with their process's context at their time (schema.PROCESS_CONTEXT_SCHEMA), and
    job and step from its environment where the cgroup names none; sorted by time."""
    return join_process_context(events, names.contexts, names.slack_ns)


class BatchNamer:
    """Names the collector's id batches (schema.ID_BATCH_SCHEMA) for a sink that shows names.

    What a batch's tables give once is kept here: the processes (a sink is told of each before
    its events) and the Python stacks, by last use, as many as the collector keeps."""

    def __init__(self) -> None:
        self._processes: dict[int, tuple[int, str, int, int]] = {}
        self._stacks: OrderedDict[int, Stack] = OrderedDict()

    def processes(self, changed: list[Process]) -> None:
        """Processes born, exec'd or first seen (a sink's call)."""
        for process in changed:
            self._processes[process.pid] = (process.ppid, process.comm, process.uid, process.cgroup_id)

    def forget(self, pids: list[int]) -> None:
        """Processes long gone (a sink's call)."""
        for pid in pids:
            self._processes.pop(pid, None)

    def name(self, ids: pl.DataFrame, tables: BatchTables) -> pl.DataFrame:
        """The batch's rows named (schema.BATCH_SCHEMA), in time order."""
        self.keep(tables)
        names = self.names(ids, tables)
        files = tables.files.lazy().select(s.FILE, s.PATH)
        with_files = ids.lazy().join(files, on=s.FILE, how="left", maintain_order="left").join(
            files.rename({s.FILE: s.FILE2, s.PATH: s.PATH2}), on=s.FILE2, how="left", maintain_order="left")
        named = with_names(with_files, names).with_columns(module_and_request_id(pl.col(s.LAYER), pl.col(s.PY_MODULE))).collect()
        return with_context(named, names).select(list(s.BATCH_SCHEMA)).cast(s.BATCH_SCHEMA)

    def keep(self, tables: BatchTables) -> None:
        """Keep the stacks a batch's tables bring: each comes once, so a sink that names only
        some batches passes the others' tables here."""
        for stack_id, stack in tables.stacks.items():
            self._stacks[stack_id] = stack
            self._stacks.move_to_end(stack_id)
        for _ in range(len(self._stacks) - KEPT_CHAINS):
            self._stacks.popitem(last=False)

    def names(self, ids: pl.DataFrame, tables: BatchTables) -> Names:
        """The tables naming this batch's ids, as frames."""
        pids = ids.get_column(s.PID).unique().to_list()
        processes = pl.DataFrame([(pid, *self._processes[pid]) for pid in pids if pid in self._processes],
                                 schema=PROCESS_NAMES_SCHEMA, orient="row")
        users = pl.DataFrame(list(tables.users.items()), schema=USER_NAMES_SCHEMA, orient="row")
        return Names(processes.lazy(), context_frame(tables.cgroups).lazy(), users.lazy(),
                     self._frames(ids).lazy(), tables.contexts)

    def _frames(self, ids: pl.DataFrame) -> pl.DataFrame:
        """FRAME_NAMES_SCHEMA rows of the batch's distinct (stack, frame) pairs."""
        rows = []
        for stack_id, frame in ids.select(s.PY_STACK, s.PY_FRAME).drop_nulls().unique().iter_rows():
            stack = self._stacks.get(stack_id)
            if stack is None:
                continue  # not known: named by nothing, as in a trace that lacks its PS record
            self._stacks.move_to_end(stack_id)  # kept by last use, as the writer keeps them
            if frame < len(stack.frames):
                code = stack.frames[frame]
                rows.append((stack_id, frame, code.function, code.file, None if code.line == NO_LINE else code.line))
        return pl.DataFrame(rows, schema=FRAME_NAMES_SCHEMA, orient="row")



def with_job_context(ids: pl.DataFrame, tables: BatchTables) -> pl.DataFrame:
    """An id batch with its JOB and STEP (the cgroup's, else its process's environment's) and
    its process's context at its time (schema.PROCESS_CONTEXT_SCHEMA), in the batch's order:
    all the summary and serve's job traces name per event."""
    cgroups = list(tables.cgroups)
    # Replaced by cgroup, not joined: a join copies every column of the batch.
    events = ids.with_columns(
        pl.col(s.CGROUP).replace_strict(cgroups, [c.job for c in tables.cgroups.values()], default=None,
                                        return_dtype=pl.String).alias(s.JOB),
        pl.col(s.CGROUP).replace_strict(cgroups, [c.step for c in tables.cgroups.values()], default=None,
                                        return_dtype=pl.String).alias(s.STEP))
    if tables.contexts.is_empty():  # most batches: an as-of join would copy every column
        return events.with_columns(pl.lit(None, dtype).alias(name) for name, dtype in s.PROCESS_CONTEXT_SCHEMA.items())
    return join_process_context(events.with_row_index("_row"), tables.contexts).sort("_row").drop("_row")
