"""Reading a trace's gzip members one by one, so damage costs only the damaged member.

The writer appends one complete member per flush. A recorder killed mid-write leaves a
truncated last member; a damaged disk block corrupts one in the middle. Every intact member
still loads; what was skipped is counted.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from pathlib import Path

GZIP_MAGIC = b"\x1f\x8b\x08"
# The deflate level of a trace's members, written and recompressed: on the torch job's trace
# (bench/compression.py) libdeflate's level 6 costs 0.65 µs/event for 11.9 B/event, level 9
# 3.1 µs for 10.6 B and level 1 0.33 µs for 14.6 B.
GZIP_LEVEL = 6


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
            text = member.decompress(data[pos:])
        except zlib.error:
            damage.members_lost += 1
            pos = _next_member(data, pos + 1)
            continue
        if not member.eof:
            damage.truncated_tail = True
            return
        end = len(data) - len(member.unused_data)
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
