"""Reading a trace's gzip members one by one, so damage costs only the damaged member.

The writer appends one complete member per flush. A recorder killed mid-write leaves a
truncated last member; a damaged disk block corrupts one in the middle. Every intact member
still loads; what was skipped is counted.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from pathlib import Path

import deflate  # libdeflate: at level 6 smaller than zlib-ng's level 2 and as fast (bench/README.md)
from isal import isal_zlib

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
