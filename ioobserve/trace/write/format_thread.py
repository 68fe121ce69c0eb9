"""The trace writer's format stage: the items its queues carry, what each part has
described, the flushes it gathers, and the format thread.

The caller's items (a closed set of small ones below, each handled by one `match` in the
thread that takes it: here and in ioobserve.trace.write.disk_thread) arrive in order. The
thread describes each batch's ids: a part describes each id once, before the first event
using it, as a metadata line (a file FH, a cgroup's job context CG, a user US, a process's
context as it changes PC, a Python stack PS); `PartDescriptions` is that state, pure and
tested without threads. It gathers lines and batches into flushes, and hands each flush to a
pool of `writer_threads` that formats batches (the compiled core) and compresses members
(independent work, done beside each other where one core is not enough: both release the
GIL), and its place in the file to the disk thread. A flush goes out at most every
FLUSH_SECONDS or FLUSH_BYTES of text. While the disk takes nothing, or after abandon, frames
are dropped unformatted and counted. The queues on either side are the writer's `Handoffs`.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import polars as pl

from ioobserve.data import schema as s
from ioobserve.data.model import ENV_JOB, ENV_STEP, KEPT_CHAINS, BatchTables, Stack
from ioobserve.plumbing.thread_names import name_this_thread
from ioobserve.trace.lines import StackLines, event_lines, file_id_prefix, metadata_line
from ioobserve.trace.members import KIND_EVENTS, KIND_META, MemberStats, gzip_member

if TYPE_CHECKING:  # the modules that import this one hold the parts and the queues
    from ioobserve.trace.write.disk_thread import Parts
    from ioobserve.trace.write.writer import Handoffs


# The items of the writer's queues.

@dataclass(frozen=True)
class Line:
    """A metadata line or one of our own records (start, lost)."""

    text: bytes


@dataclass(frozen=True)
class ProcessLine:
    """A PR line, with the uid and cgroup its process's events need not repeat in this part."""

    text: bytes
    pid: int
    uid: int
    cgroup: int


@dataclass(frozen=True)
class Batch:
    """A batch's events as ids (schema.ID_SCHEMA) and the tables naming them, in queue order;
    `behind`: its calls ended writer.HURRY_LAG_NS or more before it reached the writer."""

    frame: pl.DataFrame
    tables: BatchTables
    behind: bool


@dataclass(frozen=True)
class Flushed:
    """A flush made into members in the pool (a future of (hurried, members)), for the disk thread."""

    made: Future
    events: int
    meta_lines: int


