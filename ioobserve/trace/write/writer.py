"""The trace sink: DFTracer-layout JSON lines, gzip members per flush.

Threads of its own, fed in order with frames and ready-made metadata lines, so the
collector's worker never waits on JSON, deflate or the disk: the format thread
(ioobserve.trace.write.format_thread) describes each batch's ids in order and gathers flushes for
a pool of `writer_threads` that formats and compresses them, and the disk thread
(ioobserve.trace.write.disk_thread) appends the members in order. A pool thread that fails loses
nothing silently: the flush's events are counted as unwritten. Each flush appends complete
gzip members (metadata first, then events per layer) that end on line boundaries, so a
recorder killed with SIGKILL leaves a file whose every complete member loads. Which part the
caller's items go to is the Rotation's, on the caller's thread: when a part ends (its size, its
age, or asked: logrotate's SIGHUP, or the disk thread once the disk may take writes again),
and what it queues so that each part stands alone (its own start and end records, and a PR
line for every process it mentions).

The disk failing (full, read-only, I/O errors, the file deleted) never ends the recording:
the part keeps what it had, events are dropped and counted as unwritten, `on_trouble` is told
once, and when the file system can take writes again a new part is started (ioobserve.trace.write.disk_thread).
What waits for the disk is bounded (format_thread.QUEUED_EVENTS frames, DISK_QUEUE members):
beyond that the collector waits, and beyond its backlog the kernel counts the loss. `close`
takes a deadline.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl

from ioobserve.data import schema as s
from ioobserve.data.model import PSEUDO_FS, BatchTables, Mount, Process
from ioobserve.plumbing.deadline import StopDeadline, grace, join_by
from ioobserve.plumbing.handoff import Handoff
from ioobserve.plumbing.host import node_name
from ioobserve.sinks.base import Sink
from ioobserve.trace.lines import PRECISIONS, complete_line, metadata_line, string_hash
from ioobserve.trace.members import index_path
from ioobserve.trace.write.disk_thread import DiskThread, Parts
from ioobserve.trace.write.format_thread import (DISK_QUEUE, QUEUED_EVENTS, Batch, End, FlushNow, FormatThread, Line,
                                                 PartDescriptions, ProcessLine, Rotate, Stop)


SUFFIX = ".pfw.gz"


def part_name(name: str, part: int) -> str:
    """The file name of part `part` of a rotated trace (part 0 keeps the original name)."""
    return name if part == 0 else f"{name[: -len(SUFFIX)]}-{part}{SUFFIX}"


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


class Rotation:
    """The parts of one recording named `name`, from the caller's thread (`pid`, `hhash`: the
    writer's, on every record; `unwritten`: its count so far, for a start after trouble)."""

    def __init__(self, handoffs: Handoffs, parts: Parts, name: str, pid: int, hhash: str, recording: dict,
                 mounts: list[Mount], rotate_bytes: int | None, rotate_seconds: float | None,
                 unwritten: Callable[[], int]) -> None:
        self._handoffs = handoffs
        self._parts = parts  # read only: the part's size and the disk's troubles
        self._name = name
        self._pid, self._hhash = pid, hhash
        self._recording = recording
        self._mounts = mounts
        self._rotate_bytes = rotate_bytes
        self._rotate_seconds = rotate_seconds
        self._unwritten = unwritten
        self.number = 0
        self.asked = False  # a new part with the next batch (any thread sets it)
        self.events = 0  # events queued in this part
        self._started = time.monotonic()
        self._next_id = 1
        self._part_pids: set[int] = set()  # per part: PR lines written
        self._proc_lines: dict[int, ProcessLine] = {}  # latest PR line of every process

    def ask(self) -> None:
        """Start a new part with the next batch; any thread."""
        self.asked = True

    def due(self) -> bool:
        """Whether the next batch starts a new part."""
        if self.asked:
            return True
        if self._rotate_seconds is not None and time.monotonic() - self._started >= self._rotate_seconds:
            return True
        return self._rotate_bytes is not None and self._parts.size >= self._rotate_bytes

    def open_part(self) -> None:
        """Queue the part's first records (host, mounts, start) and flush them: the file is readable at once."""
        put = self._handoffs.put
        put(Line(metadata_line("HH", self._pid, self._pid, {"hhash": self._hhash, "name": node_name(), "value": self._hhash})))
        for mount in self._mounts:  # which file system each dev is: local or shared
            put(Line(metadata_line("MT", self._pid, self._pid, {"dev": mount.dev, "name": mount.mountpoint,
                                                                 "value": mount.fstype})))
        start = {"hhash": self._hhash, **self._recording, "part": self.number}
        if self._parts.troubles:
            start["after_trouble"] = {"error": self._parts.troubles[-1], "unwritten_so_far": self._unwritten()}
        put(Line(complete_line(self.take_id(), "start", self._pid, self._pid, time.time_ns() // 1000, start)))
        self._handoffs.to_format.put(FlushNow())

    def rotate(self) -> None:
        """End this part and start the next; the writer's threads switch files in queue order."""
        self.end()
        self.number += 1
        self.asked = False
        self._handoffs.put(Rotate(part_name(self._name, self.number)))
        self._part_pids.clear()
        self._started = time.monotonic()
        self.events = 0
        self.open_part()

    def end(self, totals: dict | None = None) -> None:
        """Queue this part's end record: the next part's name, or, the recording's last, its
        `totals` (the disk thread adds what it dropped: DiskThread._end_member)."""
        args = {"hhash": self._hhash, "num_events": self.events, "part": self.number}
        if totals is not None:
            args |= totals
        else:
            args["next"] = part_name(self._name, self.number + 1)
        self._handoffs.put(End(self.take_id(), args, totals is not None))

    def take_id(self) -> int:
        """The id of our next own record (start, lost, end)."""
        self._next_id += 1
        return self._next_id - 1

    def processes(self, changed: list[Process]) -> None:
        """Queue a PR line per process, and keep it for later parts."""
        for proc in changed:
            args = {
                "hhash": self._hhash, "ppid": proc.ppid, "comm": proc.comm, "exe": proc.exe,
                "cmdline": list(proc.cmdline), "uid": proc.uid, "cgroup": proc.cgroup_id,
            }
            line = ProcessLine(metadata_line("PR", proc.pid, proc.pid, args), proc.pid, proc.uid, proc.cgroup_id)
            self._proc_lines[proc.pid] = line
            self._part_pids.add(proc.pid)
            self._handoffs.put(line)

    def forget(self, pids) -> None:
        """Processes long gone: their PR lines need not be repeated in later parts."""
        for pid in pids:
            self._proc_lines.pop(pid, None)

    def introduce(self, pids) -> None:
        """Queue the PR lines this part lacks for processes described in an earlier one."""
        for pid in set(pids) - self._part_pids:
            if pid in self._proc_lines:
                self._handoffs.put(self._proc_lines[pid])
            self._part_pids.add(pid)


# A batch whose calls ended this long before it reached the writer: the backlog is in the
# capture process, out of the writer's sight (a flood). On the torch job batches arrive within 0.9 s.
HURRY_LAG_NS = 1_500_000_000
# The pool starts a thread only when every thread it has is busy: at a quiet node's rate one
# does all the work, and more start as the rate needs them, up to this many.
DEFAULT_WRITER_THREADS = max(1, min(4, (os.cpu_count() or 1) - 1))


class TraceWriter(Sink):
    """Writes one recording to <dir>/<host>-<time>-<pid>.pfw.gz, rotating to -1, -2, ... parts
    by size (compressed bytes) or age when asked. Each part stands alone: its own start and
    end records, and FH/PR records for every file and process it mentions. `mounts`: the
    node's (ioobserve.context.mounts.node_mounts), for its MT records. `on_closed(path, hurried)`:
    told of each part closed whole, and whether it holds members deflated fast while the
    writer was behind (worth recompressing)."""

    def __init__(self, directory: Path, name: str, recording: dict, rotate_bytes: int | None = None,
                 rotate_seconds: float | None = None, mounts: list[Mount] | None = None,
                 on_trouble: Callable[[str], None] | None = None, precision: str = "us",
                 on_closed: Callable[[Path, bool], None] | None = None, writer_threads: int = DEFAULT_WRITER_THREADS):
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, not {precision!r}")
        self.directory = Path(directory)
        self._discarding = False  # discard(): the files go, nothing finishes them
        self._parts = Parts(self.directory, part_name(name, 0), on_trouble,  # errors here reach the caller
                            lambda: self._format.dropped + self._parts.dropped,
                            (lambda path: None if self._discarding else on_closed(path, self.hurried(path))) if on_closed else None)
        self._pid = os.getpid()
        self._hhash = string_hash(node_name())
        self.events_handed = 0  # events given to events()
        self.lost_counts: dict[str, int] = {}
        self.counts: dict[str, int] = {}
        self._handoffs = Handoffs()
        self._format = FormatThread(self._handoffs, self._parts, PartDescriptions(self._pid, self._hhash),
                                    precision, writer_threads)
        self._rotation = Rotation(self._handoffs, self._parts, name, self._pid, self._hhash,
                                  {**recording, "precision": precision},
                                  [m for m in mounts or [] if m.fstype not in PSEUDO_FS],
                                  rotate_bytes, rotate_seconds, lambda: self.unwritten)
        self._disk = DiskThread(self._format, self._parts, self._rotation, self._pid, on_trouble)
        self._format.thread.start()
        self._disk.thread.start()
        self._rotation.open_part()

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
    def unwritten(self) -> int:
        """Events handed to the writer that are not on disk: dropped after a disk failure or
        at the stop deadline (exact once closed; while running, also those still queued)."""
        return self.events_handed - self._parts.appended

    def rotate_soon(self) -> None:
        """Start a new part with the next batch (after logrotate moved the files: SIGHUP); any thread."""
        self._rotation.ask()

    def processes(self, changed: list[Process]) -> None:
        """A PR metadata line per process born, exec'd or first seen doing I/O."""
        self._rotation.processes(changed)

    def forget(self, pids) -> None:
        """Processes long gone: their PR lines need not be repeated in later parts."""
        self._rotation.forget(pids)

    def events(self, frame: pl.DataFrame, tables: BatchTables) -> None:
        """Queue a batch for formatting: its ids (schema.ID_SCHEMA; names are not read) and the
        tables naming them. PR lines the part lacks go first; the format thread adds the rest."""
        if self._rotation.due():
            self._rotation.rotate()
        self._rotation.introduce(frame.get_column(s.PID).unique().to_list())
        behind = bool(frame.height) and time.time_ns() - frame.select((pl.col(s.TS) + pl.col(s.DUR)).min()).item() >= HURRY_LAG_NS
        self._handoffs.put(Batch(frame.select(list(s.ID_SCHEMA)), tables, behind), frame.height)
        self._rotation.events += frame.height
        self.events_handed += frame.height

    def lost(self, ts_ns: int, counts: dict[str, int]) -> None:
        """A loss record for the interval, so a trace says what it misses."""
        for name, count in counts.items():
            self.lost_counts[name] = self.lost_counts.get(name, 0) + count
        self._handoffs.put(Line(complete_line(self._rotation.take_id(), "lost", self._pid, self._pid, ts_ns // 1000,
                                              {"hhash": self._hhash, "lost": counts})))

    def throttled(self, ts_ns: int, mark: dict) -> None:
        """A throttle record: a cgroup's flood control started or ended holding its events back."""
        self._handoffs.put(Line(complete_line(self._rotation.take_id(), "throttle", self._pid, self._pid, ts_ns // 1000,
                                              {"hhash": self._hhash, **mark})))

    def counters(self, counts: dict[str, int]) -> None:
        """Recording-wide counters, for the end record."""
        self.counts.update(counts)

    def accounting(self, rows: pl.DataFrame) -> None:
        """A TS metadata line per exited process: what was traced beside the kernel's accounting."""
        for row in rows.iter_rows(named=True):
            pid = row.pop("pid")
            self._handoffs.put(Line(metadata_line("TS", pid, pid, {"hhash": self._hhash, **row})))

    def abandon(self) -> None:
        """Stop writing events now (a stop deadline passed; any thread): what is queued is
        dropped and counted as unwritten; the end record is still written if the disk takes it."""
        self._handoffs.abandon()

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
            self._rotation.rotate()  # a last try: if the disk has room again, the end record gets a part of its own
        self._rotation.end({"recording_events": self.events_handed, "lost": dict(self.lost_counts), "counters": self.counts})
        self._handoffs.to_format.put(Stop())
        threads = [self._format.thread, self._disk.thread]
        if not join_by(threads, deadline):
            self.abandon()
            join_by(threads, grace())  # one stuck on a hung disk is left behind
        self._format.pool.shutdown(wait=False, cancel_futures=True)  # its work is done, or abandoned
        if self._handoffs.error is not None:
            raise self._handoffs.error
