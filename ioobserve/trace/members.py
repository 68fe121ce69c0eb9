"""A trace's gzip members, and their index.

Members: the writer appends one complete member per flush. A recorder killed mid-write leaves
a truncated last member; a damaged disk block corrupts one in the middle. Reading them one by
one, every intact member still loads; what was skipped is counted.

The member index, a sidecar `<trace>.ioidx`: one JSON line per member with its byte offset and
size, kind ("events": our event lines of one shape; "json": anything else), uncompressed
bytes, lines, events, first and last event time (ns) and the pids present, so a reader can
split work and skip members by time or pid without inflating them. The writer appends a line
per flush; `ioobserve index` rebuilds it from the trace. An index that does not end where the
trace ends is stale.
"""

from __future__ import annotations

import json
import os
import tempfile
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

import deflate  # libdeflate: at level 6 smaller than zlib-ng's level 2 and as fast (bench/README.md)
import numpy as np
from isal import isal_zlib

from ioobserve.trace.read import parse

GZIP_MAGIC = b"\x1f\x8b\x08"
# The deflate level of a trace's members, written and recompressed: on the torch job's trace
# (bench/compression.py, issue 46) libdeflate's level 6 costs 0.64 µs/event for 12.0 B/event,
# level 9 3.0 µs for 10.7 B and level 1 0.33 µs for 14.6 B.
GZIP_LEVEL = 6
# When the writer is behind: ISA-L's igzip at level 2, on the torch job's trace 0.13 µs/event
# for 15.0 B/event and on a flood's 0.05 µs for 2.9 B: 2.4x and 3x less CPU than libdeflate's
# level 1 for 3% and 17% more bytes (and the finisher recompresses what was hurried).
HURRIED_LEVEL = 2


# The most text one member may inflate to: the writer's hold about FLUSH_BYTES (8 MiB), the
# finisher's merged ones up to compact.GROUP_BYTES (32 MiB) and a little more. A member
# claiming more is not ours and not DFTracer's: a compression bomb (1 MB of deflate can say
# 1 GB), skipped as damage before a byte of it is inflated.
MAX_MEMBER_TEXT = 64 << 20


class OversizedMember(ValueError):
    """A member that would inflate past MAX_MEMBER_TEXT."""


def inflate_member(data) -> bytes:
    """The text of one complete gzip member (bytes-like), inflated into exactly the size its
    trailer states, which must be at most MAX_MEMBER_TEXT: OversizedMember if more; ValueError
    or deflate.DeflateError if the member is damaged (including a text longer than stated)."""
    if len(data) < 18:
        raise ValueError("too short for a gzip member")
    stated = int.from_bytes(bytes(data[-4:]), "little")  # ISIZE: the text's length mod 2^32
    if stated > MAX_MEMBER_TEXT:
        raise OversizedMember(f"it would inflate to {stated / (1 << 20):,.0f} MiB, past the {MAX_MEMBER_TEXT >> 20} MiB a member may hold")
    return deflate.gzip_decompress(data)


def gzip_member(data, hurried: bool = False) -> bytes:
    """One complete, standard gzip member holding `data` (bytes-like): libdeflate at
    GZIP_LEVEL, or ISA-L at HURRIED_LEVEL when the writer is behind. Both release the GIL."""
    if hurried:
        return isal_zlib.compress(data, HURRIED_LEVEL, wbits=31)  # wbits 31: a gzip member
    return deflate.gzip_compress(data, GZIP_LEVEL)


@dataclass
class Damage:
    """What could not be read from one file."""

    path: Path
    members_lost: int = 0
    truncated_tail: bool = False
    notes: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.members_lost or self.truncated_tail)

    def describe(self) -> str:
        """One line for the user."""
        parts = [f"{self.members_lost} damaged member(s) skipped"] if self.members_lost else []
        if self.truncated_tail:
            parts.append("the last member is incomplete (recorder killed while writing?)")
        return f"{self.path}: " + "; ".join(parts)


class NotATrace(Exception):
    """The file does not start like a gzip trace at all."""


def iter_members(path: Path, damage: Damage):
    """Yield (offset, compressed size, text) for each intact member; damage is recorded."""
    data = memoryview(Path(path).read_bytes())
    if len(data) and bytes(data[:3]) != GZIP_MAGIC:
        raise NotATrace(f"{path}: not a gzip trace")
    pos = 0
    while pos < len(data):
        member = zlib.decompressobj(31)
        try:
            text = member.decompress(data[pos:], MAX_MEMBER_TEXT + 1)
            if len(text) > MAX_MEMBER_TEXT:  # a bomb: found to its end, its text dropped as it comes
                text = None
                while member.unconsumed_tail and not member.eof:
                    member.decompress(member.unconsumed_tail, 1 << 20)
        except zlib.error:
            damage.members_lost += 1
            pos = _next_member(data, pos + 1)
            continue
        if not member.eof:
            damage.truncated_tail = True
            return
        end = len(data) - len(member.unused_data)
        if text is None:
            damage.members_lost += 1
            damage.notes.append(f"the member at byte {pos:,} inflates past the {MAX_MEMBER_TEXT >> 20} MiB a member may hold")
            pos = end
            continue
        # A member always ends on a line boundary; drop a partial line defensively.
        yield pos, end - pos, text if text.endswith(b"\n") or not text else text[: text.rfind(b"\n") + 1]
        pos = end


