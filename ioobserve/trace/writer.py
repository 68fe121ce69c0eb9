"""The trace sink: DFTracer-layout JSON lines, gzip members per flush.

Threads of its own, fed in order with frames and ready-made metadata lines, so the
collector's worker never waits on JSON, deflate or the disk: one describes each batch's ids
in order (the metadata lines: ioobserve.trace.describe) and gathers flushes
(ioobserve.trace.flushing), a pool of `writer_threads` formats batches (the compiled core)
and compresses flushes (independent work, done beside each other where one core is not
enough: both release the GIL), and one appends the members in order. A pool thread that fails
loses nothing silently: the flush's events are counted as unwritten. Each flush (at most every FLUSH_SECONDS or FLUSH_BYTES of text)
appends complete gzip members (metadata first, then events per layer) that end on line
boundaries, so a recorder killed with SIGKILL leaves a file whose every complete member loads.

The disk failing (full, read-only, I/O errors, the file deleted) never ends the recording:
the part keeps what it had, events are dropped and counted as unwritten, `on_trouble` is told
once, and when the file system can take writes again a new part is started (ioobserve.trace.parts).
What waits for the disk is bounded (QUEUED_EVENTS frames, DISK_QUEUE members): beyond that the
collector waits, and beyond its backlog the kernel counts the loss. `close` takes a deadline.
"""

from __future__ import annotations

import os
import queue
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl

from ioobserve import schema as s
from ioobserve.deadline import UNWRITTEN, StopDeadline, grace, join_by
from ioobserve.handoff import Handoff
from ioobserve.thread_names import name_this_thread
from ioobserve.model import PSEUDO_FS, BatchTables, Mount, Process
from ioobserve.trace.disk import RESUME_CHECK_S
from ioobserve.trace.index import KIND_META, MemberStats, index_path
from ioobserve.trace.members import gzip_member
from ioobserve.trace.describe import PartDescriptions
from ioobserve.trace.flushing import Flush, Pending
from ioobserve.trace.lines import PRECISIONS, complete_line, event_lines, metadata_line, string_hash
from ioobserve.trace.parts import Parts
from ioobserve.trace.queued import Batch, End, Flushed, FlushNow, Line, ProcessLine, Rotate, Stop

FLUSH_SECONDS = 1.0
FLUSH_BYTES = 8 << 20
DISK_QUEUE = 4  # members waiting for the disk
QUEUED_EVENTS = 1 << 16  # events waiting to be formatted before the collector's worker waits (a batch or so)
HURRY_QUEUE = QUEUED_EVENTS  # this many waiting (the worker is about to wait): compress fast rather than small
# Or a batch whose calls ended this long before it reached the writer: the backlog is in the
# capture process, out of the writer's sight (a flood). On the torch job batches arrive within 0.9 s.
HURRY_LAG_NS = 1_500_000_000
# The pool starts a thread only when every thread it has is busy: at a quiet node's rate one
# does all the work, and more start as the rate needs them, up to this many.
DEFAULT_WRITER_THREADS = max(1, min(4, (os.cpu_count() or 1) - 1))
SUFFIX = ".pfw.gz"


def part_name(name: str, part: int) -> str:
    """The file name of part `part` of a rotated trace (part 0 keeps the original name)."""
    return name if part == 0 else f"{name[: -len(SUFFIX)]}-{part}{SUFFIX}"


