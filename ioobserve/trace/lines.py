"""Event frames to JSON lines in DFTracer's layout, vectorized per batch.

One event per line: {"id","name","cat","type","pid","tid","ts","dur","ph","args"} with
integer ph (1 complete, 4 metadata) and ts/dur in µs since the epoch; file names appear as
hashes that an "FH" metadata line defines before first use. Our own fields (ns times, errno,
fd, dev/ino, ppid, uid, cgroup id) go in args.
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
TYPE_SYSCALL = 12  # DFTracer's layer numbers end at 11 (CUDA); ours start after them
CAT_META = "dftracer"


def string_hash(text: str) -> str:
    """16 hex digits naming a string (path, host) in the trace."""
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=8).hexdigest()


def metadata_line(name: str, pid: int, tid: int, args: dict) -> bytes:
    """A ph=4 metadata record."""
    record = {"name": name, "cat": CAT_META, "type": TYPE_DFTRACER, "pid": pid, "tid": tid, "ph": PH_METADATA, "args": args}
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogateescape") + b"\n"


def complete_line(record_id: int, name: str, pid: int, tid: int, ts_us: int, args: dict) -> bytes:
    """A ph=1 record of our own (start, end, loss)."""
    record = {
        "id": record_id, "name": name, "cat": CAT_META, "type": TYPE_DFTRACER, "pid": pid, "tid": tid,
        "ts": ts_us, "dur": 0, "ph": PH_COMPLETE, "args": args,
    }
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogateescape") + b"\n"


# Our fields in an event's args: (key in the trace, column of ioobserve.schema).
EVENT_ARGS: tuple[tuple[str, str], ...] = (
    ("ret", s.RET), ("count", s.BYTES_REQ), ("offset", s.OFFSET), ("fd", s.FD), ("errno", s.ERRNO),
    ("arg", s.ARG), ("dev", s.DEV), ("ino", s.INO), ("ppid", s.PPID), ("uid", s.UID), ("cgroup", s.CGROUP),
    ("ts_ns", s.TS), ("dur_ns", s.DUR), ("flags", s.FLAGS),
)


def _args(hhash: str, with_fhash: bool, with_fhash2: bool) -> pl.Expr:
    fields = [pl.lit(hhash).alias("hhash")]
    if with_fhash:
        fields.append(pl.col("fhash"))
    if with_fhash2:
        fields.append(pl.col("fhash2"))
    fields += [pl.col(column).alias(key) for key, column in EVENT_ARGS]
    return pl.struct(fields).alias("args")


def event_lines(frame: pl.DataFrame, first_id: int, hhash: str) -> bytes:
    """NDJSON for an enriched frame that already has fhash/fhash2 columns (null when absent)."""
    numbered = frame.with_row_index("id", offset=first_id)
    out = io.BytesIO()
    has1 = pl.col("fhash").is_not_null()
    has2 = pl.col("fhash2").is_not_null()
    for condition, with1, with2 in ((has1 & ~has2, True, False), (has1 & has2, True, True), (~has1, False, False)):
        group = numbered.filter(condition)
        if group.height:
            group.select(
                pl.col("id"),
                pl.col(s.OP).alias("name"),
                pl.col(s.LAYER).alias("cat"),
                pl.lit(TYPE_SYSCALL).alias("type"),
                pl.col(s.PID).alias("pid"),
                pl.col(s.TID).alias("tid"),
                (pl.col(s.TS) // 1000).alias("ts"),
                (pl.col(s.DUR) // 1000).alias("dur"),
                pl.lit(PH_COMPLETE).alias("ph"),
                _args(hhash, with1, with2),
            ).write_ndjson(out)
    return out.getvalue()
