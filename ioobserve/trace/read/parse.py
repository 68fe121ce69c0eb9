"""One member's text to Polars frames: a fast path for our event lines, JSON for the rest.

Our event members hold lines of one layer and one shape (ioobserve.trace.lines), so the
first line says what text lies between the values of every line: the compiled core reads a
member as columns, checking that text on every line (ioobserve/csrc/parse.c).
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

import numpy as np
import polars as pl

from ioobserve import _core
from ioobserve.trace.lines import (
    CAT_META,
    EVENT_FIELDS,
    FIELD_DEFAULTS,
    LAYER_KEYS,
    PH_COMPLETE,
    PH_METADATA,
    TOP_FIELDS,
    TOP_KEYS,
    literal_tokens,
)

RAW_SCHEMA: dict[str, pl.DataType] = {"cat": pl.Categorical, **dict(EVENT_FIELDS)}
"""Event fields as written (plus the layer), before conversion to ioobserve.data.schema."""
_ARG_FIELDS = [key for key, _ in EVENT_FIELDS if key not in TOP_FIELDS]

_ARGS = pl.Struct({
    "hhash": pl.String, "name": pl.String, "value": pl.String, "fhash": pl.String, "fhash2": pl.String,
    "precision": pl.String,  # the start record's: "us" (ts/dur whole µs unless tns/dns say more) or "ns"
    "ret": pl.Int64, "count": pl.UInt64, "offset": pl.Int64, "fd": pl.Int32, "errno": pl.Int32, "arg": pl.UInt64,
    "uid": pl.UInt32, "cgroup": pl.UInt64, "evflags": pl.UInt16, "tns": pl.UInt16, "dns": pl.UInt16, "pts": pl.UInt64,
    "pystack": pl.UInt32, "pyframe": pl.UInt16, "module": pl.String, "request_id": pl.String, "status": pl.UInt16,
    "dev": pl.UInt64, "ino": pl.UInt64, "ppid": pl.UInt32, "comm": pl.String, "exe": pl.String,
    "cmdline": pl.List(pl.String),
    "job": pl.String, "step": pl.String, "task": pl.Int32, "unit": pl.String, "container": pl.String, "pod": pl.String,
    "namespace": pl.String, "pod_name": pl.String, "container_name": pl.String,
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
    # throttle records: flood control held a cgroup's events back (ioobserve.collect.throttles)
    "throttle": pl.String, "cgroup_id": pl.UInt64, "cgroup_path": pl.String, "dropped": pl.UInt64, "limit": pl.UInt64,
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
    renamed = {written: key for key, written in LAYER_KEYS.get(layer, {}).items()}
    fields = (*TOP_FIELDS, *(renamed.get(key, key) for key in args))
    if [key for key in _ARG_FIELDS if key in fields] != list(fields[len(TOP_FIELDS):]):
        return None  # keys we do not write, or not in our order
    if any(value is None for value in args.values()):
        return None  # an older trace's template line: read as JSON
    return Shape(layer, fields)


_KINDS = {pl.UInt16: "H", pl.UInt32: "I", pl.UInt64: "Q", pl.Int32: "i", pl.Int64: "q",
          pl.Categorical: "s", pl.String: "s"}  # ioobserve/csrc/parse.c's field kinds


@lru_cache(maxsize=256)
def _template(shape: Shape) -> tuple[tuple[bytes, ...], str]:
    """A shape's tokens (the text around its values) and its fields' kinds, for parse_shape."""
    types = dict(EVENT_FIELDS)
    tokens = tuple(token.encode() for token in literal_tokens(shape.layer, list(shape.fields)))
    return tokens, "".join(_KINDS[types[key]] for key in shape.fields)


@dataclass(frozen=True)
class ShapeRead:
    """One member of our event lines as the compiled core read it: its shape, its rows, and per
    field a buffer of numbers or (codes, the distinct texts)."""

    shape: Shape
    rows: int
    columns: tuple


def read_shape(text: bytes, shape: Shape) -> ShapeRead:
    """A member of one shape read by the compiled core (ioobserve/csrc/parse.c) in one call;
    MalformedMember names the first line that breaks the shape."""
    tokens, kinds = _template(shape)
    try:
        rows, columns = _core.parse_shape(text, tokens, kinds)
    except ValueError as exc:
        raise MalformedMember(str(exc)) from None
    return ShapeRead(shape, rows, tuple(_decoded(key, column) if kind == "s" else column
                                        for key, kind, column in zip(shape.fields, kinds, columns)))


def _decoded(key: str, column: tuple) -> tuple:
    """A text field's (codes, texts) with its texts decoded, here in the member's thread: a
    text that is not UTF-8 loses this member only."""
    codes, values = column
    try:
        return codes, [value.decode() for value in values]
    except UnicodeDecodeError:
        raise MalformedMember(f"a {key} value is not UTF-8") from None


def shape_events(text: bytes, shape: Shape, keys: list[str] | None = None) -> pl.DataFrame:
    """Event fields (RAW_SCHEMA, or just `keys`) of a member of our event lines of one shape."""
    return shape_frame([read_shape(text, shape)], keys)


def shape_frame(reads: list[ShapeRead], keys: list[str] | None = None) -> pl.DataFrame:
    """The event fields (RAW_SCHEMA, or just `keys`) of many members read by read_shape, in
    their order, as one frame: a Series per field for them all, its buffers joined by numpy
    (a frame per member cost ~1 ms of Polars calls, more than the core's reading of its
    thousand lines). A field a member's shape lacks is its default there, else null."""
    rows = sum(read.rows for read in reads)
    wanted = [key for key in RAW_SCHEMA if keys is None or key in keys]
    fields = [{key: column for key, column in zip(read.shape.fields, read.columns)} for read in reads]
    series = [_layer_series(reads)] if "cat" in wanted else []
    for key in wanted[1:] if "cat" in wanted else wanted:
        dtype = RAW_SCHEMA[key]
        if dtype in (pl.Categorical, pl.String):
            series.append(_text_series(key, dtype, reads, fields))
        else:
            series.append(_number_series(key, dtype, reads, fields))
    return pl.DataFrame(series, height=rows)


