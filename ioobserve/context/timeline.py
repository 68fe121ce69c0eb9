"""Each process's context over time: its launch context (job, step, rank, local rank, world
size), its worker ordinal and its application tags, as changes that take effect at a time.

A forked child starts with its parent's context at the moment of the fork; exec replaces
the launch context with the new program's environment; a tag changes the process's tags
from its time on, and those of children forked after it. Events find their context by an
as-of join on (pid, time) with `rows()`, so a change affects later events only.

Worker ordinals: a child of a process that has a rank (and is not itself a worker) reserves
at its fork the lowest ordinal none of its parent's live workers holds (workers are 0..n-1
in spawn order, and each epoch's fresh workers are 0..n-1 again). It shows it from its exec
as a multiprocessing spawn child, or (forked workers) from its first I/O other than closing
or duplicating descriptors, which is all a child does between fork and exec. A child that
execs anything else (the resource tracker, any program) is not a worker and gives the
ordinal back. Without a rank, only multiprocessing spawn children are numbered.
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
from ioobserve.model import ENV_JOB, ENV_STEP, ROW_SCHEMA

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

    def __init__(self) -> None:
        self._histories: dict[int, _History] = {}
        self._born: dict[int, tuple[int, int]] = {}  # pid -> (ppid, fork time)
        self._children: dict[int, list[int]] = {}
        self._in_use: dict[int, set[int]] = {}  # ppid -> ordinals its live workers hold
        self._ordinals: dict[int, tuple[int, int]] = {}  # pid -> (ppid, ordinal) of workers numbered by their parent
        self._pending: set[int] = set()  # ordinal reserved at fork, not shown until it is a worker
        self._exited: set[int] = set()  # numbered processes gone: their ordinal is free for others
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
        """A new process: its parent's context at the fork, and maybe a worker ordinal."""
        self._histories.pop(pid, None)  # a reused pid starts afresh
        self._release_ordinal(pid)
        self._pending.discard(pid)
        parent = self.at(ppid, ts_ns)
        ctx = parent
        if parent.rank is not None and parent.worker is None:
            self._take_ordinal(pid, ppid)  # reserved in spawn order, shown once it is a worker
            self._pending.add(pid)
        self._born[pid] = (ppid, ts_ns)
        self._children.setdefault(ppid, []).append(pid)
        if ctx != EMPTY:
            fields = {name: getattr(ctx, name) for name in (*_LAUNCH_FIELDS, "worker")}
            self._add(pid, _Change(ts_ns, fields, dict(ctx.tags), snapshot=True))

    def _take_ordinal(self, pid: int, ppid: int) -> int:
        """The lowest ordinal no live worker of `ppid` holds (so each epoch's fresh workers
        are 0..n-1 again, as DataLoader numbers them)."""
        used = self._in_use.setdefault(ppid, set())
        ordinal = next(n for n in range(len(used) + 1) if n not in used)
        used.add(ordinal)
        self._ordinals[pid] = (ppid, ordinal)
        return ordinal

    def _release_ordinal(self, pid: int) -> tuple[int, int] | None:
        numbered = self._ordinals.pop(pid, None)
        if numbered is not None and pid not in self._exited:
            self._in_use.get(numbered[0], set()).discard(numbered[1])
        self._exited.discard(pid)
        return numbered

    def _give_back_ordinal(self, pid: int) -> None:
        """`pid` is not a worker after all; siblings forked after it move down into the freed
        ordinal. (Python's multiprocessing does not wait for its resource tracker to exec before
        forking the first worker, so the tracker's exec can come after a worker's fork.)"""
        ppid, ordinal = self._release_ordinal(pid)
        self._renumber(pid, ordinal, None)  # not even between its fork and exec
        born = self._born.get(pid, (ppid, 0))[1]
        younger = [c for c in self._children.get(ppid, ()) if c in self._born and self._born[c][0] == ppid
                   and self._born[c][1] > born]
        for sibling in sorted(younger, key=lambda c: self._born[c][1]):
            numbered = self._ordinals.get(sibling)
            if numbered is None or numbered[0] != ppid or sibling in self._exited:
                continue
            self._release_ordinal(sibling)
            moved = self._take_ordinal(sibling, ppid)
            if moved != numbered[1]:
                self._renumber(sibling, numbered[1], moved)

    def pending_workers(self) -> set[int]:
        """Children of a rank that hold an ordinal but have not yet shown they are workers."""
        return self._pending

    def confirm_workers(self, first_io_ns: dict[int, int]) -> None:
        """Pending children that did I/O of their own (not just closing or duplicating
        descriptors, as a child does between fork and exec) are workers from that time."""
        for pid, ts_ns in first_io_ns.items():
            numbered = self._ordinals.get(pid)
            if pid in self._pending and numbered is not None:
                self._pending.discard(pid)
                self._show_worker(pid, ts_ns, ts_ns, numbered[1])

    def _show_worker(self, pid: int, since_ns: int, shown_ns: int, ordinal: int) -> None:
        self._add(pid, _Change(since_ns, {"worker": ordinal}))
        # Its children forked since then work for it, even if their fork was learned first.
        for child in self._children.get(pid, ()):
            born = self._born.get(child)
            if born is None or born[0] != pid or born[1] <= shown_ns:
                continue
            if self._ordinals.get(child, (pid,))[0] == pid:  # not a worker of its own, then
                self._release_ordinal(child)
                self._pending.discard(child)
                self._show_worker(child, born[1], shown_ns, ordinal)

    def exit(self, pid: int) -> None:
        """A process ended: its worker ordinal is free for the next worker of its parent (and
        stays its own for events of its still to be drained)."""
        numbered = self._ordinals.get(pid)
        if numbered is not None and pid not in self._exited:
            self._exited.add(pid)
            self._in_use.get(numbered[0], set()).discard(numbered[1])

    def _renumber(self, pid: int, old: int, new: int | None) -> None:
        history = self._histories.get(pid)
        if history is not None:
            for change in history.changes:
                if change.fields.get("worker") == old:
                    change.fields["worker"] = new
            history.refold()

    def exec(self, pid: int, ppid: int, ts_ns: int, argv: tuple[str, ...], launch: Launch | None) -> None:
        """A new program in `pid`: the launch context of its environment (None: unread, keep the
        inherited one) and whether it still counts as a worker."""
        fields: dict = {name: getattr(launch, name) for name in _LAUNCH_FIELDS} if launch is not None else {}
        kind = child_kind(argv)
        pending = pid in self._pending
        self._pending.discard(pid)
        if pending and kind == SPAWN_CHILD and pid in self._ordinals:
            fields["worker"] = self._ordinals[pid][1]
        elif pending and pid in self._ordinals:
            self._give_back_ordinal(pid)
        elif kind == SPAWN_CHILD and self.at(pid, ts_ns).worker is None:
            fields["worker"] = self._take_ordinal(pid, ppid)
        if fields and (pid in self._histories or any(value is not None for value in fields.values())):
            self._add(pid, _Change(ts_ns, fields))

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
        for child in self._children.get(pid, ()):
            born = self._born.get(child)
            if born is not None and born[0] == pid and born[1] > tagged_ns:
                self._tag_from(child, born[1], tagged_ns, updates)

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
            born = self._born.pop(pid, None)
            siblings = self._children.get(born[0], []) if born is not None else []
            if pid in siblings:  # a long-lived parent's list holds only children still of use
                siblings.remove(pid)
            self._children.pop(pid, None)
            self._in_use.pop(pid, None)
            self._release_ordinal(pid)
            self._pending.discard(pid)

    def __contains__(self, pid: int) -> bool:
        return pid in self._histories


def apply_lifecycle(timeline: ContextTimeline, procs: list[ProcRecord], envs: list[EnvRecord]) -> None:
    """Feed fork and exec records, in order, with the environments sent beside the execs."""
    environ = {(env.pid, env.ts_ns): env for env in envs}
    for rec in procs:
        if rec.kind == ev.PROC_FORK:
            timeline.fork(rec.pid, rec.ppid, rec.ts_ns)
        elif rec.kind == ev.PROC_EXEC:
            timeline.exec(rec.pid, rec.ppid, rec.ts_ns, rec.argv, _launch(environ.get((rec.pid, rec.ts_ns)), rec.pid))
        elif rec.kind == ev.PROC_EXIT:
            timeline.exit(rec.pid)


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
