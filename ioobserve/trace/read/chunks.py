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

from ioobserve.data import schema as s
from ioobserve.trace.members import Damage
from ioobserve.trace.read import parse
from ioobserve.trace.read.reader import Selection, file_event_chunks, read_lines
from ioobserve.trace.read.tables import (
    cgroup_table,
    context_table,
    file_table,
    mount_table,
    process_table,
    stack_table,
    with_file_ids,
)

CHUNK_ROWS = 1 << 18


@dataclass
class TraceTables:
    """What names the ids of one trace's events: its host, files (FILE_ID -> PATH, DEV, INO),
    processes (pid -> ppid, comm), cgroups (-> job ...), process contexts, Python stacks and
    mounts (DEV -> mount point, file system type)."""

    host: str
    files: pl.DataFrame
    processes: pl.DataFrame
    cgroups: pl.DataFrame
    contexts: pl.DataFrame
    stacks: pl.DataFrame
    mounts: pl.DataFrame


def trace_tables(path: Path, damage: list[Damage] | None = None) -> TraceTables:
    """The tables of one trace, from its metadata records (event members are not read when
    the trace has an index)."""
    lines = read_lines(path, damage)
    files = with_file_ids(file_table(lines))
    hosts = parse.metadata(lines, "HH")
    host = hosts.get_column("name").drop_nulls().first() if "name" in hosts.columns else None
    return TraceTables(
        host=host or Path(path).name.split("-")[0],
        files=files.select(s.FILE_ID, s.PATH, s.DEV, s.INO).unique(s.FILE_ID, keep="last"),
        processes=process_table(lines), cgroups=cgroup_table(lines), contexts=context_table(lines),
        stacks=stack_table(lines), mounts=mount_table(lines),
    )


def event_chunks(path: Path, selection: Selection | None = None, damage: list[Damage] | None = None,
                 chunk_rows: int = CHUNK_ROWS, progress: bool | None = False) -> Iterator[pl.DataFrame]:
    """The trace's events (schema.CHUNK_SCHEMA) in chunks of about `chunk_rows`, in time
    order, read through its copy (as load reads); pids and the time range of `selection`
    apply (path prefixes do not: filter FILE_ID through the tables)."""
    selection = selection or Selection()
    wanted = Selection(selection.pids, selection.start_ns, selection.end_ns)
    for chunk in file_event_chunks(Path(path), wanted, _NAMED_COLUMNS, chunk_rows, damage, progress):
        yield _with_ids(chunk)


_NAMED_COLUMNS = [s.TS, s.DUR, s.PID, s.TID, s.LAYER, s.OP, s.FILE_ID, s.FD, s.RET, s.BYTES_REQ, s.BYTES,
                  s.OFFSET, s.ARG, s.FLAGS, s.COUNTED, s.CGROUP, s.PY_STACK, s.PY_FRAME, s.STATUS]


def _with_ids(named: pl.DataFrame) -> pl.DataFrame:
    return named.select(list(s.CHUNK_SCHEMA)).cast(s.CHUNK_SCHEMA)
