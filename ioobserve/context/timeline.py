"""Each process's context over time: its launch context (job, step, rank, local rank, world
size), its worker ordinal and its application tags, as changes that take effect at a time.

A forked child starts with its parent's context at the moment of the fork; exec replaces
the launch context with the new program's environment; a tag changes the process's tags
from its time on, and those of children forked after it. Events find their context by an
as-of join on (pid, time) with `rows()`, so a change affects later events only.

Worker ordinals: a child of a process that has a rank (and is not itself a worker) is that
process's next worker, numbered from 0 in spawn order, unless it execs a program other than
a multiprocessing spawn child (a helper such as the resource tracker, or any other program:
those are not workers). Without a rank, only multiprocessing spawn children are numbered.
Grandchildren keep their parent's ordinal: a worker's own children work for it.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field, replace

import polars as pl

from ioobserve import events as ev
from ioobserve import schema as s
from ioobserve.context.launch import SPAWN_CHILD, Launch, child_kind, launch_from_environ, read_environ
from ioobserve.context.tags import apply_tags
from ioobserve.decode import EnvRecord, ProcRecord

_LAUNCH_FIELDS = ("job", "step", "rank", "local_rank", "world_size")
ENV_JOB, ENV_STEP = "env_job", "env_step"  # rows' job and step, from the environment
ROW_SCHEMA: dict[str, pl.DataType] = {
    s.PID: pl.UInt32, "since": pl.UInt64, ENV_JOB: pl.String, ENV_STEP: pl.String, **s.PROCESS_CONTEXT_SCHEMA,
}
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


def join_process_context(events: pl.DataFrame, rows: pl.DataFrame) -> pl.DataFrame:
    """Each event with the context row (ROW_SCHEMA) of its pid in force at its time, sorted by
    time; job and step fall back to the environment's where the cgroup names none."""
    if rows.is_empty():
        return events.with_columns(pl.lit(None, dtype).alias(name) for name, dtype in s.PROCESS_CONTEXT_SCHEMA.items())
    joined = events.sort(s.TS).join_asof(
        rows.sort("since"), left_on=s.TS, right_on="since", by=s.PID, strategy="backward", check_sortedness=False
    )
    tags = pl.col(s.TAGS)
    return joined.with_columns(
        pl.coalesce(s.JOB, ENV_JOB).alias(s.JOB), pl.coalesce(s.STEP, ENV_STEP).alias(s.STEP),
        pl.when(tags.list.len() > 0).then(tags).alias(s.TAGS),  # no tags: null, as for a process without context
    ).drop("since", ENV_JOB, ENV_STEP)


