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
then knows every line's layout from the first (ioobserve.trace.parse) and reads a member as
columns, several times faster than as JSON, while any JSON reader (dftracer-utils included)
reads the lines as ordinary JSON. Event lines carry no "id": nothing refers to them.
"""

from __future__ import annotations

import hashlib
import io
import json
import os

import polars as pl

from ioobserve import events as ev
from ioobserve import schema as s

PH_COMPLETE = 1
PH_METADATA = 4
TYPE_DFTRACER = 1
# DFTracer's numbers (its TraceEventType) where it has the layer; ours from 64 up, clear of
# the values it appends (14 is CUDA in 2.2.0).
TYPE_LIBC_IO, TYPE_HDF5, TYPE_PYTHON, TYPE_MPI = 3, 5, 6, 10
TYPE_SYSCALL, TYPE_VFS, TYPE_BLOCK, TYPE_CACHE, TYPE_IO_URING, TYPE_AIO = 64, 65, 66, 67, 68, 69
CAT_META = "dftracer"
LAYER_TYPES = {
    s.LAYER_PYTHON: TYPE_PYTHON, s.LAYER_HDF5: TYPE_HDF5, s.LAYER_MPIIO: TYPE_MPI, s.LAYER_STDIO: TYPE_LIBC_IO,
    s.LAYER_POSIX: TYPE_LIBC_IO, s.LAYER_SYSCALL: TYPE_SYSCALL, s.LAYER_VFS: TYPE_VFS, s.LAYER_BLOCK: TYPE_BLOCK,
    s.LAYER_CACHE: TYPE_CACHE, s.LAYER_IO_URING: TYPE_IO_URING, s.LAYER_AIO: TYPE_AIO,
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
    ("pyframe", pl.UInt16), ("module", pl.String),
)
TOP_FIELDS = ("name", "pid", "tid", "ts", "dur")
FIELD_DEFAULTS: dict[str, int] = {"ret": 0, "count": 0, "offset": -1, "fd": -1, "arg": 0, "evflags": 0, "tns": 0, "dns": 0,
                                  "pyframe": 0}
"""What an absent field means (fields not here mean null: no file, no parent, no stack, or,
for uid and cgroup, the process's own from its PR line)."""
QUOTED = frozenset({"name", "fhash", "fhash2", "module"})
_SEPARATOR = "\x1f"  # between template columns, removed after writing: no value contains it
_SEPARATOR_BYTE = _SEPARATOR.encode()  # bytes.translate deletes it 1.5x faster than bytes.replace


def string_hash(text: str) -> str:
    """16 hex digits naming a string (host) in the trace."""
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=8).hexdigest()


def file_id_prefix() -> str:
    """The prefix of one trace file's file ids: random, so that ids of different files never
    meet (DFTracer's tools name files across traces by id), and constant within the file,
    where deflate finds it in the bytes before at no cost."""
    return os.urandom(4).hex()


def _dumps(record: dict) -> bytes:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogateescape") + b"\n"


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
        tokens.append(f'{lead}"{key}":')
    tokens.append("}}" if keys[-1] not in TOP_FIELDS else f',"ph":{PH_COMPLETE},"args":{{}}}}')
    return tokens


def _values(precision: str) -> dict[str, pl.Expr]:
    """Each field's value, null where it does not apply (at its default included), from an
    enriched frame with fhash/fhash2 columns and uid/cgroup nulled where the PR line says them."""
    parent = (pl.col(s.FLAGS) & ev.F_PARENT) != 0
    values = {
        "name": pl.col(s.OP), "pid": pl.col(s.PID), "tid": pl.col(s.TID),
        "ts": pl.col(s.TS) // 1000, "dur": pl.col(s.DUR) // 1000,
        "fhash": pl.col("fhash"), "fhash2": pl.col("fhash2"), "ret": pl.col(s.RET), "count": pl.col(s.BYTES_REQ),
        "offset": pl.col(s.OFFSET), "fd": pl.col(s.FD), "arg": pl.col(s.ARG), "uid": pl.col(s.UID),
        "cgroup": pl.col(s.CGROUP), "evflags": pl.col(s.FLAGS),
        "tns": pl.col(s.TS) % 1000 if precision == "ns" else pl.when(parent).then(pl.max_horizontal(pl.col(s.TS) % 1000, 1)),
        "dns": pl.col(s.DUR) % 1000 if precision == "ns" else pl.lit(None, pl.UInt64),
        "pts": pl.col(s.PARENT_TS) if precision == "ns" else
        pl.when(pl.col(s.PARENT_TS) % 1000 == 0).then(pl.col(s.PARENT_TS) + 1).otherwise(pl.col(s.PARENT_TS)),
        "pystack": pl.col(s.PY_STACK), "pyframe": pl.col(s.PY_FRAME),
        # A module name is the program's text: anything but a name's characters becomes "?",
        # so it needs no JSON escape and no reader's separator.
        "module": pl.col(s.PY_MODULE).str.replace_all(r"[^\w.\-]", "?"),
    }
    for key, default in FIELD_DEFAULTS.items():
        if key == "tns" and precision != "ns":
            continue  # a parent's remainder is at least 1 (see the module docstring)
        values[key] = pl.when(values[key] != default).then(values[key])
    return values


def event_lines(frame: pl.DataFrame, precision: str = "us") -> dict[tuple[str, int], tuple[bytes, pl.DataFrame]]:
    """Event lines per (layer, shape) for an enriched frame with fhash/fhash2 columns, in
    time order, so that a reader concatenating members has little left to sort; with each,
    its events' ts (ns, as written) and pid, for the member index. A shape is the bit set of the fields
    present (bit i: EVENT_FIELDS[i])."""
    values = _values(precision)
    keys = [key for key, _ in EVENT_FIELDS]
    present = [pl.col(f"v_{key}").is_not_null().cast(pl.UInt32) * (1 << index) for index, key in enumerate(keys)]
    table = frame.sort(s.TS).select(s.LAYER, s.PID, *(values[key].alias(f"v_{key}") for key in keys))
    table = table.with_columns(pl.sum_horizontal(present).alias("_shape"))
    groups = {}
    for (layer, shape), group in table.group_by(s.LAYER, "_shape", maintain_order=True):
        fields = [key for index, key in enumerate(keys) if shape & (1 << index)]
        tokens = literal_tokens(layer, fields)
        columns = []
        for index, key in enumerate(fields):
            value = pl.col(f"v_{key}")
            if key in QUOTED:  # op names, hex ids and cleaned module names need no escaping
                value = pl.concat_str(pl.lit('"'), value, pl.lit('"'))
            columns += [pl.lit(tokens[index]).alias(f"_{index}"), value.alias(key)]
        columns.append(pl.lit(tokens[-1]).alias("_end"))
        out = io.BytesIO()
        group.select(columns).write_csv(out, separator=_SEPARATOR, include_header=False, quote_style="never")
        # the times as a reader will see them: in µs unless the line has the remainder
        written = (pl.col("v_ts") * 1000 + pl.col("v_tns").fill_null(0)).cast(pl.UInt64).alias(s.TS)
        groups[(layer, shape)] = out.getvalue().translate(None, _SEPARATOR_BYTE), group.select(written, s.PID)
    return groups
