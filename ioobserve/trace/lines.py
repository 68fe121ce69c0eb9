"""Event frames to JSON lines in DFTracer's layout, vectorized per batch.

One event per line: {"name","cat","type","pid","tid","ts","dur","ph","args"} with integer
ph (1 complete, 4 metadata) and ts/dur in µs since the epoch, as DFTracer writes them.
An event line carries only the fields that apply: a field at its default (FIELD_DEFAULTS:
no file, no offset, nothing asked for, ...) is left out and read back as that default, so
nothing is lost and nothing is padded. File names appear as short ids that an "FH" metadata
line defines before first use; a Python stack, as an id ("pystack") that a "PS" line defines,
with the frame of it that is the event's code ("pyframe": 0, the innermost, for I/O; its own
for a PYTHON-layer span of ioobserve.python.spans).
uid and cgroup appear only where they differ from the process's first PR line in the file.

Precision: by default ts and dur are µs and nothing finer is written; with precision "ns"
each line also carries the sub-µs remainders ("tns", "dns"). Parent links are exact in both:
a child's "pts" is its parent's ts in ns, and a parent (marked by F_PARENT) carries "tns".
In µs precision other events read back at whole µs, so a parent whose ts falls on a whole
µs is written 1 ns later (and its children's "pts" with it): a parent's key then never
equals another event's time, and the 1 ns is below the precision asked for.

Lines of one layer with the same fields (a "shape") go in members of their own: a reader
then knows every line's layout from the first (ioobserve.trace.read.parse) and reads a member as
columns, several times faster than as JSON, while any JSON reader (dftracer-utils included)
reads the lines as ordinary JSON. Event lines carry no "id": nothing refers to them.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import dataclass

import numpy as np
import polars as pl

from ioobserve import _core
from ioobserve.data import schema as s
from ioobserve.data.model import Frame, Stack

PH_COMPLETE = 1
PH_METADATA = 4
TYPE_DFTRACER = 1
# DFTracer's numbers (its TraceEventType) where it has the layer; ours from 64 up, clear of
# the values it appends (14 is CUDA in 2.2.0).
TYPE_LIBC_IO, TYPE_HDF5, TYPE_PYTHON, TYPE_MPI = 3, 5, 6, 10
TYPE_SYSCALL, TYPE_VFS, TYPE_BLOCK, TYPE_CACHE, TYPE_IO_URING, TYPE_AIO, TYPE_NET, TYPE_TLS, TYPE_HTTP = 64, 65, 66, 67, 68, 69, 70, 71, 72
CAT_META = "dftracer"
LAYER_TYPES = {
    s.LAYER_PYTHON: TYPE_PYTHON, s.LAYER_HDF5: TYPE_HDF5, s.LAYER_MPIIO: TYPE_MPI, s.LAYER_STDIO: TYPE_LIBC_IO,
    s.LAYER_POSIX: TYPE_LIBC_IO, s.LAYER_SYSCALL: TYPE_SYSCALL, s.LAYER_VFS: TYPE_VFS, s.LAYER_BLOCK: TYPE_BLOCK,
    s.LAYER_CACHE: TYPE_CACHE, s.LAYER_IO_URING: TYPE_IO_URING, s.LAYER_AIO: TYPE_AIO,
    s.LAYER_NET: TYPE_NET, s.LAYER_TLS: TYPE_TLS, s.LAYER_HTTP: TYPE_HTTP,
}
PRECISIONS = ("us", "ns")
TOP_KEYS = ("name", "cat", "type", "pid", "tid", "ts", "dur", "ph", "args")
"""The keys of an event line, in order (args last)."""

# The event fields: (key, Polars type when read back), in the order they appear on a line.
# name, pid, tid, ts and dur are DFTracer's own (top level); the rest go in args.
EVENT_FIELDS: tuple[tuple[str, pl.DataType], ...] = (
    ("name", pl.Categorical), ("pid", pl.UInt32), ("tid", pl.UInt32), ("ts", pl.Int64), ("dur", pl.Int64),
    ("fhash", pl.Categorical), ("fhash2", pl.Categorical), ("ret", pl.Int64), ("count", pl.UInt64),
    ("offset", pl.Int64), ("fd", pl.Int32), ("arg", pl.UInt64), ("uid", pl.UInt32), ("cgroup", pl.UInt64),
    ("evflags", pl.UInt16), ("tns", pl.UInt16), ("dns", pl.UInt16), ("pts", pl.UInt64), ("pystack", pl.UInt32),
    ("pyframe", pl.UInt16), ("module", pl.String), ("status", pl.UInt16),
)
TOP_FIELDS = ("name", "pid", "tid", "ts", "dur")
LAYER_KEYS: dict[str, dict[str, str]] = {s.LAYER_HTTP: {"module": "request_id"}}
"""Fields a layer's lines write under a key of their own: an HTTP event's string is the
request id its answer gave, not a module."""
FIELD_DEFAULTS: dict[str, int] = {"ret": 0, "count": 0, "offset": -1, "fd": -1, "arg": 0, "evflags": 0, "tns": 0, "dns": 0,
                                  "pyframe": 0}
"""What an absent field means (fields not here mean null: no file, no parent, no stack, or,
for uid and cgroup, the process's own from its PR line)."""


def string_hash(text: str) -> str:
    """16 hex digits naming a string (host) in the trace."""
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=8).hexdigest()


