"""Application tags without a library: a program names its phase by touching a path.

`os.access("/run/ioobserve/tag/epoch=3,phase=train", os.F_OK)` costs about a microsecond,
creates nothing, and is a harmless failed lookup when ioobserve is not running. The
syscall probes see the path argument; user space turns it into the tags of that process
from then on, inherited by children it forks later. `key=` with no value removes a key.
"""

from __future__ import annotations

import re

TAG_DIR = "/run/ioobserve/tag/"
MAX_TAGS = 32  # per process: more is refused (counted as malformed)
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
_VALUE = re.compile(r"[^,\s]{0,256}")


def tag_text(path: str | None) -> str | None:
    """The tag line a path argument carries, or None if it is not a tag path."""
    if path is None or not path.startswith(TAG_DIR):
        return None
    return path[len(TAG_DIR) :]


def parse_tags(text: str) -> dict[str, str | None] | None:
    """`key=value[,key=value...]` to {key: value, or None to remove}; None if malformed."""
    updates: dict[str, str | None] = {}
    for item in text.split(","):
        key, sep, value = item.strip().partition("=")
        if not sep or not _KEY.fullmatch(key) or not _VALUE.fullmatch(value):
            return None
        updates[key] = value or None
    return updates


def apply_tags(current: tuple[tuple[str, str], ...], updates: dict[str, str | None]) -> tuple[tuple[str, str], ...] | None:
    """The tags after `updates` (sorted by key), or None if that would exceed MAX_TAGS."""
    tags = dict(current)
    for key, value in updates.items():
        if value is None:
            tags.pop(key, None)
        else:
            tags[key] = value
    return tuple(sorted(tags.items())) if len(tags) <= MAX_TAGS else None
