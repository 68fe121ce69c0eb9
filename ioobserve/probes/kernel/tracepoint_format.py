"""Field offsets of classic tracepoints, from their tracefs format files, as -D flags.

The page-cache probes read the filemap and readahead tracepoints' records: their fields
move between kernels (readahead's were reshaped in 6.x), their format files say where.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_FIELD = re.compile(r"^\s*field:(?P<decl>[^;]+);\s*offset:(?P<offset>\d+);\s*size:(?P<size>\d+);", re.MULTILINE)


def parse_format(text: str) -> dict[str, tuple[int, int]]:
    """{field name: (offset, size)} of one format file's text."""
    fields = {}
    for match in _FIELD.finditer(text):
        name = re.sub(r"\[.*\]$", "", match["decl"].split()[-1])
        fields[name] = (int(match["offset"]), int(match["size"]))
    return fields


@dataclass(frozen=True)
class TracepointFields:
    """The fields one probe reads from one tracepoint: macro prefix, event, {field: size}."""

    macro: str
    events: tuple[str, ...]  # "system/name", all with the same fields at the same offsets
    fields: dict[str, int]  # field -> the size the probe reads (0: optional, any size)

    def offsets(self, tracefs: Path | None) -> dict[str, int] | None:
        """{TP_<macro>_<FIELD>: offset}, -1 for an optional field the kernel lacks; None if an
        event is missing or a required field is missing or of another size."""
        if tracefs is None:
            return None
        found: dict[str, int] | None = None
        for event in self.events:
            try:
                fields = parse_format((tracefs / "events" / event / "format").read_text())
            except OSError:
                return None
            offsets = {}
            for name, size in self.fields.items():
                where = fields.get(name)
                if where is None or (size and where[1] != size):
                    if size:
                        return None
                    offsets[f"TP_{self.macro}_{name.upper()}"] = -1
                else:
                    offsets[f"TP_{self.macro}_{name.upper()}"] = where[0]
            if found is not None and offsets != found:
                return None
            found = offsets
        return found


FILEMAP_ADD = TracepointFields("FILEMAP_ADD", ("filemap/mm_filemap_add_to_page_cache",),
                               {"i_ino": 8, "index": 8, "s_dev": 4, "order": 0})
READAHEAD = TracepointFields("READAHEAD", ("readahead/page_cache_sync_ra", "readahead/page_cache_async_ra"),
                             {"i_ino": 8, "s_dev": 4, "index": 8, "req_count": 8})


def absent_flags(spec: TracepointFields) -> dict[str, int]:
    """-1 for every field: the program compiles, and is never attached."""
    return {f"TP_{spec.macro}_{name.upper()}": -1 for name in spec.fields}