def file_id_prefix() -> str:
    """The prefix of one trace file's file ids: random, so that ids of different files never
    meet (DFTracer's tools name files across traces by id), and constant within the file,
    where deflate finds it in the bytes before at no cost."""
    return os.urandom(4).hex()


def _json(value) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogateescape")


def _dumps(record: dict) -> bytes:
    return _json(record) + b"\n"


FRAGMENTS_KEPT = 1 << 16  # frames whose JSON a StackLines keeps (it starts over past that)
_NO_FRAMES = b'"frames":[]'


class StackLines:
    """PS lines (a Python stack's frames), byte for byte metadata_line's, from each frame's
    JSON made once: stacks share most of their frames, and a trace describes thousands."""

    def __init__(self) -> None:
        self._fragments: dict[Frame, bytes] = {}

    def line(self, pid: int, hhash: str, stack_id: int, stack: Stack) -> bytes:
        """The PS line of `stack`, by process `pid` (the writer's)."""
        fragments, parts = self._fragments, []
        for frame in stack.frames:
            text = fragments.get(frame)
            if text is None:
                if len(fragments) >= FRAGMENTS_KEPT:
                    fragments.clear()
                text = fragments[frame] = _json({"function": frame.function, "file": frame.file, "line": frame.line})
            parts.append(text)
        line = metadata_line("PS", pid, pid, {"hhash": hhash, "stack": stack_id, "frames": [], "truncated": stack.truncated})
        return line.replace(_NO_FRAMES, b'"frames":[' + b",".join(parts) + b"]", 1)


def metadata_line(name: str, pid: int, tid: int, args: dict) -> bytes:
    """A ph=4 metadata record."""
    return _dumps({"name": name, "cat": CAT_META, "type": TYPE_DFTRACER, "pid": pid, "tid": tid, "ph": PH_METADATA, "args": args})


def complete_line(record_id: int, name: str, pid: int, tid: int, ts_us: int, args: dict) -> bytes:
    """A ph=1 record of our own (start, end, loss)."""
    return _dumps({
        "id": record_id, "name": name, "cat": CAT_META, "type": TYPE_DFTRACER, "pid": pid, "tid": tid,
        "ts": ts_us, "dur": 0, "ph": PH_COMPLETE, "args": args,
    })


def literal_tokens(layer: str, keys: list[str]) -> list[str]:
    """The JSON around the values of a line of `layer` with these fields (len(keys) + 1
    pieces): a shape's template."""
    tokens = []
    for index, key in enumerate(keys):
        if index == 0:
            lead = "{"
        elif key == "pid":
            lead = f',"cat":"{layer}","type":{LAYER_TYPES.get(layer, TYPE_DFTRACER)},'
        elif key not in TOP_FIELDS and keys[index - 1] in TOP_FIELDS:
            lead = f',"ph":{PH_COMPLETE},"args":{{'
        else:
            lead = ","
        tokens.append(f'{lead}"{LAYER_KEYS.get(layer, {}).get(key, key)}":')
    tokens.append("}}" if keys[-1] not in TOP_FIELDS else f',"ph":{PH_COMPLETE},"args":{{}}}}')
    return tokens


