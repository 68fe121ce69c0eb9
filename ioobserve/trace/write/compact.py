"""Recompressing a closed trace smaller: the same lines in fewer, larger members at the
trace's deflate level, with the same index semantics.

While recording, the writer appends small members (one per flush, layer and line shape), at a
fast level while it is behind, so that a killed recorder loses at most a second; a part written
partly in a hurry is recompressed once closed (ioobserve.trace.write.finish). Once the file is closed, the
members of consecutive flushes are merged (metadata into one member, events into one member
per shape) up to GROUP_BYTES of text, cut only at seams in time as the reader's chunks are, and
deflated again at COMPACT_LEVEL. The result replaces the trace and its index only if the trace
did not change meanwhile; a trace without a usable index, or with a damaged member, is left
as it is.
"""

from __future__ import annotations

import mmap
import os
import tempfile
from pathlib import Path

import deflate

from ioobserve.trace.members import GZIP_LEVEL, inflate_member, KIND_EVENTS, KIND_META, MemberEntry, index_line, index_path, read_index
from ioobserve.trace.read import parse

COMPACT_LEVEL = GZIP_LEVEL  # level 9 is 11% smaller for 4.7x the CPU (ioobserve.trace.members)
GROUP_BYTES = 32 << 20  # text of consecutive flushes merged into one group of members


class _Member:
    """A member being assembled: its texts and the entries they came from."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.texts: list[bytes] = []
        self.entries: list[MemberEntry] = []

    def add(self, text: bytes, entry: MemberEntry) -> None:
        self.texts.append(text)
        self.entries.append(entry)

    def entry(self, offset: int, size: int) -> MemberEntry:
        """The merged member's index entry (the sums and extremes of its parts')."""
        entries = self.entries
        firsts = [e.ts_min for e in entries if e.ts_min is not None]
        lasts = [e.ts_max for e in entries if e.ts_max is not None]
        return MemberEntry(
            offset, size, sum(e.raw for e in entries), sum(e.lines for e in entries), sum(e.events for e in entries),
            min(firsts) if firsts else None, max(lasts) if lasts else None,
            sorted({pid for e in entries for pid in e.pids}), self.kind,
        )


def compact(trace: Path) -> bool:
    """Rewrite a closed trace with merged members at COMPACT_LEVEL; whether it was rewritten.
    Memory stays about one group of text."""
    trace = Path(trace)
    with open(trace, "rb") as handle:
        before = os.fstat(handle.fileno())
        if before.st_size == 0:
            return False
        data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    entries = read_index(trace)
    if entries is None or len(entries) < 2 or entries[-1].offset + entries[-1].size != len(data):
        return False
    written = _write(trace, data, entries)
    if written is None:
        return False
    temp_trace, temp_index = written
    try:
        now = os.stat(trace)
        if (now.st_ino, now.st_size, now.st_mtime_ns) != (before.st_ino, before.st_size, before.st_mtime_ns):
            return False  # it changed while we read: the new file would lose that
        os.replace(temp_trace, trace)
        os.replace(temp_index, index_path(trace))  # between the two, readers find the index stale and walk the file
    finally:
        for temp in written:
            Path(temp).unlink(missing_ok=True)
    return True


def _groups(entries: list[MemberEntry]):
    """Runs of consecutive members of about GROUP_BYTES of text, cut only where no event
    before the cut is later than an event after it."""
    group, size, last = [], 0, None
    for entry in entries:
        seam = entry.ts_min is not None and last is not None and entry.ts_min >= last
        if group and size >= GROUP_BYTES and seam:
            yield group
            group, size, last = [], 0, None
        group.append(entry)
        size += entry.raw
        if entry.ts_max is not None:
            last = entry.ts_max if last is None else max(last, entry.ts_max)
    if group:
        yield group


def _merged(group: list[MemberEntry], data) -> list[_Member]:
    """A group's members inflated and merged: its metadata first, then one member per line
    shape (raises deflate.DeflateError or ValueError for a damaged member)."""
    meta = _Member(KIND_META)
    by_shape: dict[parse.Shape, _Member] = {}
    for entry in group:
        text = inflate_member(data[entry.offset:entry.offset + entry.size])
        shape = parse.event_shape(text) if entry.kind == KIND_EVENTS else None
        if shape is None:
            meta.add(text, entry)
        else:
            by_shape.setdefault(shape, _Member(KIND_EVENTS)).add(text, entry)
    return [member for member in (meta, *by_shape.values()) if member.texts]


def _write(trace: Path, data, entries: list[MemberEntry]) -> tuple[str, str] | None:
    """The new trace and index as private temp files beside the trace (None if it cannot, or
    if a member is damaged: the reader reports that, from the file as it is)."""
    try:
        fd, temp_trace = tempfile.mkstemp(prefix=".ioo-compact-", dir=trace.parent)  # 0600, new
    except OSError:
        return None
    lines = []
    try:
        with os.fdopen(fd, "wb") as handle:
            offset = 0
            for group in _groups(entries):
                for member in _merged(group, data):
                    packed = deflate.gzip_compress(b"".join(member.texts), COMPACT_LEVEL)
                    handle.write(packed)
                    lines.append(index_line(member.entry(offset, len(packed))))
                    offset += len(packed)
            handle.flush()
            os.fsync(handle.fileno())
        fd, temp_index = tempfile.mkstemp(prefix=".ioo-compact-", dir=trace.parent)
        with os.fdopen(fd, "wb") as handle:
            handle.write(b"".join(lines))
            handle.flush()
            os.fsync(handle.fileno())
    except (OSError, deflate.DeflateError, ValueError):
        Path(temp_trace).unlink(missing_ok=True)
        return None
    return temp_trace, temp_index