class TraceWriter:
    """Writes one recording to <dir>/<host>-<time>-<pid>.pfw.gz, rotating to -1, -2, ... parts
    by size (compressed bytes) or age when asked. Each part stands alone: its own start and
    end records, and FH/PR records for every file and process it mentions. `mounts`: the
    node's (ioobserve.context.mounts.read_mounts), for its MT records."""

    def __init__(self, directory: Path, name: str, recording: dict, rotate_bytes: int | None = None,
                 rotate_seconds: float | None = None, mounts: list[Mount] | None = None,
                 on_trouble: Callable[[str], None] | None = None, precision: str = "us",
                 on_closed: Callable[[Path], None] | None = None, writer_threads: int = DEFAULT_WRITER_THREADS):
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, not {precision!r}")
        self.directory = Path(directory)
        self._precision = precision
        self._name = name
        self._dropped_frames = 0  # events dropped unformatted by the format thread
        self._discarding = False  # discard(): the files go, nothing finishes them
        self._parts = Parts(self.directory, part_name(name, 0), on_trouble,  # errors here reach the caller
                            lambda: self._dropped_frames + self._parts.dropped,
                            (lambda path: None if self._discarding else on_closed(path)) if on_closed else None)
        self._pid = os.getpid()
        self._hhash = string_hash(socket.gethostname())
        self._recording = {**recording, "precision": precision}
        self._mounts = [m for m in mounts or [] if m.fstype not in PSEUDO_FS]
        self._rotate_bytes = rotate_bytes
        self._rotate_seconds = rotate_seconds
        self._part_number = 0
        self._rotate_asked = False
        self._described = PartDescriptions(self._pid, self._hhash)  # the describing thread's own
        self._part_pids: set[int] = set()  # per part: PR lines written
        self._proc_lines: dict[int, ProcessLine] = {}  # latest PR line of every process
        self._part_started = time.monotonic()
        self._part_events = 0
        self._next_id = 1
        self.events_handed = 0  # events given to events()
        self.lost_counts: dict[str, int] = {}
        self.counts: dict[str, int] = {}
        self.error: BaseException | None = None  # a bug in a thread of ours, raised to the next caller
        self._abandoned = threading.Event()
        self._on_trouble = on_trouble
        self._pool = ThreadPoolExecutor(max(1, writer_threads), thread_name_prefix="ioobserve-format",
                                        initializer=name_this_thread)
        self._failed_flushes = 0  # flushes a pool thread could not format or compress (their events: unwritten)
        self._hurried_members = 0  # members deflated fast (members.HURRIED_LEVEL: the writer was behind)
        self._queue = Handoff(QUEUED_EVENTS)
        self._disk_queue = Handoff(DISK_QUEUE)
        self._thread = threading.Thread(target=self._run, name="ioobserve-writer", daemon=True)
        self._disk_thread = threading.Thread(target=self._disk_run, name="ioobserve-disk", daemon=True)
        self._thread.start()
        self._disk_thread.start()
        self._put_header()

    @property
    def disk_pid(self) -> int:
        """The process making the trace's file-system calls: the recorder must not trace it."""
        return self._parts.disk.pid

    @property
    def path(self) -> Path:
        """The first file of the recording."""
        return self._parts.first_path

    @property
    def paths(self) -> list[Path]:
        """The recording's files (a part deleted meanwhile is left out)."""
        return self._parts.paths

    @property
    def trouble(self) -> str | None:
        """Why the disk takes nothing now (None: it does)."""
        return self._parts.trouble

    @property
    def troubles(self) -> list[str]:
        """Every failure of the disk during the recording, in order."""
        return self._parts.troubles

    @property
    def events_written(self) -> int:
        """Events in members the disk took (and that were not deleted with their file since)."""
        return self._parts.appended

    def hurried(self, part: Path) -> bool:
        """Whether a part holds members deflated fast because the writer was behind (worth
        recompressing once closed)."""
        return Path(part) in self._parts.hurried

    @property
    def failed_flushes(self) -> int:
        """Flushes whose formatting or compression failed (their events are counted unwritten)."""
        return self._failed_flushes

    @property
    def unwritten(self) -> int:
        """Events handed to the writer that are not on disk: dropped after a disk failure or
        at the stop deadline (exact once closed; while running, also those still queued)."""
        return self.events_handed - self._parts.appended

    def _put_header(self) -> None:
        host = socket.gethostname()
        self._put(Line(metadata_line("HH", self._pid, self._pid, {"hhash": self._hhash, "name": host, "value": self._hhash})))
        for mount in self._mounts:  # which file system each dev is: local or shared
            self._put(Line(metadata_line("MT", self._pid, self._pid, {"dev": mount.dev, "name": mount.mountpoint,
                                                                       "value": mount.fstype})))
        start = {"hhash": self._hhash, **self._recording, "part": self._part_number}
        if self.troubles:
            start["after_trouble"] = {"error": self.troubles[-1], "unwritten_so_far": self.unwritten}
        self._put(Line(complete_line(self._take_id(), "start", self._pid, self._pid, time.time_ns() // 1000, start)))
        self._queue.put(FlushNow())

    def rotate_soon(self) -> None:
        """Start a new part with the next batch (after logrotate moved the files: SIGHUP); any thread."""
        self._rotate_asked = True

    def _rotation_due(self) -> bool:
        if self._rotate_asked:
            return True
        if self._rotate_seconds is not None and time.monotonic() - self._part_started >= self._rotate_seconds:
            return True
        return self._rotate_bytes is not None and self._parts.size >= self._rotate_bytes

    def _rotate(self) -> None:
        """End this part and start the next; the writer thread switches files in queue order."""
        self._put_end(final=False)
        self._part_number += 1
        self._rotate_asked = False
        self._put(Rotate(part_name(self._name, self._part_number)))
        self._part_pids.clear()
        self._part_started = time.monotonic()
        self._part_events = 0
        self._put_header()

    def _put_end(self, final: bool) -> None:
        """Queue this part's end record: the next part's name, or, the recording's last, its
        totals (the disk thread adds what it dropped: _end_member)."""
        args = {"hhash": self._hhash, "num_events": self._part_events, "part": self._part_number}
        if final:
            args |= {"recording_events": self.events_handed, "lost": dict(self.lost_counts), "counters": self.counts}
        else:
            args["next"] = part_name(self._name, self._part_number + 1)
        self._put(End(self._take_id(), args, final))

    def _take_id(self) -> int:
        self._next_id += 1
        return self._next_id - 1

    def _put(self, item, weight: int = 0) -> None:
        if self.error is not None:
            raise self.error
        self._queue.put(item, weight)

    def processes(self, changed: list[Process]) -> None:
        """A PR metadata line per process born, exec'd or first seen doing I/O."""
        for proc in changed:
            args = {
                "hhash": self._hhash, "ppid": proc.ppid, "comm": proc.comm, "exe": proc.exe,
                "cmdline": list(proc.cmdline), "uid": proc.uid, "cgroup": proc.cgroup_id,
            }
            line = ProcessLine(metadata_line("PR", proc.pid, proc.pid, args), proc.pid, proc.uid, proc.cgroup_id)
            self._proc_lines[proc.pid] = line
            self._part_pids.add(proc.pid)
            self._put(line)

    def forget(self, pids) -> None:
        """Processes long gone: their PR lines need not be repeated in later parts."""
        for pid in pids:
            self._proc_lines.pop(pid, None)

    def events(self, frame: pl.DataFrame, tables: BatchTables) -> None:
        """Queue a batch for formatting: its ids (schema.ID_SCHEMA; names are not read) and the
        tables naming them. PR lines the part lacks go first; the format thread adds the rest."""
        if self._rotation_due():
            self._rotate()
        for pid in set(frame.get_column(s.PID).unique().to_list()) - self._part_pids:
            if pid in self._proc_lines:  # a process described in an earlier part
                self._put(self._proc_lines[pid])
            self._part_pids.add(pid)
        behind = bool(frame.height) and time.time_ns() - frame.select((pl.col(s.TS) + pl.col(s.DUR)).min()).item() >= HURRY_LAG_NS
        self._put(Batch(frame.select(list(s.ID_SCHEMA)), tables, behind), frame.height)
        self._part_events += frame.height
        self.events_handed += frame.height

    def lost(self, ts_ns: int, counts: dict[str, int]) -> None:
        """A loss record for the interval, so a trace says what it misses."""
        for name, count in counts.items():
            self.lost_counts[name] = self.lost_counts.get(name, 0) + count
        self._put(Line(complete_line(self._take_id(), "lost", self._pid, self._pid, ts_ns // 1000,
                                      {"hhash": self._hhash, "lost": counts})))

    def counters(self, counts: dict[str, int]) -> None:
        """Recording-wide counters, for the end record."""
        self.counts.update(counts)

    def accounting(self, rows: pl.DataFrame) -> None:
        """A TS metadata line per exited process: what was traced beside the kernel's accounting."""
        for row in rows.iter_rows(named=True):
            pid = row.pop("pid")
            self._put(Line(metadata_line("TS", pid, pid, {"hhash": self._hhash, **row})))

    def abandon(self) -> None:
        """Stop writing events now (a stop deadline passed; any thread): what is queued is
        dropped and counted as unwritten; the end record is still written if the disk takes it."""
        self._abandoned.set()
        self._queue.abandon()
        self._disk_queue.abandon()

    def discard(self) -> None:
        """Close and delete every file of the trace, its index included, with nothing left to
        finish it: a recording that never started leaves nothing behind."""
        self._discarding = True
        try:
            self.close()
        finally:
            for path in self.paths:
                for leftover in (path, index_path(path)):
                    leftover.unlink(missing_ok=True)

    def close(self, deadline: StopDeadline | None = None) -> None:
        """Write the end record, flush, fsync and close, by the deadline (None: however long it
        takes); past it, abandon(). A failing disk raises nothing: `trouble`, `troubles` and
        `unwritten` say what happened."""
        if self.trouble is not None:
            self._rotate()  # a last try: if the disk has room again, the end record gets a part of its own
        self._put_end(final=True)
        self._queue.put(Stop())
        if not join_by([self._thread, self._disk_thread], deadline):
            self.abandon()
            join_by([self._thread, self._disk_thread], grace())  # one stuck on a hung disk is left behind
        self._pool.shutdown(wait=False, cancel_futures=True)  # its work is done, or abandoned
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        """Describe batches and gather lines in queue order into flushes for the pool and the
        disk thread. While the disk takes nothing (or after abandon) frames are dropped unformatted."""
        name_this_thread()
        pending = Pending()
        last_flush = time.monotonic()
        while True:
            try:
                item = self._queue.get(timeout=FLUSH_SECONDS)
            except queue.Empty:
                item = FlushNow()
            try:
                match item:
                    case Stop():
                        self._emit(pending)
                        self._disk_queue.put(item)
                        return
                    case Rotate():
                        self._emit(pending)
                        self._described.new_part()  # each part describes its own files, cgroups and users
                        self._disk_queue.put(item)
                        last_flush = time.monotonic()
                        continue
                    case End():
                        self._emit(pending)
                        self._disk_queue.put(item)
                    case ProcessLine():
                        self._described.process_line(item.pid, item.uid, item.cgroup)
                        pending.add_meta(item.text)
                    case Line():
                        pending.add_meta(item.text)
                    case Batch():
                        self._described.keep_stacks(item.tables.stacks)
                        if self.trouble is not None or self._abandoned.is_set():
                            self._dropped_frames += item.frame.height
                        elif item.frame.height:
                            frame, lines = self._described.describe(item.frame, item.tables)
                            for line in lines:
                                pending.add_meta(line)
                            formatting = self._pool.submit(event_lines, frame, self._precision, self._described.file_prefix)
                            pending.add_batch(formatting, frame.height, item.behind)
                    case FlushNow():
                        pass
                due = time.monotonic() - last_flush >= FLUSH_SECONDS
                if pending.buffered and (isinstance(item, FlushNow) or pending.buffered >= FLUSH_BYTES or due):
                    self._emit(pending)
                    last_flush = time.monotonic()
            except BaseException as exc:  # a bug: reported by the next call from the worker
                self.error = exc
                if isinstance(item, Stop):
                    self._disk_queue.put(item)
                    return

    def _emit(self, pending: Pending) -> None:
        """Hand what is pending to the pool, to be made into members (metadata first: FH lines
        come before the events using them), and its place in the file to the disk thread."""
        flush = pending.flush()
        if flush is not None:
            self._disk_queue.put(Flushed(self._pool.submit(self._members, flush), flush.events, len(flush.meta)), 1)

    def _members(self, flush: Flush) -> tuple[bool, list[tuple[bytes, MemberStats]]]:
        """Whether a flush was deflated in a hurry, and its compressed members (in a pool
        thread; it waits only on formatting submitted before it, so the pool, first in first
        out, never waits on itself)."""
        hurried = flush.behind or self._queue.held >= HURRY_QUEUE or len(self._disk_queue) >= DISK_QUEUE - 1
        return hurried, [(gzip_member(text, hurried), stats) for text, stats in flush.members()]

    def _disk_run(self) -> None:
        """Compress, append and index members, switch parts, in the order they come; while
        the disk takes nothing, ask from time to time whether it would again."""
        name_this_thread()
        parts = self._parts
        while True:
            try:
                item = self._disk_queue.get(RESUME_CHECK_S if parts.trouble is not None else None)
            except queue.Empty:
                self._ask_resume()
                continue
            try:
                match item:
                    case Stop():
                        parts.finish()
                        parts.close()
                        return
                    case Rotate():
                        parts.finish()
                        parts.start(item.name)
                        continue
                    case End():
                        text, stats = self._end_member(item)
                        hurried, members = False, [(gzip_member(text), stats)]
                    case Flushed():
                        hurried, members = self._flush_members(item)
                for member, stats in members:
                    if parts.trouble is not None or (self._abandoned.is_set() and stats.events):
                        parts.drop(stats.events)
                        self._ask_resume()
                        continue
                    parts.append(member, stats, hurried)
                    self._hurried_members += hurried
            except BaseException as exc:  # a bug: reported by the next call from the worker
                self.error = exc
                if isinstance(item, Stop):
                    return

    def _flush_members(self, flushed: Flushed) -> tuple[bool, list[tuple[bytes, MemberStats]]]:
        """A flush's members once its pool thread made them; none if it failed: its events are
        counted as unwritten (and the flushes failed, in the end record) and the user is told, once."""
        events, meta_lines = flushed.events, flushed.meta_lines
        try:
            return flushed.made.result()
        except Exception as exc:  # noqa: BLE001 (any failure of formatting or deflate: counted, not fatal)
            self._failed_flushes += 1
            self._parts.drop(events)
            if self._failed_flushes == 1 and self._on_trouble is not None:
                self._on_trouble(f"a writer thread failed ({type(exc).__name__}: {exc}): a flush of {events:,} events "
                                 f"and {meta_lines:,} metadata lines was not written (counted as unwritten)")
            return False, []

    def _ask_resume(self) -> None:
        if self._parts.trouble is not None and not self._rotate_asked and self._parts.resume_due():
            self._rotate_asked = True  # the collector's next batch starts a new part

    def _end_member(self, end: End) -> tuple[bytes, MemberStats]:
        """The end record as a member; the recording's last one says how many events the disk missed."""
        args = dict(end.args)
        if end.final:
            dropped = self._dropped_frames + self._parts.dropped
            # the collector's own (dropped at the deadline before reaching us) came through lost()
            lost = dict(args["lost"])
            if dropped:
                lost[UNWRITTEN] = lost.get(UNWRITTEN, 0) + dropped
            args["lost"] = lost
            args["lost_total"] = sum(args["lost"].values())
            if self._described.stacks_missing:
                args["counters"] = {**args["counters"], "py_stacks_undescribed": self._described.stacks_missing}
            if self._failed_flushes:
                args["counters"] = {**args["counters"], "writer_failed_flushes": self._failed_flushes}
            if self._hurried_members:
                args["counters"] = {**args["counters"], "writer_hurried_members": self._hurried_members}
        text = complete_line(end.record_id, "end", self._pid, self._pid, end.ts_us, args)
        stats = MemberStats(KIND_META)
        stats.add_text(text)
        return text, stats
