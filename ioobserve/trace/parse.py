"""One member's text to Polars frames: a fast path for our event lines, JSON for the rest.

Our event members hold lines of one layer and one shape (ioobserve.trace.lines), so the
first line says where every value of every line is: with the JSON punctuation between values
(, { }) turned into one separator, a member reads as columns with Polars' CSV reader.
Everything else (metadata, our own records, older traces, traces written by DFTracer) goes
through the NDJSON reader with a declared schema: inferring it from the first rows would
silently drop keys that appear only later. Fields an event line leaves out get their
defaults (lines.FIELD_DEFAULTS) on both paths.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from functools import lru_cache

import polars as pl

from ioobserve.trace.lines import (
    CAT_META,
    EVENT_FIELDS,
    FIELD_DEFAULTS,
    PH_COMPLETE,
    PH_METADATA,
    TOP_FIELDS,
    TOP_KEYS,
    literal_tokens,
)

RAW_SCHEMA: dict[str, pl.DataType] = {"cat": pl.Categorical, **dict(EVENT_FIELDS)}
"""Event fields as written (plus the layer), before conversion to ioobserve.schema."""
_ARG_FIELDS = [key for key, _ in EVENT_FIELDS if key not in TOP_FIELDS]
_SEPARATOR = b":"
_TO_SEPARATOR = bytes.maketrans(b",{}", _SEPARATOR * 3)

_ARGS = pl.Struct({
    "hhash": pl.String, "name": pl.String, "value": pl.String, "fhash": pl.String, "fhash2": pl.String,
    "precision": pl.String,  # the start record's: "us" (ts/dur whole µs unless tns/dns say more) or "ns"
    "ret": pl.Int64, "count": pl.UInt64, "offset": pl.Int64, "fd": pl.Int32, "errno": pl.Int32, "arg": pl.UInt64,
    "uid": pl.UInt32, "cgroup": pl.UInt64, "evflags": pl.UInt16, "tns": pl.UInt16, "dns": pl.UInt16, "pts": pl.UInt64,
    "pystack": pl.UInt32, "pyframe": pl.UInt16, "module": pl.String,
    "dev": pl.UInt64, "ino": pl.UInt64, "ppid": pl.UInt32, "comm": pl.String, "exe": pl.String,
    "cmdline": pl.List(pl.String),
    "job": pl.String, "step": pl.String, "task": pl.Int32, "unit": pl.String, "container": pl.String, "pod": pl.String,
    "since": pl.UInt64, "rank": pl.Int32, "local_rank": pl.Int32, "world_size": pl.Int32, "worker": pl.Int32,
    "tags": pl.List(pl.Struct({"key": pl.String, "value": pl.String})),
    # PS records: a Python stack
    "stack": pl.UInt32, "frames": pl.List(pl.Struct({"function": pl.String, "file": pl.String, "line": pl.Int32})),
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


class MalformedMember(Exception):
    """A member inflated fine but its lines are not trace lines."""


@dataclass(frozen=True)
class Shape:
    """The layout of a member of our event lines: their layer and the fields present."""

    layer: str
    fields: tuple[str, ...]


def event_shape(text: bytes) -> Shape | None:
    """The shape of a member of our event lines (from its first line), else None."""
    try:
        first = json.loads(text[: text.find(b"\n")])
    except ValueError:
        return None
    if not isinstance(first, dict) or tuple(first) != TOP_KEYS or first["ph"] != PH_COMPLETE:
        return None
    args = first["args"]
    layer = first["cat"]
    if not isinstance(args, dict) or not isinstance(layer, str) or layer == CAT_META:
        return None
    fields = (*TOP_FIELDS, *args)
    if [key for key in _ARG_FIELDS if key in args] != list(args):
        return None  # keys we do not write, or not in our order
    if any(value is None for value in args.values()):
        return None  # an older trace's template line: read as JSON
    return Shape(layer, fields)


@lru_cache(maxsize=256)
def _columns(shape: Shape) -> tuple[int, dict[str, tuple[int, pl.DataType]]]:
    """(separators per line, field -> (column, type)) of a shape's lines read as columns."""
    tokens = literal_tokens(shape.layer, list(shape.fields))
    types = dict(EVENT_FIELDS)
    at, where = 0, {}
    for token, key in zip(tokens, shape.fields):
        at += token.encode().translate(_TO_SEPARATOR).count(_SEPARATOR)
        where[key] = (at, types[key])
    at += tokens[-1].encode().translate(_TO_SEPARATOR).count(_SEPARATOR)
    return at, where


def shape_events(text: bytes, shape: Shape, keys: list[str] | None = None) -> pl.DataFrame:
    """Event fields (RAW_SCHEMA, or just `keys`) of a member of our event lines of one shape."""
    separators, where = _columns(shape)
    columnar = text.translate(_TO_SEPARATOR)
    schema = {f"_{i}": pl.String for i in range(separators + 1)}
    for key, (column, dtype) in where.items():
        schema[f"_{column}"] = dtype
    wanted = [key for key in RAW_SCHEMA if keys is None or key in keys]
    present = [key for key in wanted if key in where]
    try:
        frame = pl.scan_csv(
            io.BytesIO(columnar), separator=":", has_header=False, quote_char='"', schema=schema,
        ).select(pl.col(f"_{where[key][0]}").alias(key) for key in present).collect()
    except pl.exceptions.PolarsError as exc:
        raise MalformedMember(str(exc).splitlines()[0]) from None
    # Checked once read, by the lines the reader found: counting them too took a third of the time.
    if columnar.count(_SEPARATOR) != separators * frame.height or not columnar.endswith(b"\n"):
        raise MalformedMember("its lines are not all of its first line's shape")
    frame = frame.with_columns(pl.lit(shape.layer).alias("cat"))
    return with_defaults(frame, wanted)


def with_defaults(frame: pl.DataFrame, keys: list[str] | None = None) -> pl.DataFrame:
    """The raw event columns `keys` (all of RAW_SCHEMA if None), absent ones at their
    default, nulls of fields with a default filled in."""
    columns = []
    for key in [key for key in RAW_SCHEMA if keys is None or key in keys]:
        dtype = RAW_SCHEMA[key]
        default = FIELD_DEFAULTS.get(key)
        value = pl.col(key) if key in frame.columns else pl.lit(None, dtype)
        if default is not None:
            value = value.fill_null(default)
        columns.append(value.cast(dtype).alias(key))
    return frame.select(columns)


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
    return with_defaults(events.select(
        pl.col("cat"), pl.col("name"), pl.col("pid"), pl.col("tid"), pl.col("ts"), pl.col("dur"),
        args.field("fhash"), args.field("fhash2"), args.field("ret"), args.field("count"), args.field("offset"),
        args.field("fd"),
        # DFTracer keeps open flags and creation modes as "flags" and "mode"; ours as "arg".
        pl.coalesce(args.field("arg"), args.field("flags").cast(pl.UInt64), args.field("mode").cast(pl.UInt64)).alias("arg"),
        args.field("uid"), args.field("cgroup"), args.field("evflags"), args.field("tns"), args.field("dns"),
        args.field("pts"), args.field("pystack"), args.field("pyframe"), args.field("module"),
    ))


def metadata(lines: pl.DataFrame, name: str) -> pl.DataFrame:
    """Metadata records (FH, PR, ...) among JSON lines: pid plus their args unnested."""
    return lines.filter((pl.col("ph") == PH_METADATA) & (pl.col("name") == name)).select("pid", "args").unnest("args")
