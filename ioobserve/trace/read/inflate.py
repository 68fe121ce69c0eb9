"""Inflating and parsing a trace's gzip members (ours, or DFTracer's) into raw event columns
and metadata lines.

Members are inflated and parsed in parallel threads (libdeflate and Polars release the GIL),
planned from the member index so that members outside the asked time range or pids are
never inflated. Without a usable index the members are found by walking the file. Damaged
members are skipped and reported; everything intact loads.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import deflate
import polars as pl

from ioobserve.data import schema as s
from ioobserve.plumbing.memory import keep_freed_buffers
from ioobserve.trace.members import Damage, NotATrace, OversizedMember, inflate_member, iter_members, KIND_EVENTS, MemberEntry, index_path, read_index
from ioobserve.trace.read import parse

WORKERS = 2 * (os.cpu_count() or 1)  # more than the cores: a member task waits on the GIL part of the time
PROGRESS_BYTES = 64 << 20  # show a progress bar on a terminal when there is this much to read
READ_ARENAS = 2  # malloc arenas of a process reading a trace (ioobserve.plumbing.memory.keep_freed_buffers)


class TraceError(Exception):
    """A trace file is missing or not a readable trace."""


@dataclass(frozen=True)
class Selection:
    """What to keep: pids, a time range [start_ns, end_ns) and path prefixes (None: all)."""

    pids: frozenset[int] | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    path_prefixes: tuple[str, ...] | None = None
    fields: tuple[str, ...] | None = None  # the raw event fields to parse (None: all)
    lines: bool = True  # the metadata lines too (False: the caller has read them already)

    def skips(self, entry: MemberEntry) -> bool:
        """Whether an indexed member holds nothing this selection keeps."""
        if entry.kind != KIND_EVENTS:
            return not (self.lines or entry.events)  # metadata, and JSON events (DFTracer's)
        if not entry.events:
            return True
        if self.pids is not None and not self.pids.intersection(entry.pids):
            return True
        if self.start_ns is not None and entry.ts_max is not None and entry.ts_max < self.start_ns:
            return True
        return self.end_ns is not None and entry.ts_min is not None and entry.ts_min >= self.end_ns

    def rows(self, raw: pl.DataFrame) -> pl.DataFrame:
        """Keep the raw event rows this selection wants (paths are checked after resolving)."""
        if self.pids is not None:
            raw = raw.filter(pl.col("pid").is_in(sorted(self.pids)))
        if self.start_ns is not None or self.end_ns is not None:
            ts = pl.col("ts") * 1000 + pl.col("tns").fill_null(0)
            if self.start_ns is not None:
                raw = raw.filter(ts >= self.start_ns)
            if self.end_ns is not None:
                raw = raw.filter(ts < self.end_ns)
        return raw

    def keep(self, events: pl.LazyFrame) -> pl.LazyFrame:
        """The named events (columns of ioobserve.data.schema) this selection wants."""
        if self.pids is not None:
            events = events.filter(pl.col(s.PID).is_in(sorted(self.pids)))
        if self.start_ns is not None:
            events = events.filter(pl.col(s.TS) >= self.start_ns)
        if self.end_ns is not None:
            events = events.filter(pl.col(s.TS) < self.end_ns)
        if self.path_prefixes is not None:
            wanted = pl.lit(False)
            for prefix in self.path_prefixes:
                wanted = wanted | pl.col(s.PATH).cat.starts_with(prefix) | pl.col(s.PATH2).cat.starts_with(prefix)
            events = events.filter(wanted.fill_null(False))
        return events


class Yields:
    """What the members of one or more files yielded, per file (each file names its own ids).
    Members of our event lines are made into one frame per file, not one per member, unless
    the selection drops rows (a frame of the rows kept is smaller than a member's buffers)."""

    def __init__(self, selection: Selection) -> None:
        self.selection = selection
        self.keys = None if selection.fields is None else [*selection.fields, "cat"]
        self.filters_rows = selection.pids is not None or selection.start_ns is not None or selection.end_ns is not None
        self.events: dict[Path, list[pl.DataFrame]] = {}
        self.shapes: dict[Path, list[parse.ShapeRead]] = {}
        self.lines: dict[Path, list[pl.DataFrame]] = {}

    def add(self, path: Path, events: parse.ShapeRead | pl.DataFrame | None, lines: pl.DataFrame | None) -> None:
        """One member's yield."""
        if isinstance(events, parse.ShapeRead):
            if not events.rows:
                events = None
            elif self.filters_rows:
                events = self.selection.rows(parse.shape_frame([events], self.keys))
            else:
                self.shapes.setdefault(path, []).append(events)
                events = None
        if events is not None and events.height:
            self.events.setdefault(path, []).append(events)
        if lines is not None and lines.height:
            self.lines.setdefault(path, []).append(lines)

    def files(self) -> list[Path]:
        """The files that yielded anything, in the order asked."""
        return list(dict.fromkeys([*self.events, *self.shapes, *self.lines]))

    def file_events(self, path: Path) -> pl.DataFrame:
        """One file's raw events."""
        frames = list(self.events.get(path, []))
        if path in self.shapes:
            frames.append(parse.shape_frame(self.shapes[path], self.keys))
        return pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame(schema=parse.RAW_SCHEMA)

    def file_lines(self, path: Path) -> pl.DataFrame:
        """One file's JSON lines."""
        frames = self.lines.get(path)
        return pl.concat(frames) if frames else pl.DataFrame(schema=parse.LINE_SCHEMA)

    def all_lines(self) -> pl.DataFrame:
        """Every file's JSON lines."""
        frames = [frame for frames in self.lines.values() for frame in frames]
        return pl.concat(frames) if frames else pl.DataFrame(schema=parse.LINE_SCHEMA)




def as_paths(paths) -> list[Path]:
    """One path or many, as a list of Paths."""
    return [Path(paths)] if isinstance(paths, (str, os.PathLike)) else [Path(p) for p in paths]


class _TraceFile:
    """A trace file open for reading members, by pread: threads read at once, and nothing of
    the file stays mapped in our memory once read (an mmap held every page it had read: 1.3 GB
    of a 1.3 GB trace read to its end)."""

    def __init__(self, handle) -> None:
        self._handle = handle  # closed when the last task reading it is gone

    def read(self, offset: int, size: int) -> bytes:
        """`size` bytes at `offset`."""
        return os.pread(self._handle.fileno(), size, offset)


def _open(path: Path) -> tuple[_TraceFile, int]:
    try:
        handle = open(path, "rb")
        size = os.fstat(handle.fileno()).st_size
        head = os.pread(handle.fileno(), 2, 0)
    except OSError as exc:
        raise TraceError(f"{path}: cannot read it ({exc.strerror})") from None
    if size and head != b"\x1f\x8b":
        handle.close()
        raise TraceError(f"{path}: not a gzip trace (expected .pfw.gz written by ioobserve or DFTracer)")
    return _TraceFile(handle), size


def _parse(text: bytes, kind: str | None, selection: Selection) -> tuple[parse.ShapeRead | pl.DataFrame | None,
                                                                         pl.DataFrame | None]:
    """(raw events, JSON lines) of one member's text; our event lines as the core read them."""
    shape = parse.event_shape(text) if kind in (KIND_EVENTS, None) else None
    if shape is not None:
        try:
            return parse.read_shape(text, shape), None  # made into a frame with the chunk's others (Yields)
        except parse.MalformedMember as exc:
            try:  # not what its first line promised: read it as JSON
                lines = parse.json_lines(text)
            except parse.MalformedMember:
                raise exc from None  # it names the line that broke the shape
    else:
        lines = parse.json_lines(text)
    kept = lines.filter((pl.col("ph") == parse.PH_METADATA) | (pl.col("cat") == parse.CAT_META))
    events = parse.json_events(lines)
    events = events if selection.fields is None else events.select("cat", *selection.fields)
    return selection.rows(events), kept


def _member(data: _TraceFile, offset: int, size: int, kind: str | None, selection: Selection, damage: Damage):
    """Inflate and parse one member; what _parse returns, or (None, None) if it is damaged."""
    try:
        text = inflate_member(data.read(offset, size))
    except OversizedMember as exc:
        damage.members_lost += 1
        damage.notes.append(f"the member at byte {offset:,} was skipped: {exc}")
        return None, None
    except (deflate.DeflateError, ValueError):  # libdeflate raises ValueError for a bad header
        damage.members_lost += 1
        return None, None
    return _parse(text, kind, selection)


@dataclass(frozen=True)
class MemberTask:
    """One member worth reading: where it starts in its file, its compressed size, its text's
    size (the compressed size where unindexed), its first and last event times (where
    indexed) and the reading itself."""

    offset: int
    size: int
    raw: int
    times: tuple[int, int] | None
    read: Callable


def member_tasks(path: Path, selection: Selection, damage: Damage) -> Iterator[MemberTask]:
    """The tasks reading each member of one file worth reading."""
    data, size = _open(path)
    entries = read_index(path, size) if size else []  # as far as our mapping of the file reaches
    if entries is None:
        if index_path(path).exists():  # no index at all is normal: DFTracer's traces have none
            damage.notes.append(f"its index is stale, so the whole file was read (run 'ioobserve index {path}')")
        try:  # find the members (inflating each once); keep only where they are, not their text
            members = [(offset, length, length, None, None) for offset, length, _ in iter_members(path, damage)]
        except NotATrace as exc:
            raise TraceError(str(exc)) from None
    else:
        members = [(e.offset, e.size, e.raw, e.kind, (e.ts_min, e.ts_max) if e.events else None)
                   for e in entries if not selection.skips(e)]
    for offset, length, raw, kind, times in members:
        yield MemberTask(offset, length, raw, times, partial(_member, data, offset, length, kind, selection, damage))


def run_chunks(paths: list[Path], selection: Selection, damage: list[Damage] | None, progress: bool | None,
               chunk_bytes: int | None = None) -> Iterator[Yields]:
    """What the members of the files yield, in chunks of about `chunk_bytes` of text in file
    order (None: one chunk); members of a chunk are parsed in parallel."""
    jobs = []
    found: list[Damage] = []
    for path in paths:
        file_damage = Damage(path)
        found.append(file_damage)
        jobs += [(task, file_damage, path) for task in member_tasks(path, selection, file_damage)]
    total = sum(task.size for task, _, _ in jobs)
    show = progress if progress is not None else (total >= PROGRESS_BYTES and sys.stderr.isatty())

    def run(job):
        task, file_damage, path = job
        try:
            return task.size, path, task.read()
        except parse.MalformedMember as exc:
            file_damage.members_lost += 1
            file_damage.notes.append(f"the member at byte {task.offset:,} is not trace lines ({exc})")
            return task.size, path, (None, None)

    keep_freed_buffers(arenas=READ_ARENAS)
    with ThreadPoolExecutor(max_workers=WORKERS) as pool, _Progress(show, total) as bar:
        for chunk in _chunked(jobs, chunk_bytes):
            parts = Yields(selection)
            for size, path, (events, lines) in pool.map(run, chunk):
                parts.add(path, events, lines)
                bar.advance(size)
            yield parts
    if damage is not None:
        damage.extend(d for d in found if d or d.notes)


def _chunked(jobs: list, chunk_bytes: int | None) -> Iterator[list]:
    """Consecutive runs of jobs of about chunk_bytes of text (at least one job each; none if
    no jobs; None: all in one), cut only at a seam in time, which needs the members' times
    from the index: the members of one flush (a member per layer and shape) overlap in time,
    and whoever reads chunks in order must see every event before a seam before those after it."""
    chunk, size, last = [], 0, None
    for job in jobs:
        times = job[0].times
        if chunk and chunk_bytes is not None and size >= chunk_bytes and times is not None and last is not None \
                and times[0] >= last:
            yield chunk
            chunk, size, last = [], 0, None
        chunk.append(job)
        size += job[0].raw
        if times is not None:
            last = times[1] if last is None else max(last, times[1])
    if chunk or not jobs:
        yield chunk


def run_all(paths: list[Path], selection: Selection, damage: list[Damage] | None, progress: bool | None) -> Yields:
    """Every member's yield, as one Yields."""
    (parts,) = run_chunks(paths, selection, damage, progress)  # one chunk; running it out records the damage
    return parts


class _Progress:
    """A rich progress bar over compressed bytes, or nothing."""

    def __init__(self, show: bool, total: int):
        self._bar = None
        if show:
            from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

            self._bar = Progress("loading trace", BarColumn(), DownloadColumn(), TimeRemainingColumn(), transient=True)
            self._task = self._bar.add_task("load", total=total)

    def __enter__(self):
        if self._bar:
            self._bar.start()
        return self

    def advance(self, size: int) -> None:
        """Another member done."""
        if self._bar:
            self._bar.advance(self._task, size)

    def __exit__(self, *exc) -> None:
        if self._bar:
            self._bar.stop()


def read_lines(path: Path, damage: list[Damage] | None = None) -> pl.DataFrame:
    """Every JSON line (metadata and our own records; event lines excluded) of one trace."""
    return run_all([Path(path)], Selection(pids=frozenset()), damage, False).all_lines()