class ContextTimeline:
    """Per-process context changes, learned from fork/exec records, environments and tags."""

    def __init__(self) -> None:
        self._changes: dict[int, list[_Change]] = {}
        self._born: dict[int, tuple[int, int]] = {}  # pid -> (ppid, fork time)
        self._children: dict[int, list[int]] = {}
        self._next_worker: dict[int, int] = {}
        self._ordinals: dict[int, tuple[int, int]] = {}  # pid -> (ppid, ordinal) of workers numbered by their parent
        self._provisional: set[int] = set()  # numbered at fork, not yet exec'd
        self.tags_applied = 0
        self.tags_malformed = 0

    def at(self, pid: int, ts_ns: int) -> ProcessContext:
        """The context of `pid` at monotonic time `ts_ns`."""
        ctx = EMPTY
        for change in self._changes.get(pid, ()):
            if change.since_ns > ts_ns:
                break
            ctx = change.applied_to(ctx)
        return ctx

    def _add(self, pid: int, change: _Change) -> None:
        changes = self._changes.setdefault(pid, [])
        changes.insert(bisect.bisect_right([c.since_ns for c in changes], change.since_ns), change)

    def seed(self, pid: int, launch: Launch) -> None:
        """A process alive when recording began, with the launch context of its environment."""
        fields = {name: getattr(launch, name) for name in _LAUNCH_FIELDS}
        if any(value is not None for value in fields.values()) and pid not in self._changes:
            self._add(pid, _Change(0, fields, snapshot=True))

    def fork(self, pid: int, ppid: int, ts_ns: int) -> None:
        """A new process: its parent's context at the fork, and maybe a worker ordinal."""
        self._changes.pop(pid, None)  # a reused pid starts afresh
        self._ordinals.pop(pid, None)
        self._provisional.discard(pid)
        parent = self.at(ppid, ts_ns)
        ctx = parent
        if parent.rank is not None and parent.worker is None:
            ctx = replace(parent, worker=self._take_ordinal(pid, ppid))
            self._provisional.add(pid)
        self._born[pid] = (ppid, ts_ns)
        self._children.setdefault(ppid, []).append(pid)
        if ctx != EMPTY:
            fields = {name: getattr(ctx, name) for name in (*_LAUNCH_FIELDS, "worker")}
            self._add(pid, _Change(ts_ns, fields, dict(ctx.tags), snapshot=True))

    def _take_ordinal(self, pid: int, ppid: int) -> int:
        ordinal = self._next_worker.get(ppid, 0)
        self._next_worker[ppid] = ordinal + 1
        self._ordinals[pid] = (ppid, ordinal)
        return ordinal

    def _give_back_ordinal(self, pid: int) -> None:
        """`pid` is not a worker after all: it and its younger siblings' ordinals move down
        one. (Python's multiprocessing does not wait for its resource tracker to exec before
        forking the first worker, so the tracker's exec can come after a worker's fork.)"""
        ppid, ordinal = self._ordinals.pop(pid)
        self._next_worker[ppid] -= 1
        for change in self._changes.get(pid, ()):  # not even between its fork and exec
            if change.fields.get("worker") == ordinal:
                change.fields["worker"] = None
        for sibling in self._children.get(ppid, ()):
            numbered = self._ordinals.get(sibling)
            if numbered is None or numbered[0] != ppid or numbered[1] < ordinal:
                continue
            self._ordinals[sibling] = (ppid, numbered[1] - 1)
            for change in self._changes.get(sibling, ()):
                if change.fields.get("worker") == numbered[1]:
                    change.fields["worker"] = numbered[1] - 1

    def exec(self, pid: int, ppid: int, ts_ns: int, argv: tuple[str, ...], launch: Launch | None) -> None:
        """A new program in `pid`: the launch context of its environment (None: unread, keep the
        inherited one) and whether it still counts as a worker."""
        fields: dict = {name: getattr(launch, name) for name in _LAUNCH_FIELDS} if launch is not None else {}
        kind = child_kind(argv)
        provisional = pid in self._provisional
        self._provisional.discard(pid)
        if provisional and kind != SPAWN_CHILD:
            self._give_back_ordinal(pid)
        elif not provisional and kind == SPAWN_CHILD and self.at(pid, ts_ns).worker is None:
            fields["worker"] = self._take_ordinal(pid, ppid)
        if fields and (pid in self._changes or any(value is not None for value in fields.values())):
            self._add(pid, _Change(ts_ns, fields))

    def tag(self, pid: int, ts_ns: int, updates: dict[str, str | None]) -> bool:
        """Apply tag updates to `pid` from `ts_ns` on, and to its children forked after that;
        False (and nothing changes) if the process would hold too many tags."""
        if apply_tags(self.at(pid, ts_ns).tags, updates) is None:
            self.tags_malformed += 1
            return False
        self.tags_applied += 1
        self._tag_from(pid, ts_ns, ts_ns, updates)
        return True

    def _tag_from(self, pid: int, since_ns: int, tagged_ns: int, updates: dict) -> None:
        self._add(pid, _Change(since_ns, tags=dict(updates)))
        # Children forked after the tag inherit it even if their fork was learned first.
        for child in self._children.get(pid, ()):
            born = self._born.get(child)
            if born is not None and born[0] == pid and born[1] > tagged_ns:
                self._tag_from(child, born[1], tagged_ns, updates)

    def rows(self, pids, from_ns: int, clock_offset_ns: int) -> pl.DataFrame:
        """Context rows of `pids` valid at or after monotonic `from_ns`: pid, since (epoch ns)
        and the context columns, sorted by since, for an as-of join."""
        out: dict[str, list] = {name: [] for name in ROW_SCHEMA}
        for pid in pids:
            changes = self._changes.get(pid)
            if not changes:
                continue
            ctx, kept = EMPTY, []
            for change in changes:
                ctx = change.applied_to(ctx)
                if change.since_ns <= from_ns and kept:
                    kept.clear()  # an earlier row is superseded before the batch starts
                kept.append((change.since_ns, ctx))
            for since, ctx in kept:
                out[s.PID].append(pid)
                out["since"].append(since + clock_offset_ns)
                for column, name in _ROW_FIELDS.items():
                    out[column].append(getattr(ctx, name))
                out[s.TAGS].append([{"key": k, "value": v} for k, v in ctx.tags])
        return pl.DataFrame(out, schema=ROW_SCHEMA).sort("since")

    def compact(self, before_ns: int) -> None:
        """Fold each process's changes older than `before_ns` into one, so a process that
        tags every step does not grow without bound (children already took their snapshot)."""
        for pid, changes in self._changes.items():
            old = [c for c in changes if c.since_ns < before_ns]
            if len(old) > 1:
                ctx = EMPTY
                for change in old:
                    ctx = change.applied_to(ctx)
                fields = {name: getattr(ctx, name) for name in (*_LAUNCH_FIELDS, "worker")}
                folded = _Change(old[-1].since_ns, fields, dict(ctx.tags), snapshot=True)
                self._changes[pid] = [folded, *changes[len(old):]]

    def forget(self, pids) -> None:
        """Processes long gone."""
        for pid in pids:
            self._changes.pop(pid, None)
            self._born.pop(pid, None)
            self._children.pop(pid, None)
            self._next_worker.pop(pid, None)
            self._ordinals.pop(pid, None)
            self._provisional.discard(pid)

    def __contains__(self, pid: int) -> bool:
        return pid in self._changes


def apply_lifecycle(timeline: ContextTimeline, procs: list[ProcRecord], envs: list[EnvRecord]) -> None:
    """Feed fork and exec records, in order, with the environments sent beside the execs."""
    environ = {(env.pid, env.ts_ns): env for env in envs}
    for rec in procs:
        if rec.kind == ev.PROC_FORK:
            timeline.fork(rec.pid, rec.ppid, rec.ts_ns)
        elif rec.kind == ev.PROC_EXEC:
            timeline.exec(rec.pid, rec.ppid, rec.ts_ns, rec.argv, _launch(environ.get((rec.pid, rec.ts_ns)), rec.pid))


def _launch(env: EnvRecord | None, pid: int) -> Launch | None:
    """The launch context of an exec's environment; from /proc if the kernel's copy was lost
    or cut short (None if the process is gone too: it keeps what it inherited)."""
    if env is not None and not env.truncated:
        return launch_from_environ(env.data)
    data = read_environ(pid)
    if data is None:
        return launch_from_environ(env.data) if env is not None else None
    return launch_from_environ(data)


def seed_from_proc(timeline: ContextTimeline, pids) -> None:
    """The launch context of processes alive when recording began."""
    for pid in pids:
        data = read_environ(pid)
        if data:
            timeline.seed(pid, launch_from_environ(data))
