"""Read ioobserve traces back into Polars frames with the columns of ioobserve.schema."""

from __future__ import annotations

import io
import json
from pathlib import Path

import polars as pl

from ioobserve import events as ev
from ioobserve import schema as s
from ioobserve.trace.lines import EVENT_ARGS
from ioobserve.trace.members import Damage, NotATrace, intact_text

_ARGS = pl.Struct(
    {
        "hhash": pl.String, "name": pl.String, "value": pl.String, "fhash": pl.String, "fhash2": pl.String,
        "ret": pl.Int64, "count": pl.UInt64, "offset": pl.Int64, "fd": pl.Int32, "errno": pl.Int32,
        "arg": pl.UInt64, "dev": pl.UInt64, "ino": pl.UInt64, "ppid": pl.UInt32, "uid": pl.UInt32,
        "cgroup": pl.UInt64, "ts_ns": pl.UInt64, "dur_ns": pl.UInt64, "flags": pl.UInt16,
    }
)
_LINE = {
    "id": pl.Int64, "name": pl.String, "cat": pl.String, "type": pl.Int64, "pid": pl.UInt32, "tid": pl.UInt32,
    "ts": pl.Int64, "dur": pl.Int64, "ph": pl.Int64, "args": _ARGS,
}
_DATA_OPS = sorted(ev.READ_OPS | ev.WRITE_OPS | ev.COPY_OPS)


class TraceError(Exception):
    """A trace file is missing or not a readable trace."""


def read_lines(path: Path, damage: list[Damage] | None = None) -> pl.DataFrame:
    """Every line of one trace file's intact gzip members, args as a struct; what had to be
    skipped is appended to `damage` (if given)."""
    try:
        raw, found = intact_text(path)
    except OSError as exc:
        raise TraceError(f"{path}: cannot read it ({exc.strerror})") from None
    except NotATrace as exc:
        raise TraceError(str(exc)) from None
    if found and damage is not None:
        damage.append(found)
    if not raw.strip():
        return pl.DataFrame(schema=_LINE)
    try:
        return pl.read_ndjson(io.BytesIO(raw), schema=_LINE)
    except pl.exceptions.PolarsError as exc:
        raise TraceError(f"{path}: malformed JSON lines ({str(exc).splitlines()[0]})") from None


def load(paths: list[Path] | Path, damage: list[Damage] | None = None) -> pl.DataFrame:
    """Events of one or more traces, paths resolved from FH records, sorted by time; damaged
    members are skipped and reported in `damage`."""
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    frames = [read_lines(Path(p), damage) for p in paths]
    lines = pl.concat(frames) if frames else pl.DataFrame(schema=_LINE)
    meta = lines.filter((pl.col("ph") == 4) & (pl.col("name") == "FH")).select(
        pl.col("args").struct.field("value").alias("h"), pl.col("args").struct.field("name").alias("p")
    ).unique("h")
    args = pl.col("args").struct
    events = lines.filter((pl.col("ph") == 1) & (pl.col("cat") != "dftracer")).select(
        pl.col("pid").alias(s.PID),
        pl.col("tid").alias(s.TID),
        pl.col("cat").alias(s.LAYER),
        pl.col("name").alias(s.OP),
        args.field("fhash"),
        args.field("fhash2"),
        *(args.field(key).alias(column) for key, column in EVENT_ARGS),
    )
    done = pl.when(pl.col(s.OP).is_in(_DATA_OPS)).then(pl.col(s.RET).clip(lower_bound=0)).otherwise(0)
    return (
        events.join(meta.rename({"h": "fhash", "p": s.PATH}), on="fhash", how="left")
        .join(meta.rename({"h": "fhash2", "p": s.PATH2}), on="fhash2", how="left")
        .with_columns(done.cast(pl.UInt64).alias(s.BYTES), ((pl.col(s.FLAGS) & ev.F_REPEAT) == 0).alias(s.COUNTED))
        .drop("fhash", "fhash2")
        .sort(s.TS)
    )


def own_records(path: Path, name: str) -> list[dict]:
    """Our own records named `name` ("start", "end", "lost") as parsed JSON, in file order."""
    marker = f'"name":"{name}","cat":"dftracer"'.encode()
    text, _ = intact_text(path)
    return [json.loads(line) for line in text.splitlines() if marker in line]


def records(paths: list[Path] | Path, name: str) -> pl.DataFrame:
    """Our own ph=1 records (start, end, lost) or metadata (PR, FH) by name, args unnested."""
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    lines = pl.concat([read_lines(Path(p)) for p in paths])
    return lines.filter(pl.col("name") == name)
