"""Events of one trace in chunks, with ids where load() gives names (FILE_ID for PATH; pid and
cgroup id without their names): for analyses that aggregate first and name only what is
left, in bounded memory. TraceTables name the ids.

A trace file's own file ids name files only within it; FILE_ID is a key of the file itself
(path, dev, ino), so that the partials of several files (parts, nodes) meet on it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from ioobserve import events as ev
from ioobserve import schema as s
from ioobserve.derived import bytes_moved
from ioobserve.trace import parse
from ioobserve.trace.members import Damage
from ioobserve.trace.reader import Selection, read_lines, run_chunks
from ioobserve.trace.tables import (
    PR_CGROUP,
    cgroup_table,
    context_table,
    file_table,
    mount_table,
    process_table,
    stack_table,
)

CHUNK_BYTES = 32 << 20  # compressed: about 1.3 M of our events
_FILE_KEY_SEED = 0xF11E
RAW_FIELDS = ("name", "pid", "tid", "ts", "dur", "fhash", "ret", "count", "offset", "fd", "cgroup", "evflags", "tns",
              "dns", "pystack", "pyframe")
ID_SCHEMA: dict[str, pl.DataType] = {
    s.TS: pl.UInt64, s.DUR: pl.UInt64, s.PID: pl.UInt32, s.TID: pl.UInt32, s.LAYER: pl.Categorical,
    s.OP: pl.Categorical, s.FILE_ID: pl.Categorical, s.FD: pl.Int32, s.RET: pl.Int64, s.BYTES_REQ: pl.UInt64,
    s.BYTES: pl.UInt64, s.OFFSET: pl.Int64, s.FLAGS: pl.UInt16, s.COUNTED: pl.Boolean, s.CGROUP: pl.UInt64,
    s.PY_STACK: pl.UInt32, s.PY_FRAME: pl.UInt16,
}
"""The columns of an event chunk."""


@dataclass
class TraceTables:
    """What names the ids of one trace's events: its host, files (FILE_ID -> PATH, DEV, INO),
    processes (pid -> ppid, comm), cgroups (-> job ...), process contexts, Python stacks and
    mounts (DEV -> mount point, file system type); file_ids: the file's own ids (fhash) -> FILE_ID."""

    host: str
    files: pl.DataFrame
    file_ids: pl.DataFrame
    processes: pl.DataFrame
    cgroups: pl.DataFrame
    contexts: pl.DataFrame
    stacks: pl.DataFrame
    mounts: pl.DataFrame


def trace_tables(path: Path, damage: list[Damage] | None = None) -> TraceTables:
    """The tables of one trace, from its metadata records (event members are not read when
    the trace has an index)."""
    lines = read_lines(path, damage)
    files = file_table(lines)
    # Polars' hash is stable within its version, which every Dask worker shares.
    files = files.with_columns(pl.struct(s.PATH, s.DEV, s.INO).hash(_FILE_KEY_SEED).cast(pl.String).cast(pl.Categorical)
                               .alias(s.FILE_ID))
    hosts = parse.metadata(lines, "HH")
    host = hosts.get_column("name").drop_nulls().first() if "name" in hosts.columns else None
    return TraceTables(
        host=host or Path(path).name.split("-")[0],
        files=files.select(s.FILE_ID, s.PATH, s.DEV, s.INO).unique(s.FILE_ID, keep="last"),
        file_ids=files.select("fhash", s.FILE_ID),
        processes=process_table(lines), cgroups=cgroup_table(lines), contexts=context_table(lines),
        stacks=stack_table(lines), mounts=mount_table(lines),
    )


def event_chunks(path: Path, selection: Selection | None = None, damage: list[Damage] | None = None,
                 chunk_bytes: int = CHUNK_BYTES, progress: bool | None = False,
                 tables: TraceTables | None = None) -> Iterator[pl.DataFrame]:
    """The trace's events (ID_SCHEMA) in chunks of file order; pids and the time range of
    `selection` apply (path prefixes do not: filter FILE_ID through the tables, which are
    read here unless given)."""
    selection = selection or Selection()
    tables = tables or trace_tables(path, damage)
    processes, file_ids = tables.processes.select(s.PID, PR_CGROUP), tables.file_ids
    wanted = Selection(selection.pids, selection.start_ns, selection.end_ns, None, RAW_FIELDS)
    for parts in run_chunks([Path(path)], wanted, damage, progress, chunk_bytes):
        if parts.events:
            yield _with_ids(parts.file_events(Path(path)), processes, file_ids)


def _with_ids(raw: pl.DataFrame, processes: pl.DataFrame, file_ids: pl.DataFrame) -> pl.DataFrame:
    flags = pl.col("evflags").fill_null(0)
    joined = (
        raw.lazy().join(processes.lazy(), left_on="pid", right_on=s.PID, how="left", maintain_order="left")
        .join(file_ids.lazy(), on="fhash", how="left", maintain_order="left")
    )
    return joined.select(
        (pl.col("ts").cast(pl.UInt64) * 1000 + pl.col("tns").fill_null(0)).alias(s.TS),
        (pl.col("dur").cast(pl.UInt64) * 1000 + pl.col("dns").fill_null(0)).alias(s.DUR),
        pl.col("pid").alias(s.PID), pl.col("tid").alias(s.TID), pl.col("cat").alias(s.LAYER),
        pl.col("name").alias(s.OP), pl.col(s.FILE_ID), pl.col("fd").alias(s.FD), pl.col("ret").alias(s.RET),
        pl.col("count").alias(s.BYTES_REQ), bytes_moved(pl.col("name"), pl.col("ret"), pl.col("count")).alias(s.BYTES),
        pl.col("offset").alias(s.OFFSET), flags.alias(s.FLAGS), ((flags & ev.F_REPEAT) == 0).alias(s.COUNTED),
        pl.coalesce("cgroup", PR_CGROUP).alias(s.CGROUP), pl.col("pystack").alias(s.PY_STACK),
        pl.when(pl.col("pystack").is_not_null()).then(pl.col("pyframe")).alias(s.PY_FRAME),
    ).cast(ID_SCHEMA).collect()
