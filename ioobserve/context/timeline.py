"""Each process's context over time: its launch context (job, step, rank, local rank, world
size), its worker ordinal and its application tags, as changes that take effect at a time.

A forked child starts with its parent's context at the moment of the fork; exec replaces
the launch context with the new program's environment; a tag changes the process's tags
from its time on, and those of children forked after it (as the process table knows them).
Events find their context by an as-of join on (pid, time) with `rows()`, so a change affects
later events only. Which ordinal a worker has, and from when, is decided apart
(ioobserve.context.workers) and recorded here like any other change.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field, replace

import polars as pl

from ioobserve.context.launch import Launch
from ioobserve.context.processes import ProcessTable
from ioobserve.context.tags import apply_tags
from ioobserve.data import schema as s
from ioobserve.data.model import ENV_JOB, ENV_STEP, ROW_SCHEMA

_LAUNCH_FIELDS = ("job", "step", "rank", "local_rank", "world_size")
MAX_CHANGES = 1024  # per process: older changes are folded into one beyond this
_ROW_FIELDS = {ENV_JOB: "job", ENV_STEP: "step", s.RANK: "rank", s.LOCAL_RANK: "local_rank",
               s.WORLD_SIZE: "world_size", s.WORKER: "worker"}


@dataclass(frozen=True)
class ProcessContext:
    """Everything the timeline knows of a process at one moment (None: unknown)."""

    job: str | None = None
    step: str | None = None
    rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None
    worker: int | None = None
    tags: tuple[tuple[str, str], ...] = ()


EMPTY = ProcessContext()


@dataclass
class _Change:
    since_ns: int
    fields: dict = field(default_factory=dict)  # ProcessContext fields to set (not tags)
    tags: dict = field(default_factory=dict)  # key -> value, or None to remove
    snapshot: bool = False  # the whole context from here on (a fork's inheritance)

    def applied_to(self, ctx: ProcessContext) -> ProcessContext:
        base = EMPTY if self.snapshot else ctx
        tags = apply_tags(base.tags, self.tags) if self.tags else base.tags
        return replace(base, **self.fields, tags=tags if tags is not None else base.tags)


class _History:
    """One process's changes in time order, with the context after each (so that a lookup is
    a bisection, not a fold)."""

    def __init__(self) -> None:
        self.since: list[int] = []
        self.changes: list[_Change] = []
        self.states: list[ProcessContext] = []

    def add(self, change: _Change) -> None:
        index = bisect.bisect_right(self.since, change.since_ns)
        self.since.insert(index, change.since_ns)
        self.changes.insert(index, change)
        self.states.insert(index, EMPTY)
        self.refold(index)
        if len(self.changes) > MAX_CHANGES:
            self.fold_before(self.since[len(self.changes) // 2])

    def refold(self, start: int = 0) -> None:
        """Recompute the states from change `start` on."""
        ctx = self.states[start - 1] if start > 0 else EMPTY
        for index in range(start, len(self.changes)):
            ctx = self.states[index] = self.changes[index].applied_to(ctx)

    def at(self, ts_ns: int) -> ProcessContext:
        index = bisect.bisect_right(self.since, ts_ns)
        return self.states[index - 1] if index else EMPTY

    def fold_before(self, before_ns: int) -> None:
        """Replace the changes older than `before_ns` by one snapshot of their result."""
        count = bisect.bisect_left(self.since, before_ns)
        if count > 1:
            ctx = self.states[count - 1]
            fields = {name: getattr(ctx, name) for name in (*_LAUNCH_FIELDS, "worker")}
            folded = _Change(self.since[count - 1], fields, dict(ctx.tags), snapshot=True)
            self.since[:count] = [folded.since_ns]
            self.changes[:count] = [folded]
            self.states[:count] = [ctx]


class ContextTimeline:
    """Per-process context changes, learned from fork/exec records, environments and tags."""

    def __init__(self, processes: ProcessTable) -> None:
        self.processes = processes  # the process tree: who forked whom, and when
        self._histories: dict[int, _History] = {}
        self.tags_applied = 0
        self.tags_malformed = 0

    def at(self, pid: int, ts_ns: int) -> ProcessContext:
        """The context of `pid` at monotonic time `ts_ns`."""
        history = self._histories.get(pid)
        return history.at(ts_ns) if history is not None else EMPTY

    def _add(self, pid: int, change: _Change) -> None:
        history = self._histories.get(pid)
        if history is None:
            history = self._histories[pid] = _History()
        history.add(change)

    def seed(self, pid: int, launch: Launch) -> None:
        """A process alive when recording began, with the launch context of its environment."""
        fields = {name: getattr(launch, name) for name in _LAUNCH_FIELDS}
        if any(value is not None for value in fields.values()) and pid not in self._histories:
            self._add(pid, _Change(0, fields, snapshot=True))

    def fork(self, pid: int, ppid: int, ts_ns: int) -> None:
        """A new process: its parent's context at the fork."""
        self._histories.pop(pid, None)  # a reused pid starts afresh
        ctx = self.at(ppid, ts_ns)
        if ctx != EMPTY:
            fields = {name: getattr(ctx, name) for name in (*_LAUNCH_FIELDS, "worker")}
            self._add(pid, _Change(ts_ns, fields, dict(ctx.tags), snapshot=True))

    def exec(self, pid: int, ts_ns: int, launch: Launch | None, worker: int | None = None) -> None:
        """A new program in `pid`: the launch context of its environment (None: unread, keep the
        inherited one), and the worker ordinal it shows from its exec, if any."""
        fields: dict = {name: getattr(launch, name) for name in _LAUNCH_FIELDS} if launch is not None else {}
        if worker is not None:
            fields["worker"] = worker
        if fields and (pid in self._histories or any(value is not None for value in fields.values())):
            self._add(pid, _Change(ts_ns, fields))

    def set_worker(self, pid: int, since_ns: int, ordinal: int) -> None:
        """`pid` works as worker `ordinal` from `since_ns` on."""
        self._add(pid, _Change(since_ns, {"worker": ordinal}))

    def renumber_worker(self, pid: int, old: int, new: int | None) -> None:
        """Worker ordinal `old` becomes `new` (None: not a worker) in all of `pid`'s history."""
        history = self._histories.get(pid)
        if history is not None:
            for change in history.changes:
                if change.fields.get("worker") == old:
                    change.fields["worker"] = new
            history.refold()

    def tag(self, pid: int, ts_ns: int, updates: dict[str, str | None]) -> bool:
        """Apply tag updates to `pid` from `ts_ns` on, and to its children forked after that;
        False (and nothing changes) if the process would hold too many tags."""
        current = self.at(pid, ts_ns).tags
        after = apply_tags(current, updates)
        if after is None:
            self.tags_malformed += 1
            return False
        self.tags_applied += 1
        if after != current or self._tags_change_later(pid, ts_ns):  # a repeated tag changes nothing
            self._tag_from(pid, ts_ns, ts_ns, updates)
        return True

    def _tags_change_later(self, pid: int, ts_ns: int) -> bool:
        history = self._histories.get(pid)
        return history is not None and history.since[-1] > ts_ns

    def _tag_from(self, pid: int, since_ns: int, tagged_ns: int, updates: dict) -> None:
        self._add(pid, _Change(since_ns, tags=dict(updates)))
        # Children forked after the tag inherit it even if their fork was learned first.
        for child, forked_ns in self.processes.forked_after(pid, tagged_ns):
            self._tag_from(child, forked_ns, tagged_ns, updates)

    def rows(self, pids, from_ns: int, clock_offset_ns: int) -> pl.DataFrame:
        """Context rows of `pids` valid at or after monotonic `from_ns`: pid, since (epoch ns)
        and the context columns, sorted by since, for an as-of join."""
        out: dict[str, list] = {name: [] for name in ROW_SCHEMA}
        for pid in pids:
            history = self._histories.get(pid)
            if history is None:
                continue
            first = max(bisect.bisect_right(history.since, from_ns) - 1, 0)  # in force when the batch starts
            for since, ctx in zip(history.since[first:], history.states[first:], strict=True):
                out[s.PID].append(pid)
                out["since"].append(since + clock_offset_ns)
                for column, name in _ROW_FIELDS.items():
                    out[column].append(getattr(ctx, name))
                out[s.TAGS].append([{"key": k, "value": v} for k, v in ctx.tags])
        return pl.DataFrame(out, schema=ROW_SCHEMA).sort("since")

    def compact(self, before_ns: int) -> None:
        """Fold each process's changes older than `before_ns` into one, so a process that
        tags every step does not grow without bound (children already took their snapshot)."""
        for history in self._histories.values():
            history.fold_before(before_ns)

    def forget(self, pids) -> None:
        """Processes long gone."""
        for pid in pids:
            self._histories.pop(pid, None)

    def __contains__(self, pid: int) -> bool:
        return pid in self._histories