@dataclass(frozen=True)
class End:
    """A part's end record: written after everything queued before it, by the disk thread,
    which alone knows by then how many events were dropped."""

    record_id: int
    args: dict
    final: bool
    ts_us: int = field(default_factory=lambda: time.time_ns() // 1000)


@dataclass(frozen=True)
class Rotate:
    """Switch to the part file of this name."""

    name: str


@dataclass(frozen=True)
class FlushNow:
    """Flush what is pending (the start record goes out on its own: the file is readable at once)."""


@dataclass(frozen=True)
class Stop:
    """Write what is left and close."""


# A part's descriptions: the metadata lines a batch needs.

_CGROUP_FIELDS = list(s.CGROUP_CONTEXT_SCHEMA)[1:]  # what a CG line says beside the path


class PartDescriptions:
    """The ids one part has described, and for each batch the lines it lacks and the batch as
    its event lines show it: file ids the tables do not name, and uid and cgroup where the
    process's PR line says them, nulled (`pid`, `hhash`: the writer's, on every metadata line)."""

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


# A flush: what waits for it, and the members it becomes.

LINE_BYTES_GUESS = 200  # of text per event line, before it is formatted: when to flush


class Pending:
    """What waits for the next flush: metadata lines, then batches being formatted."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Start over after a flush."""
        self.meta: list[bytes] = []
        self.batches: list[Future] = []
        self.events = 0
        self.buffered = 0
        self.behind = False  # a batch in it reached the writer late: deflate it fast

    def add_meta(self, line: bytes) -> None:
        """A metadata line or one of our own records."""
        self.meta.append(line)
        self.buffered += len(line)

    def add_batch(self, formatting: Future, events: int, behind: bool) -> None:
        """A batch being formatted (event_lines' result to come)."""
        self.batches.append(formatting)
        self.behind = self.behind or behind
        self.events += events
        self.buffered += events * LINE_BYTES_GUESS

    def flush(self) -> Flush | None:
        """What is pending as one flush (None if nothing is), and start over."""
        flush = Flush(self.meta, self.batches, self.events, self.behind) if self.meta or self.batches else None
        self.reset()
        return flush


class Flush:
    """One flush's lines: metadata, then events per layer and shape, in separate members."""

    def __init__(self, meta: list[bytes], batches: list[Future], events: int, behind: bool) -> None:
        self.meta, self.batches, self.events, self.behind = meta, batches, events, behind

    def members(self):
        """(text, stats) of each member to write, once the batches are formatted."""
        if self.meta:
            text = b"".join(self.meta)
            stats = MemberStats(KIND_META)
            stats.add_text(text)
            yield text, stats
        texts: dict[tuple, list[memoryview]] = {}
        stats_by_key: dict[tuple, MemberStats] = {}
        for formatting in self.batches:
            for key, group in formatting.result().items():
                stats = stats_by_key.setdefault(key, MemberStats(KIND_EVENTS))
                stats.add_text(group.text, lines=group.lines)
                stats.add_events(group.ts, group.pids)
                texts.setdefault(key, []).append(group.text)
        for key, parts in texts.items():
            yield b"".join(parts), stats_by_key[key]


# The format thread.

FLUSH_SECONDS = 1.0
FLUSH_BYTES = 8 << 20
DISK_QUEUE = 4  # members waiting for the disk
QUEUED_EVENTS = 1 << 16  # events waiting to be formatted before the collector's worker waits (a batch or so)
HURRY_QUEUE = QUEUED_EVENTS  # this many waiting (the worker is about to wait): compress fast rather than small


class FormatThread:
    """The thread "ioobserve-writer" and its pool "ioobserve-format": the caller's items, in
    order, made into flushes for the pool and the disk thread (`thread` is started by the writer)."""

    def __init__(self, handoffs: Handoffs, parts: Parts, described: PartDescriptions, precision: str,
                 writer_threads: int) -> None:
        self.handoffs = handoffs
        self.described = described  # this thread's own; the disk thread reads its counter for the end record
        self.dropped = 0  # events dropped unformatted
        self._parts = parts  # read only: whether the disk takes anything
        self._precision = precision
        self.pool = ThreadPoolExecutor(max(1, writer_threads), thread_name_prefix="ioobserve-format",
                                       initializer=name_this_thread)
        self.thread = threading.Thread(target=self._run, name="ioobserve-writer", daemon=True)

    def _run(self) -> None:
        """Describe batches and gather lines in queue order into flushes for the pool and the
        disk thread. While the disk takes nothing (or after abandon) frames are dropped unformatted."""
        name_this_thread()
        pending = Pending()
        last_flush = time.monotonic()
        to_disk = self.handoffs.to_disk
        while True:
            try:
                item = self.handoffs.to_format.get(timeout=FLUSH_SECONDS)
            except queue.Empty:
                item = FlushNow()
            try:
                match item:
                    case Stop():
                        self._emit(pending)
                        to_disk.put(item)
                        return
                    case Rotate():
                        self._emit(pending)
                        self.described.new_part()  # each part describes its own files, cgroups and users
                        to_disk.put(item)
                        last_flush = time.monotonic()
                        continue
                    case End():
                        self._emit(pending)
                        to_disk.put(item)
                    case ProcessLine():
                        self.described.process_line(item.pid, item.uid, item.cgroup)
                        pending.add_meta(item.text)
                    case Line():
                        pending.add_meta(item.text)
                    case Batch():
                        self.described.keep_stacks(item.tables.stacks)
                        if self._parts.trouble is not None or self.handoffs.abandoned.is_set():
                            self.dropped += item.frame.height
                        elif item.frame.height:
                            frame, lines = self.described.describe(item.frame, item.tables)
                            for line in lines:
                                pending.add_meta(line)
                            formatting = self.pool.submit(event_lines, frame, self._precision, self.described.file_prefix)
                            pending.add_batch(formatting, frame.height, item.behind)
                    case FlushNow():
                        pass
                due = time.monotonic() - last_flush >= FLUSH_SECONDS
                if pending.buffered and (isinstance(item, FlushNow) or pending.buffered >= FLUSH_BYTES or due):
                    self._emit(pending)
                    last_flush = time.monotonic()
            except BaseException as exc:  # a bug: reported by the next call from the worker
                self.handoffs.error = exc
                if isinstance(item, Stop):
                    to_disk.put(item)
                    return

    def _emit(self, pending: Pending) -> None:
        """Hand what is pending to the pool, to be made into members (metadata first: FH lines
        come before the events using them), and its place in the file to the disk thread."""
        flush = pending.flush()
        if flush is not None:
            self.handoffs.to_disk.put(Flushed(self.pool.submit(self._members, flush), flush.events, len(flush.meta)), 1)

    def _members(self, flush: Flush) -> tuple[bool, list[tuple[bytes, MemberStats]]]:
        """Whether a flush was deflated in a hurry, and its compressed members (in a pool
        thread; it waits only on formatting submitted before it, so the pool, first in first
        out, never waits on itself)."""
        handoffs = self.handoffs
        hurried = flush.behind or handoffs.to_format.held >= HURRY_QUEUE or len(handoffs.to_disk) >= DISK_QUEUE - 1
        return hurried, [(gzip_member(text, hurried), stats) for text, stats in flush.members()]
