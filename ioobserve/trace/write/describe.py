"""What a trace part says about the ids its events use: the metadata lines a batch needs.

A part describes each id once, before the first event using it: a file (FH), a cgroup's
job context (CG), a user (US), a process's context as it changes (PC) and a Python stack
(PS). `PartDescriptions` keeps what the current part has described and, for each batch,
returns the lines it lacks and the batch as its event lines will show it (file ids the
tables do not name, and uid and cgroup where the process's PR line says them, nulled). It
is pure state, used by the writer's describing thread only, and tested without threads.
"""

from __future__ import annotations

from collections import OrderedDict

import polars as pl

from ioobserve.data import schema as s
from ioobserve.data.model import ENV_JOB, ENV_STEP, KEPT_CHAINS, BatchTables, Stack
from ioobserve.trace.lines import StackLines, file_id_prefix, metadata_line

_CGROUP_FIELDS = list(s.CGROUP_CONTEXT_SCHEMA)[1:]  # what a CG line says beside the path


class PartDescriptions:
    """The ids one part has described, and the lines a batch adds (`pid`, `hhash`: the
    writer's, on every metadata line)."""

    def __init__(self, pid: int, hhash: str) -> None:
        self._pid, self._hhash = pid, hhash
        # The Python stacks used last, least recently first: as many as the collector keeps
        # chains, and touched at each use as it touches them, so any stack id the collector can
        # still give an event is here (python/stacks.py). Kept across parts.
        self._stacks: OrderedDict[int, Stack] = OrderedDict()
        self.stacks_missing = 0  # stack ids used with no frames to describe them (should stay 0)
        self._stack_lines = StackLines()
        self.new_part()

    def new_part(self) -> None:
        """Start describing a new part: nothing described yet, and a new file id prefix."""
        self.file_prefix = file_id_prefix()
        self._files: set[int] = set()
        self._cgroups: set[int] = set()
        self._uids: set[int] = set()
        self._contexts: dict[int, tuple] = {}  # pid -> the context its last PC line gave
        self._stacks_described: set[int] = set()
        self._processes: dict[int, tuple[int, int]] = {}  # pid -> uid and cgroup of its first PR line

    def process_line(self, pid: int, uid: int, cgroup: int) -> None:
        """A PR line went into the part: its process's events need not repeat uid and cgroup."""
        self._processes.setdefault(pid, (uid, cgroup))

    def keep_stacks(self, new: dict[int, Stack]) -> None:
        """Stacks the collector resolved (kept while the disk takes nothing too: later batches use them)."""
        for stack_id, stack in new.items():
            self._stacks[stack_id] = stack
            self._stacks.move_to_end(stack_id)
        for _ in range(len(self._stacks) - KEPT_CHAINS):
            self._stacks_described.discard(self._stacks.popitem(last=False)[0])

    def describe(self, frame: pl.DataFrame, tables: BatchTables) -> tuple[pl.DataFrame, list[bytes]]:
        """The metadata lines a batch of ids (schema.ID_SCHEMA) needs and the part lacks (PS,
        FH, CG, US, PC), straight from its tables; and the frame as its lines will show it."""
        lines: list[bytes] = []
        self._describe_stacks(frame, lines)
        frame = self._describe_files(frame, tables.files, lines)
        for cgroup in frame.get_column(s.CGROUP).unique().to_list():
            context = tables.cgroups.get(cgroup)
            if cgroup in self._cgroups or context is None:
                continue  # described, or not known yet: described when a later batch knows it
            self._cgroups.add(cgroup)
            args = {"hhash": self._hhash, "cgroup": cgroup, "name": context.path}
            args |= {key: getattr(context, key) for key in _CGROUP_FIELDS if getattr(context, key) is not None}
            lines.append(metadata_line("CG", self._pid, self._pid, args))
        for uid in frame.get_column(s.UID).unique().to_list():
            user = tables.users.get(uid)
            if uid not in self._uids and user is not None:
                self._uids.add(uid)
                lines.append(metadata_line("US", self._pid, self._pid, {"hhash": self._hhash, "uid": uid, "name": user}))
        # Only the batch's own processes: a job's trace in `serve` says nothing of other jobs'.
        self._describe_contexts(tables.contexts.filter(pl.col(s.PID).is_in(frame.get_column(s.PID).unique().implode())),
                                lines)
        return self._without_process_ids(frame), lines

    def _describe_files(self, frame: pl.DataFrame, files: pl.DataFrame, lines: list[bytes]) -> pl.DataFrame:
        """An FH line per file the batch names and the part has not described; the frame
        with FILE and FILE2 null where the tables do not name the file (written as the
        part's prefix and the recording's file id, in hex)."""
        used = pl.concat([frame.get_column(s.FILE), frame.get_column(s.FILE2)]).drop_nulls().unique()
        named = files.filter(pl.col(s.FILE).is_in(used.implode())).unique(s.FILE)
        for file_id, path, dev, ino in named.iter_rows():  # the batch's few files, not the part's many
            if file_id in self._files:
                continue
            self._files.add(file_id)
            args = {"hhash": self._hhash, "name": path, "value": f"{self.file_prefix}{file_id:x}", "dev": dev, "ino": ino}
            lines.append(metadata_line("FH", self._pid, self._pid, args))
        ids = named.get_column(s.FILE).implode()
        return frame.with_columns(pl.when(pl.col(column).is_in(ids)).then(pl.col(column)).alias(column)
                                  for column in (s.FILE, s.FILE2))

    def _describe_contexts(self, rows: pl.DataFrame, lines: list[bytes]) -> None:
        """A PC line per change of a process's context (rank, worker, tags, and job and step
        as its environment gave them) the part has not described: a reader joins each event
        to the latest PC line of its pid before it."""
        for row in rows.sort("since").iter_rows(named=True):
            pid = row.pop(s.PID)
            since = row.pop("since")
            row[s.TAGS] = row[s.TAGS] or None  # no tags: as for a process without context
            context = tuple((key, str(value)) for key, value in row.items() if value is not None)
            if context == self._contexts.get(pid, ()):
                continue
            self._contexts[pid] = context
            args = {"hhash": self._hhash, "since": since, "job": row[ENV_JOB], "step": row[ENV_STEP]}
            args |= {key: row[key] for key in s.PROCESS_CONTEXT_SCHEMA}
            lines.append(metadata_line("PC", pid, pid, {k: v for k, v in args.items() if v is not None}))

    def _describe_stacks(self, frame: pl.DataFrame, lines: list[bytes]) -> None:
        """A PS line per Python stack the batch uses and the part has not described."""
        used = frame.get_column(s.PY_STACK).drop_nulls().unique().to_list()
        for stack_id in used:
            if stack_id in self._stacks:
                self._stacks.move_to_end(stack_id)
        for stack_id in sorted(set(used) - self._stacks_described):
            stack = self._stacks.get(stack_id)
            if stack is None:
                self.stacks_missing += 1
                continue
            lines.append(self._stack_lines.line(self._pid, self._hhash, stack_id, stack))
            self._stacks_described.add(stack_id)

    def _without_process_ids(self, frame: pl.DataFrame) -> pl.DataFrame:
        """uid and cgroup nulled where the process's first PR line in the part says them."""
        pids = [pid for pid in frame.get_column(s.PID).unique().to_list() if pid in self._processes]
        if not pids:
            return frame
        # Replacing by pid, not joining: a join copies every column of the batch.
        uid = pl.col(s.PID).replace_strict(pids, [self._processes[p][0] for p in pids], default=None,
                                           return_dtype=pl.UInt32)
        cgroup = pl.col(s.PID).replace_strict(pids, [self._processes[p][1] for p in pids], default=None,
                                              return_dtype=pl.UInt64)
        return frame.with_columns(
            pl.when(uid.is_null() | (pl.col(s.UID) != uid)).then(pl.col(s.UID)).alias(s.UID),
            pl.when(cgroup.is_null() | (pl.col(s.CGROUP) != cgroup)).then(pl.col(s.CGROUP)).alias(s.CGROUP),
        )
