"""Loaded events to other formats: Chrome trace JSON for Perfetto, and Parquet.

Both are written to a private temporary file in the output's directory and renamed over
the target only when complete, so an interrupted export leaves nothing half-written and a
symlink at the target is replaced, never written through.
"""

from __future__ import annotations

import io
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import polars as pl

from ioobserve.data import schema as s
from ioobserve.trace.output import OutputError, check_output_dir, create_private_file

FORMATS = ("perfetto", "parquet")
_CHUNK = 500_000
_ARGS = (s.PATH, s.PATH2, s.RET, s.ERRNO, s.BYTES_REQ, s.BYTES, s.OFFSET, s.FD, s.ARG, s.DEV, s.INO, s.CGROUP, s.UID,
         s.PARENT_TS,
         *s.CGROUP_CONTEXT_SCHEMA, s.USER, s.RANK, s.LOCAL_RANK, s.WORLD_SIZE, s.WORKER)


def tags_text(column: str = s.TAGS) -> pl.Expr:
    """A tags column as "key=value,key=value" (null without tags)."""
    entry = pl.concat_str(pl.element().struct.field("key"), pl.lit("="), pl.element().struct.field("value"))
    return pl.col(column).list.eval(entry).list.join(",")


def write_atomically(target: Path, write: Callable[[BinaryIO], None], replace: bool) -> None:
    """Write `target` through a 0600 temporary file in its directory, renamed when complete."""
    target = Path(target)
    directory = check_output_dir(target.parent if str(target.parent) else Path("."))
    if target.is_dir() and not target.is_symlink():
        raise OutputError(f"{target} is a directory; give a file name, e.g. -o {target / 'trace.json'}")
    if os.path.lexists(target) and not replace:
        raise OutputError(f"{target} exists; remove it, choose another -o, or pass --force")
    temp = f".{target.name}.{secrets.token_hex(4)}.tmp"
    fd = create_private_file(directory, temp)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(directory / temp, target)
    except BaseException:
        (directory / temp).unlink(missing_ok=True)
        raise


def write_perfetto(frame: pl.DataFrame, handle: BinaryIO) -> int:
    """Chrome trace JSON: one complete ("X") event per I/O event, times in µs relative to the
    first event (its ns epoch is in the metadata), and process names. Returns events written."""
    epoch = int(frame[s.TS].min()) if frame.height else 0
    handle.write(b'{"displayTimeUnit":"ns","metadata":{"source":"ioobserve","epoch_ns":%d},"traceEvents":[\n' % epoch)
    names = frame.group_by(s.PID).agg(pl.col(s.COMM).drop_nulls().last()).filter(pl.col(s.COMM).is_not_null())
    first = True
    if names.height:
        meta = names.select(
            pl.lit("process_name").alias("name"), pl.lit("M").alias("ph"), pl.col(s.PID).alias("pid"),
            pl.lit(0).alias("tid"), pl.struct(pl.col(s.COMM).alias("name")).alias("args"),
        )
        first = _write_objects(meta, handle, first)
    for offset in range(0, frame.height, _CHUNK):
        chunk = frame.slice(offset, _CHUNK).select(
            pl.col(s.OP).alias("name"), pl.col(s.LAYER).alias("cat"), pl.lit("X").alias("ph"),
            ((pl.col(s.TS) - epoch).cast(pl.Float64) / 1000).alias("ts"),
            (pl.col(s.DUR).cast(pl.Float64) / 1000).alias("dur"),
            pl.col(s.PID).alias("pid"), pl.col(s.TID).alias("tid"),
            pl.struct(*_ARGS, tags_text()).alias("args"),
        )
        first = _write_objects(chunk, handle, first)
    handle.write(b"\n]}\n")
    return frame.height


def _write_objects(frame: pl.DataFrame, handle: BinaryIO, first: bool) -> bool:
    """Append a frame's rows as JSON array elements (JSON strings escape newlines, so the
    NDJSON line breaks are exactly the element boundaries)."""
    out = io.BytesIO()
    frame.write_ndjson(out)
    text = out.getvalue().rstrip(b"\n")
    if text:
        handle.write((b"" if first else b",\n") + text.replace(b"\n", b",\n"))
        first = False
    return first


def write_parquet(frame: pl.DataFrame, handle: BinaryIO) -> int:
    """Parquet with the typed columns of ioobserve.data.schema. Returns events written."""
    frame.write_parquet(handle, compression="zstd")
    return frame.height


WRITERS: dict[str, Callable[[pl.DataFrame, BinaryIO], int]] = {"perfetto": write_perfetto, "parquet": write_parquet}
