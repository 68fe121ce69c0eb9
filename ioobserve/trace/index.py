"""The member index: a sidecar `<trace>.ioidx` describing each gzip member of a trace.

One JSON line per member: byte offset and size, kind ("events": our event lines of one shape;
"json": anything else), uncompressed bytes, lines, events, first and last event time (ns)
and the pids present, so a reader can split work and skip members by
time or pid without inflating them. The writer appends a line per flush; `ioobserve index`
rebuilds it from the trace. An index that does not end where the trace ends is stale.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ioobserve.trace.members import Damage, iter_members
from ioobserve.trace.read import parse

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
