"""One member's text to Polars frames: a fast path for our event lines, JSON for the rest.

Our event lines follow one template (ioobserve.trace.lines) and are read as space-separated
columns. Everything else (metadata, our own records, traces written by DFTracer) goes through
the NDJSON reader with a declared schema: inferring it from the first rows would silently
drop keys that appear only later.
"""

from __future__ import annotations

import io
import re

import polars as pl

from ioobserve.trace.lines import CAT_META, EVENT_FIELDS, PH_COMPLETE, PH_METADATA, template_tokens

RAW_SCHEMA: dict[str, pl.DataType] = {"cat": pl.Categorical, **{key: dtype for key, _, dtype in EVENT_FIELDS}}
"""Event fields as written (plus the layer), before conversion to ioobserve.schema."""

_ARGS = pl.Struct({
    "hhash": pl.String, "name": pl.String, "value": pl.String, "fhash": pl.String, "fhash2": pl.String,
    "ret": pl.Int64, "count": pl.UInt64, "offset": pl.Int64, "fd": pl.Int32, "errno": pl.Int32, "arg": pl.UInt64,
    "uid": pl.UInt32, "cgroup": pl.UInt64, "evflags": pl.UInt16, "tns": pl.UInt16, "dns": pl.UInt16, "pts": pl.UInt64,
    "pystack": pl.UInt32, "module": pl.String,
    "dev": pl.UInt64, "ino": pl.UInt64, "ppid": pl.UInt32, "comm": pl.String, "exe": pl.String,
    "cmdline": pl.List(pl.String),
    "job": pl.String, "step": pl.String, "task": pl.Int32, "unit": pl.String, "container": pl.String, "pod": pl.String,
    "since": pl.UInt64, "rank": pl.Int32, "local_rank": pl.Int32, "world_size": pl.Int32, "worker": pl.Int32,
    "tags": pl.List(pl.Struct({"key": pl.String, "value": pl.String})),
    # PS records: a Python stack
    "stack": pl.UInt32, "frames": pl.List(pl.Struct({"function": pl.String, "file": pl.String, "line": pl.Int32,
                                                  "call": pl.UInt64})),
    "truncated": pl.Boolean,
    # TS records: an exited process's traced calls and bytes beside the kernel's accounting
    **dict.fromkeys(("read_syscalls", "write_syscalls", "read_char", "write_char", "read_bytes", "write_bytes",
                     "blkio_count", "blkio_delay_total", "traced_reads", "traced_writes", "traced_read_bytes",
                     "traced_write_bytes"), pl.UInt64),
    "agrees": pl.Boolean,
    "flags": pl.Int64, "mode": pl.Int64,  # DFTracer's open/mkdir arguments
})
LINE_SCHEMA: dict[str, pl.DataType] = {
    "id": pl.Int64, "name": pl.String, "cat": pl.String, "type": pl.Int64, "pid": pl.UInt32, "tid": pl.UInt32,
    "ts": pl.Int64, "dur": pl.Int64, "ph": pl.Int64, "args": _ARGS,
}
# The template with placeholders, to recognize a member's first line and find its layer.
_TOKENS = template_tokens("LAYER")
_CSV_SCHEMA: dict[str, pl.DataType] = {}
for _index, (_key, _, _dtype) in enumerate(EVENT_FIELDS):
    _CSV_SCHEMA[f"_{_index}"] = pl.String  # the JSON between values, never materialized
    _CSV_SCHEMA[_key] = _dtype
_CSV_SCHEMA["_end"] = pl.String


class MalformedMember(Exception):
    """A member inflated fine but its lines are not trace lines."""


def _literal_pattern(expected: str) -> re.Pattern:
    """A template literal as a pattern: the layer placeholder captures, the layer's type number varies."""
    pattern = re.escape(expected).replace("LAYER", '([^"]+)')
    return re.compile(re.sub(r'"type":\d+', lambda _: '"type":\\d+', pattern))


_PATTERNS = [_literal_pattern(token) for token in _TOKENS]
_LAYER_TOKEN = next(i for i, token in enumerate(_TOKENS) if "LAYER" in token)


def event_layer(text: bytes) -> str | None:
    """The layer of a member of template event lines (from its first line), else None."""
    first = text[: text.find(b"\n")].decode("utf-8", "replace").split(" ")
    if len(first) != 2 * len(EVENT_FIELDS) + 1:
        return None
    found = [pattern.fullmatch(literal) for pattern, literal in zip(_PATTERNS, first[0::2], strict=True)]
    return found[_LAYER_TOKEN].group(1) if all(found) else None


def template_events(text: bytes, layer: str, keys: list[str] | None = None) -> pl.DataFrame:
    """Event fields (RAW_SCHEMA, or just `keys`) of a member of one layer's template event lines."""
    wanted = [key for key, _, _ in EVENT_FIELDS if keys is None or key in keys]
    try:
        frame = pl.scan_csv(
            io.BytesIO(text), separator=" ", has_header=False, quote_char='"', null_values=["null"], schema=_CSV_SCHEMA
        ).select(wanted).collect()
    except pl.exceptions.PolarsError as exc:
        raise MalformedMember(str(exc).splitlines()[0]) from None
    return frame.with_columns(pl.lit(layer, pl.Categorical).alias("cat")) if keys is None or "cat" in keys else frame


def json_lines(text: bytes) -> pl.DataFrame:
    """Every line of a member as LINE_SCHEMA columns."""
    if not text.strip():
        return pl.DataFrame(schema=LINE_SCHEMA)
    try:
        return pl.read_ndjson(io.BytesIO(text), schema=LINE_SCHEMA)
    except pl.exceptions.PolarsError as exc:
        raise MalformedMember(str(exc).splitlines()[0]) from None


def json_events(lines: pl.DataFrame) -> pl.DataFrame:
    """The I/O events among JSON lines (ours or DFTracer's) as RAW_SCHEMA columns."""
    args = pl.col("args").struct
    events = lines.filter((pl.col("ph") == PH_COMPLETE) & (pl.col("cat") != CAT_META))
    return events.select(
        pl.col("cat"), pl.col("name"), pl.col("pid"), pl.col("tid"), pl.col("ts"), pl.col("dur"),
        args.field("fhash"), args.field("fhash2"), args.field("ret"), args.field("count"), args.field("offset"),
        args.field("fd"),
        # DFTracer keeps open flags and creation modes as "flags" and "mode"; ours as "arg".
        pl.coalesce(args.field("arg"), args.field("flags").cast(pl.UInt64), args.field("mode").cast(pl.UInt64)).alias("arg"),
        args.field("uid"), args.field("cgroup"), args.field("evflags"), args.field("tns"), args.field("dns"),
        args.field("pts"), args.field("pystack"), args.field("module"),
    ).cast(RAW_SCHEMA)


def metadata(lines: pl.DataFrame, name: str) -> pl.DataFrame:
    """Metadata records (FH, PR, ...) among JSON lines: pid plus their args unnested."""
    return lines.filter((pl.col("ph") == PH_METADATA) & (pl.col("name") == name)).select("pid", "args").unnest("args")