# The columns the compiled core reads (ioobserve/csrc/lines.c, enum input), in its order.
INPUT_COLUMNS = (
    s.OP, s.LAYER, s.PID, s.TID, s.TS, s.DUR, s.FILE, s.FILE2, s.RET, s.BYTES_REQ, s.OFFSET, s.FD, s.ARG, s.UID,
    s.CGROUP, s.FLAGS, s.PARENT_TS, s.PY_STACK, s.PY_FRAME, s.PY_MODULE, s.STATUS,
)
_STRING_COLUMNS = frozenset({s.OP, s.LAYER, s.PY_MODULE})
_NO_CODE = 0xFFFFFFFF  # a null string
# A module name is the program's text: anything but a name's characters becomes "?", so it
# needs no JSON escape and no reader's separator.
_NOT_IN_NAME = r"[^\w.\-]"


@dataclass(frozen=True)
class LineGroup:
    """The lines of one (layer, shape) of a batch, in time order, with each line's time as
    a reader will see it (ns: whole µs unless the line has the remainder) and its pid."""

    text: memoryview
    ts: np.ndarray
    pids: np.ndarray

    @property
    def lines(self) -> int:
        """How many lines (events) the group holds."""
        return len(self.ts)


@functools.lru_cache(maxsize=4096)
def _template(layer: str, shape: int) -> tuple[bytes, ...]:
    keys = [key for index, (key, _) in enumerate(EVENT_FIELDS) if shape & (1 << index)]
    return tuple(token.encode() for token in literal_tokens(layer, keys))


def _codes(column: pl.Series) -> tuple[np.ndarray, pl.Series]:
    """A string column as codes (_NO_CODE for null) into its distinct values."""
    # Categories of this batch's own, so codes count from 0. Polars keeps a Categories'
    # strings only while a column uses them: they are read while `categorical` lives.
    categorical = column.cast(pl.Categorical(pl.Categories.random()))
    codes = categorical.to_physical().fill_null(_NO_CODE).to_numpy()
    return codes, categorical.dtype.categories.to_series()


def event_lines(frame: pl.DataFrame, precision: str = "us", file_prefix: str = "") -> dict[tuple[str, int], LineGroup]:
    """Event lines per (layer, shape) for a frame of ID_SCHEMA columns whose FILE and FILE2
    are null where the file is not described (their ids are written as `file_prefix` and
    the id in hex), in time order, so that a reader concatenating members has little left
    to sort. A shape is the bit set of the fields present (bit i: EVENT_FIELDS[i]). One call
    into the compiled core (ioobserve/csrc/lines.c) formats the whole batch."""
    columns, valid = [], []
    layers: pl.Series | None = None
    ops = modules = []
    for name in INPUT_COLUMNS:
        column = frame.get_column(name)
        if name in _STRING_COLUMNS:
            codes, values = _codes(column)
            columns.append(codes)
            valid.append(None)
            if name == s.OP:
                ops = [value.encode("utf-8", "surrogateescape") for value in values]
            elif name == s.LAYER:
                layers = values
            else:
                modules = [value.encode() for value in values.str.replace_all(_NOT_IN_NAME, "?")]
        elif column.null_count():
            columns.append(column.fill_null(0).to_numpy())
            valid.append(column.is_not_null().to_numpy())
        else:
            columns.append(column.to_numpy())
            valid.append(None)
    layer_names = layers.to_list() if layers is not None else []
    order = np.argsort(columns[INPUT_COLUMNS.index(s.TS)], kind="stable")
    text, groups, written, pids = _core.event_lines(
        order, tuple(columns), tuple(valid), ops, modules, precision == "ns", file_prefix.encode(),
        lambda layer, shape: _template(layer_names[layer], shape))
    text, written, pids = memoryview(text), np.frombuffer(written, np.uint64), np.frombuffer(pids, np.uint32)
    made = {}
    first = 0
    for layer, shape, start, end, rows in groups:
        made[(layer_names[layer], shape)] = LineGroup(text[start:end], written[first:first + rows], pids[first:first + rows])
        first += rows
    return made