def _layer_series(reads: list[ShapeRead]) -> pl.Series:
    """Each event's layer, its member's."""
    layers = pl.Series("cat", [read.shape.layer for read in reads], dtype=RAW_SCHEMA["cat"])
    return layers.gather(np.repeat(np.arange(len(reads), dtype=np.uint32), [read.rows for read in reads]))


def _number_series(key: str, dtype: pl.DataType, reads: list[ShapeRead], fields: list[dict]) -> pl.Series:
    """A numeric field of every member: its buffer, else its default, else null."""
    numpy_type = _NUMPY[_KINDS[dtype]]
    default = FIELD_DEFAULTS.get(key)
    columns = [present.get(key) for present in fields]
    if len(reads) == 1 and columns[0] is not None:  # one member (a big flush): its buffer as it is
        return pl.Series(key, np.frombuffer(columns[0], numpy_type), dtype=dtype)
    rows = sum(read.rows for read in reads)
    if all(column is None for column in columns):
        return pl.Series(key, [default], dtype=dtype).new_from_index(0, rows)  # a tenth of pl.repeat's time
    parts = [np.frombuffer(column, numpy_type) if column is not None else np.full(read.rows, default or 0, numpy_type)
             for read, column in zip(reads, columns)]
    values = pl.Series(key, np.concatenate(parts), dtype=dtype)
    if default is not None:
        return values
    valid = np.repeat(np.array([column is not None for column in columns]), [read.rows for read in reads])
    return values.scatter(np.flatnonzero(~valid), None) if not valid.all() else values


def _text_series(key: str, dtype: pl.DataType, reads: list[ShapeRead], fields: list[dict]) -> pl.Series:
    """A text field of every member: its codes into all members' texts (a member lacking it:
    null, the last entry)."""
    texts: list[str | None] = []
    codes = []
    for read, present in zip(reads, fields):
        column = present.get(key)
        if column is None:
            codes.append(None)
        else:
            codes.append(np.frombuffer(column[0], np.uint32) + np.uint32(len(texts)) if texts else
                         np.frombuffer(column[0], np.uint32))
            texts += column[1]
    missing = np.uint32(len(texts))
    codes = [np.full(read.rows, missing, np.uint32) if part is None else part for read, part in zip(reads, codes)]
    return pl.Series(key, [*texts, None], dtype=dtype).gather(codes[0] if len(codes) == 1 else np.concatenate(codes))


_NUMPY = {"H": np.uint16, "I": np.uint32, "Q": np.uint64, "i": np.int32, "q": np.int64}


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
        args.field("pts"), args.field("pystack"), args.field("pyframe"),
        pl.coalesce(args.field("module"), args.field("request_id")).alias("module"), args.field("status"),
    ))


def metadata(lines: pl.DataFrame, name: str) -> pl.DataFrame:
    """Metadata records (FH, PR, ...) among JSON lines: pid plus their args unnested."""
    return lines.filter((pl.col("ph") == PH_METADATA) & (pl.col("name") == name)).select("pid", "args").unnest("args")
