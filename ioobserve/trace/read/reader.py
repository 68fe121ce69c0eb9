"""Read traces (ours, or DFTracer's) as Polars frames with the columns of ioobserve.data.schema.

Each trace is read through its columnar copy (ioobserve.trace.read.columnar), built on first read
where none matches it; `scan` is lazy, and the columns and filters of its query reach the
Parquet reader. Where no copy can be kept, a trace is read from its members, which the index
lets skip by time and pid (ioobserve.trace.read.inflate). Damaged members are skipped and reported;
everything intact loads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path

import polars as pl
from polars.io.plugins import register_io_source

from ioobserve.data import schema as s
from ioobserve.data.model import ACCOUNTING_SCHEMA
from ioobserve.trace.members import Damage, iter_members
from ioobserve.trace.read import parse
from ioobserve.trace.read.columnar import BUILD_CHUNK_BYTES, build_copy, scan_copy, valid_copy
from ioobserve.trace.read.inflate import Selection, TraceError, as_paths, read_lines, run_all, run_chunks
from ioobserve.trace.read.named import TraceNames, name_events
from ioobserve.trace.write.finish import wait_for_finisher

__all__ = ["TraceError", "Selection", "accounting", "load", "own_records", "read_lines", "records", "scan"]


def _selection(pids, start_ns, end_ns, path_prefix) -> Selection:
    prefixes = [path_prefix] if isinstance(path_prefix, str) else path_prefix
    return Selection(
        pids=frozenset(int(p) for p in pids) if pids is not None else None, start_ns=start_ns, end_ns=end_ns,
        path_prefixes=tuple(prefixes) if prefixes is not None else None,
    )


def load(paths, *, pids: Iterable[int] | None = None, start_ns: int | None = None, end_ns: int | None = None,
         path_prefix: str | Iterable[str] | None = None, damage: list[Damage] | None = None,
         progress: bool | None = None) -> pl.DataFrame:
    """Events of one or more traces (ours or DFTracer's) as a DataFrame with the columns of
    ioobserve.data.schema, sorted by time; the Python calls that did I/O are PYTHON-layer events
    (spans) among them. pids, [start_ns, end_ns) and path_prefix select events. Damaged
    members are skipped and described in `damage` (if given). It is `scan(...).collect()`."""
    return _scan(as_paths(paths), _selection(pids, start_ns, end_ns, path_prefix), damage, progress).collect()


def scan(paths, *, pids: Iterable[int] | None = None, start_ns: int | None = None, end_ns: int | None = None,
         path_prefix: str | Iterable[str] | None = None, progress: bool | None = None) -> pl.LazyFrame:
    """Like load, as a LazyFrame: the traces are read when the query is collected, and only
    the columns and rows the query asks for are read from their copies."""
    return _scan(as_paths(paths), _selection(pids, start_ns, end_ns, path_prefix), None, progress)


def _scan(files: list[Path], selection: Selection, damage: list[Damage] | None, progress: bool | None) -> pl.LazyFrame:
    if not files:
        raise TraceError("no traces were given: pass one or more trace files (.pfw.gz)")
    def source(with_columns, predicate, n_rows, _batch_size):
        columns = None if with_columns is None else list(dict.fromkeys([*with_columns, s.TS]))  # TS: to merge files

        def narrow(frame: pl.LazyFrame) -> pl.LazyFrame:
            if predicate is not None:
                frame = frame.filter(predicate)
            return frame.select(columns) if columns is not None else frame

        frames = [file_events(path, selection, damage, progress, narrow) for path in files]
        frame = frames[0] if len(frames) == 1 else pl.concat(frames).sort(s.TS, maintain_order=True)
        if with_columns is not None:
            frame = frame.select(with_columns)
        if n_rows is not None:
            frame = frame.head(n_rows)
        yield frame.collect()

    return register_io_source(source, schema=s.EVENT_SCHEMA)


def file_events(path: Path, selection: Selection, damage: list[Damage] | None = None, progress: bool | None = None,
                narrow: Callable[[pl.LazyFrame], pl.LazyFrame] = lambda frame: frame) -> pl.LazyFrame:
    """One trace's events that `selection` keeps, sorted by time, `narrow`ed (a query's filter
    and columns): from its copy (built now if none matches the trace), else from its members.
    A copy built now is read back rather than kept chunk by chunk as it is written: keeping
    them saved 0.05-0.2 s of a 3.6-6 M-event first load and cost 70-270 MB more at its peak
    (bench/load.py), the chunks and the frame made of them held at once."""
    found = valid_copy(path) or (wait_for_finisher(path) and valid_copy(path)) or build_copy(path, progress)
    if found is None:
        parts = run_all([path], selection, damage, progress)
        return narrow(selection.keep(name_events(parts.file_events(path), parts.file_lines(path)).lazy()))
    if damage is not None and (found.damage or found.damage.notes):
        damage.append(found.damage)
    return narrow(selection.keep(scan_copy(found)))


def file_event_chunks(path: Path, selection: Selection, columns: list[str], rows: int, damage: list[Damage] | None = None,
                      progress: bool | None = None) -> Iterator[pl.DataFrame]:
    """One trace's events that `selection` keeps, `columns` of them (schema.COPY_SCHEMA's),
    about `rows` at a time: slices of its copy (built now if none matches the trace), in time
    order, else chunks of its members. Memory stays about one chunk, however long the trace."""
    found = valid_copy(path) or (wait_for_finisher(path) and valid_copy(path)) or build_copy(path, progress)
    if found is None:
        names = TraceNames(read_lines(path))
        for parts in run_chunks([path], replace(selection, lines=False), damage, progress, BUILD_CHUNK_BYTES):
            yield selection.keep(names.name(parts.file_events(path), file_ids=True).lazy()).select(columns).collect()
        return
    if damage is not None and (found.damage or found.damage.notes):
        damage.append(found.damage)
    # Slices, not collect_batches: a slice reads only the row groups it spans, where the
    # streaming engine reads ahead by whole row groups (350 MB at 64 Ki rows on 6 M events).
    events = scan_copy(found, file_ids=True)
    total = events.select(pl.len()).collect().item()
    for offset in range(0, total, rows):
        chunk = selection.keep(events.slice(offset, rows)).select(columns).collect()
        if chunk.height:
            yield chunk


def records(paths, name: str) -> pl.DataFrame:
    """Metadata records (PR, FH, ...) by name, as JSON line columns."""
    lines = [read_lines(p) for p in as_paths(paths)]
    return pl.concat(lines).filter(pl.col("name") == name)


THROTTLE_SCHEMA = {"cgroup": pl.String, "job": pl.String, "start_ns": pl.Int64, "end_ns": pl.Int64,
                   "dropped": pl.Int64, "limit": pl.Int64}


def throttles(paths) -> pl.DataFrame:
    """Flood control's throttles in the traces (their `throttle` records): per throttle, the
    cgroup and job, its start and end (epoch ns) and the events held back in the kernel past
    the limit (events a second). A throttle never ended in a trace ends at its last record."""
    found = records(paths, "throttle")
    if not found.height or "args" not in found.columns:
        return pl.DataFrame(schema=THROTTLE_SCHEMA)
    fields = {name.name for name in found.schema["args"].fields}
    marks = found.select((pl.col("ts") * 1000).alias("ts_ns"), *(
        pl.col("args").struct.field(name) if name in fields else pl.lit(None).alias(name)
        for name in ("throttle", "cgroup_path", "cgroup_id", "job", "dropped", "limit"))).sort("ts_ns")
    rows, open_ = [], {}
    for mark in marks.iter_rows(named=True):
        key = mark["cgroup_path"] or f"cgroup id {mark['cgroup_id']}"
        if mark["throttle"] == "start":
            open_[key] = {"cgroup": key, "job": mark["job"], "start_ns": mark["ts_ns"], "end_ns": None,
                          "dropped": 0, "limit": mark["limit"]}
        elif key in open_:
            throttle = open_.pop(key)
            rows.append({**throttle, "end_ns": mark["ts_ns"], "dropped": mark["dropped"] or 0})
    rows += [{**throttle, "end_ns": throttle["start_ns"]} for throttle in open_.values()]
    return pl.DataFrame(rows, schema=THROTTLE_SCHEMA).sort("start_ns")


def accounting(paths) -> pl.DataFrame:
    """Per exited process (TS records): traced read/write calls and bytes beside the kernel's
    taskstats counters, and whether they agree (ioobserve.collect.accounting)."""
    ts = records(paths, "TS")
    return ts.select("pid", *(pl.col("args").struct.field(key) for key in list(ACCOUNTING_SCHEMA)[1:])).cast(ACCOUNTING_SCHEMA)


def own_records(path: Path, name: str) -> list[dict]:
    """Our own ph=1 records named `name` ("start", "end", "lost") as parsed JSON, in file order."""
    import json

    marker = f'"name":"{name}","cat":"dftracer"'.encode()
    damage = Damage(Path(path))
    found = []
    for _, _, text in iter_members(path, damage):
        if parse.event_shape(text) is None:
            found += [json.loads(line) for line in text.splitlines() if marker in line]
    return found
