"""Event frames to JSON lines in DFTracer's layout, vectorized per batch.

One event per line: {"name","cat","type","pid","tid","ts","dur","ph","args"} with integer
ph (1 complete, 4 metadata) and ts/dur in µs since the epoch; file names appear as hashes
that an "FH" metadata line defines before first use, with the file's dev/ino; a Python
stack, as an id ("pystack") that a "PS" line defines (frames innermost first). Our own
fields go in args, the sub-µs part of time and duration as "tns"/"dns", so nanoseconds
survive while DFTracer's tools see their µs. The host hash ("hhash") is in the metadata
records, not repeated on every event line: a trace file comes from one host.

Event lines follow one fixed template whose values are separated from the JSON around them
by single spaces (JSON allows whitespace between tokens). That lets Polars write them with
`write_csv` and read them back with `read_csv`, several times faster than its NDJSON paths,
while any JSON reader (dftracer-utils included) still reads them as ordinary JSON. Event
lines carry no "id": nothing refers to them, and ids cost a quarter of a compressed event.
"""

from __future__ import annotations

import hashlib
import io
import json

import polars as pl

from ioobserve import schema as s

PH_COMPLETE = 1
PH_METADATA = 4
TYPE_DFTRACER = 1
# DFTracer's numbers (its TraceEventType) where it has the layer; ours from 64 up, clear of
# the values it appends (14 is CUDA in 2.2.0).
TYPE_LIBC_IO, TYPE_HDF5, TYPE_PYTHON, TYPE_MPI = 3, 5, 6, 10
TYPE_SYSCALL, TYPE_VFS, TYPE_BLOCK, TYPE_CACHE = 64, 65, 66, 67
CAT_META = "dftracer"
LAYER_TYPES = {
    s.LAYER_PYTHON: TYPE_PYTHON, s.LAYER_HDF5: TYPE_HDF5, s.LAYER_MPIIO: TYPE_MPI, s.LAYER_STDIO: TYPE_LIBC_IO,
    s.LAYER_POSIX: TYPE_LIBC_IO, s.LAYER_SYSCALL: TYPE_SYSCALL, s.LAYER_VFS: TYPE_VFS, s.LAYER_BLOCK: TYPE_BLOCK,
    s.LAYER_CACHE: TYPE_CACHE,
}


def string_hash(text: str) -> str:
    """16 hex digits naming a string (host) in the trace."""
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=8).hexdigest()


def file_hash(path: str, dev: int, ino: int) -> str:
    """16 hex digits naming one file: its path and, when known, its inode."""
    return string_hash(f"{path}\0{dev}\0{ino}")


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


# The event template: (key, where it goes, Polars type when read back). "top" keys are
# DFTracer's own; the rest go in args. Order is the order on the line. "cat" and "type" are
# fixed per layer, so they are part of the template's literal text, not values; errno is
# not written for syscalls: it is -ret when ret < 0.
EVENT_FIELDS: tuple[tuple[str, str, pl.DataType], ...] = (
    ("name", "top", pl.Categorical), ("pid", "top", pl.UInt32), ("tid", "top", pl.UInt32),
    ("ts", "top", pl.Int64), ("dur", "top", pl.Int64),
    ("fhash", "args", pl.Categorical), ("fhash2", "args", pl.Categorical), ("ret", "args", pl.Int64),
    ("count", "args", pl.UInt64), ("offset", "args", pl.Int64), ("fd", "args", pl.Int32),
    ("arg", "args", pl.UInt64), ("uid", "args", pl.UInt32), ("cgroup", "args", pl.UInt64),
    ("evflags", "args", pl.UInt16), ("tns", "args", pl.UInt16), ("dns", "args", pl.UInt16),
    ("pts", "args", pl.UInt64), ("pystack", "args", pl.UInt32), ("module", "args", pl.String),
)
_QUOTED = {"name", "fhash", "fhash2"}


def template_tokens(layer: str) -> list[str]:
    """The literal JSON around the values of one layer's event lines (len(EVENT_FIELDS) + 1)."""
    tokens = []
    for index, (key, where, _) in enumerate(EVENT_FIELDS):
        if index == 0:
            lead = "{"
        elif key == "pid":
            lead = f',"cat":"{layer}","type":{LAYER_TYPES.get(layer, TYPE_DFTRACER)},'
        elif where == "args" and EVENT_FIELDS[index - 1][1] == "top":
            lead = f',"ph":{PH_COMPLETE},"args":{{'
        else:
            lead = ","
        tokens.append(f'{lead}"{key}":')
    tokens.append("}}")
    return tokens


def _value(key: str) -> pl.Expr:
    """The Polars expression for one template value, from an enriched frame with fhash/fhash2."""
    column = {
        "name": pl.col(s.OP), "pid": pl.col(s.PID), "tid": pl.col(s.TID),
        "ts": pl.col(s.TS) // 1000, "dur": pl.col(s.DUR) // 1000,
        "fhash": pl.col("fhash"), "fhash2": pl.col("fhash2"), "ret": pl.col(s.RET), "count": pl.col(s.BYTES_REQ),
        "offset": pl.col(s.OFFSET), "fd": pl.col(s.FD), "arg": pl.col(s.ARG),
        "uid": pl.col(s.UID), "cgroup": pl.col(s.CGROUP), "evflags": pl.col(s.FLAGS),
        "tns": pl.col(s.TS) % 1000, "dns": pl.col(s.DUR) % 1000, "pts": pl.col(s.PARENT_TS),
        "pystack": pl.col(s.PY_STACK),
        # A module name is the program's text: anything but a name's characters becomes "?",
        # so it needs no JSON escape and the line stays one template row.
        "module": pl.concat_str(pl.lit('"'), pl.col(s.PY_MODULE).str.replace_all(r"[^\w.\-]", "?"), pl.lit('"')),
    }[key]
    if key in _QUOTED:  # our op names and hex hashes never need JSON escaping
        column = pl.concat_str(pl.lit('"'), column, pl.lit('"'))
    return column.alias(key)


def event_lines(frame: pl.DataFrame) -> dict[str, bytes]:
    """Event lines per layer for an enriched frame with fhash/fhash2 columns (null when
    absent), in time order, so that a reader concatenating members has little left to sort."""
    texts = {}
    for (layer,), group in frame.sort(s.TS).group_by(s.LAYER, maintain_order=True):
        tokens = template_tokens(layer)
        columns = []
        for index, (key, _, _) in enumerate(EVENT_FIELDS):
            columns += [pl.lit(tokens[index]).alias(f"_{index}"), _value(key)]
        columns.append(pl.lit(tokens[-1]).alias("_end"))
        out = io.BytesIO()
        group.select(columns).write_csv(out, separator=" ", include_header=False, quote_style="never", null_value="null")
        texts[layer] = out.getvalue()
    return texts
