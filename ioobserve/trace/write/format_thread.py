"""The trace writer's format stage: the items its queues carry, the flushes it gathers, and
the format thread with the hand-offs on either side of it.

The caller's items (a closed set of small ones below, each handled by one `match` in the
thread that takes it: here and in ioobserve.trace.write.disk_thread) arrive in order; the
thread describes each batch's ids (the metadata lines: ioobserve.trace.write.describe),
gathers lines and batches into flushes, and hands each flush to a pool of `writer_threads`
that formats batches (the compiled core) and compresses members (independent work, done
beside each other where one core is not enough: both release the GIL), and its place in the
file to the disk thread. A flush goes out at most every FLUSH_SECONDS or FLUSH_BYTES of
text. While the disk takes nothing, or after abandon, frames are dropped unformatted and
counted.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import polars as pl

from ioobserve.data.model import BatchTables
from ioobserve.plumbing.handoff import Handoff
from ioobserve.plumbing.thread_names import name_this_thread
from ioobserve.trace.lines import event_lines
from ioobserve.trace.members import KIND_EVENTS, KIND_META, MemberStats, gzip_member
from ioobserve.trace.write.describe import PartDescriptions

if TYPE_CHECKING:  # the disk thread's module, which imports this one, holds the parts
    from ioobserve.trace.write.disk_thread import Parts


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


class Handoffs:
    """The writer's two queues, caller to format thread (bounded by events) and format thread
    to disk thread (bounded by members), and what its threads share about them: whether they
    were abandoned, and the error a thread of ours hit (a bug, raised to the next caller)."""

    def __init__(self) -> None:
        self.to_format = Handoff(QUEUED_EVENTS)
        self.to_disk = Handoff(DISK_QUEUE)
        self.abandoned = threading.Event()
        self.error: BaseException | None = None

    def put(self, item, weight: int = 0) -> None:
        """Queue an item for the format thread; first raise the error a thread of ours hit, if any."""
        if self.error is not None:
            raise self.error
        self.to_format.put(item, weight)

    def abandon(self) -> None:
        """Drop what is queued from now on (any thread): no put waits for room again."""
        self.abandoned.set()
        self.to_format.abandon()
        self.to_disk.abandon()


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