def intact_text(path: Path) -> tuple[bytes, Damage]:
    """The decompressed lines of every intact member, and what was skipped."""
    damage = Damage(Path(path))
    return b"".join(text for _, _, text in iter_members(path, damage)), damage


def _next_member(data: memoryview, start: int) -> int:
    """Offset of the next gzip header at or after `start`, or the end of the data."""
    found = bytes(data[start:]).find(GZIP_MAGIC)
    return len(data) if found < 0 else start + found


# The member index.

SUFFIX = ".ioidx"
KIND_EVENTS = "events"
KIND_META = "json"


@dataclass
class MemberEntry:
    """One gzip member of a trace."""

    offset: int
    size: int
    raw: int
    lines: int
    events: int
    ts_min: int | None
    ts_max: int | None
    pids: list[int] = field(default_factory=list)
    kind: str = KIND_META


class MemberStats:
    """Accumulates what goes into the member being buffered."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.raw = self.lines = self.events = 0
        self.ts_min: int | None = None
        self.ts_max: int | None = None
        self.pids: set[int] = set()

    def add_text(self, text: bytes, lines: int | None = None) -> None:
        """Lines of any kind (`lines` when the caller knows how many)."""
        self.raw += len(text)
        self.lines += text.count(b"\n") if lines is None else lines

    def add_events(self, ts: np.ndarray, pids: np.ndarray) -> None:
        """A batch of events in this member: their times (ns, as written) and pids."""
        if not len(ts):
            return
        self.events += len(ts)
        ts_min, ts_max = int(ts.min()), int(ts.max())
        self.ts_min = ts_min if self.ts_min is None else min(self.ts_min, ts_min)
        self.ts_max = ts_max if self.ts_max is None else max(self.ts_max, ts_max)
        self.pids.update(np.unique(pids).tolist())

    def entry(self, offset: int, size: int) -> MemberEntry:
        """The finished member's index entry."""
        return MemberEntry(offset, size, self.raw, self.lines, self.events, self.ts_min, self.ts_max, sorted(self.pids), self.kind)


def index_path(trace: Path) -> Path:
    """Where a trace's index lives."""
    trace = Path(trace)
    return trace.with_name(trace.name + SUFFIX)


def index_line(entry: MemberEntry) -> bytes:
    """A member's line in the index."""
    return json.dumps(asdict(entry), separators=(",", ":")).encode() + b"\n"


def read_index(trace: Path, size: int | None = None) -> list[MemberEntry] | None:
    """The trace's index, or None if it is missing, unreadable or stale. `size`: the bytes of
    the trace a reader holds (mapped earlier): a writer may have appended members since, and
    their entries are left out."""
    trace = Path(trace)
    try:
        raw = index_path(trace).read_bytes()
        if size is None:
            return parse_index(raw, trace.stat().st_size)
    except OSError:
        return None
    entries = parse_index(raw, None)
    if entries is None:
        return None
    held = [e for e in entries if e.offset + e.size <= size]
    return held if (held[-1].offset + held[-1].size if held else 0) == size else None


def parse_index(raw: bytes, trace_size: int | None) -> list[MemberEntry] | None:
    """An index's entries, or None if they are unreadable or do not end at `trace_size`
    (None: wherever they end)."""
    try:
        entries = [MemberEntry(**json.loads(line)) for line in raw.splitlines() if line.strip()]
    except (ValueError, TypeError):
        return None
    end = entries[-1].offset + entries[-1].size if entries else 0
    return entries if trace_size is None or end == trace_size else None


def member_entry(offset: int, size: int, text: bytes) -> MemberEntry:
    """The index entry of one member, from its text."""
    shape = parse.event_shape(text)
    if shape is not None:
        kind, events = KIND_EVENTS, parse.shape_events(text, shape, ["pid", "ts", "tns"])
    else:
        kind, events = KIND_META, parse.json_events(parse.json_lines(text))
    stats = MemberStats(kind)
    stats.add_text(text)
    if events.height:
        ts = events.get_column("ts") * 1000 + events.get_column("tns").fill_null(0)
        stats.events, stats.ts_min, stats.ts_max = events.height, ts.min(), ts.max()
        stats.pids = set(events.get_column("pid").unique().to_list())
    return stats.entry(offset, size)


def build_index(trace: Path) -> tuple[list[MemberEntry], Damage]:
    """Index a trace by reading every member (intact members only; malformed ones count as damage)."""
    damage = Damage(Path(trace))
    entries = []
    for offset, size, text in iter_members(trace, damage):
        try:
            entries.append(member_entry(offset, size, text))
        except parse.MalformedMember:
            damage.members_lost += 1
    return entries, damage


def write_index(trace: Path, entries: list[MemberEntry]) -> Path:
    """Replace a trace's index atomically (a private temp file renamed over it)."""
    target = index_path(trace)
    fd, temp = tempfile.mkstemp(prefix=".ioidx-", dir=target.parent)  # mkstemp creates 0600
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(b"".join(index_line(e) for e in entries))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return target
