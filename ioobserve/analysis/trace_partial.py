"""One trace file's partial, read chunk by chunk in bounded memory, and what selects its
events: the step that the local loop (ioobserve.analysis.engine) and each Dask task
(ioobserve.analysis.distributed) both run."""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from ioobserve.analysis.aggregation import Aggregate
from ioobserve.analysis.partial import AGGREGATES, Partial, chunk_partial, fold, process_table
from ioobserve.data import schema as s
from ioobserve.trace.members import Damage
from ioobserve.trace.read.chunks import CHUNK_ROWS, TraceTables, event_chunks, trace_tables
from ioobserve.trace.read.reader import Selection


# Much of a chunk's reduction runs on one core (window functions, joins of small frames): two
# chunks at once took a 10 M-event analysis from 15.3 s to 13.9 s here (2 cores), same results.
REDUCERS = 2
FOLD = 8  # chunk partials combined into the trace's at once
DEFAULT_MEMORY_MB = 512
# Measured on a 6 M-event flood and a 4 M-event trace of sparse reads (tests/cli/test_analysis_memory.py):
# the process with the trace's tables and the final merge, then each chunk row while it is
# read and reduced, two reducers at once.
BASE_MB = 200
ROW_BYTES = 1600
MIN_CHUNK_ROWS = 16384


@dataclass(frozen=True)
class ChunkPlan:
    """How a trace is read: `rows` events a chunk, `reducers` chunks reduced at once."""

    rows: int = CHUNK_ROWS
    reducers: int = REDUCERS


def chunk_plan(memory_mb: int = DEFAULT_MEMORY_MB) -> ChunkPlan:
    """The chunks that keep an analysis's peak memory near `memory_mb`, whatever the trace's size
    (one reducer below 400 MiB; at least MIN_CHUNK_ROWS a chunk)."""
    reducers = REDUCERS if memory_mb >= 400 else 1
    rows = (memory_mb - BASE_MB) * (1 << 20) // ROW_BYTES * REDUCERS // (REDUCERS + reducers - 1)
    return ChunkPlan(rows=max(MIN_CHUNK_ROWS, rows), reducers=reducers)


@dataclass(frozen=True)
class Filters:
    """Which events an analysis keeps: jobs, pids (with their descendants), path prefixes and
    a time range [start_ns, end_ns); None keeps all."""

    jobs: tuple[str, ...] | None = None
    pids: tuple[int, ...] | None = None
    path_prefixes: tuple[str, ...] | None = None
    start_ns: int | None = None
    end_ns: int | None = None

    def selection(self) -> Selection:
        """What the reader can skip by itself: the time range (pids need the process tree)."""
        return Selection(start_ns=self.start_ns, end_ns=self.end_ns)

    def events(self, chunk: pl.DataFrame, tables: TraceTables) -> pl.DataFrame:
        """The chunk's events these filters keep."""
        keep = pl.lit(True)
        if self.pids is not None:
            keep = keep & pl.col(s.PID).is_in(sorted(descendants(tables.processes, self.pids)))
        if self.jobs is not None:
            cgroups = tables.cgroups.filter(pl.col(s.JOB).is_in(self.jobs)).get_column(s.CGROUP)
            by_environment = tables.contexts.filter(pl.col("env_job").is_in(self.jobs)).get_column(s.PID).unique()
            keep = keep & (pl.col(s.CGROUP).is_in(cgroups.implode()) | pl.col(s.PID).is_in(by_environment.implode()))
        if self.path_prefixes is not None:
            paths = tables.files.get_column(s.PATH)
            wanted = pl.any_horizontal(paths.str.starts_with(prefix) for prefix in self.path_prefixes) if paths.len() else None
            ids = tables.files.filter(wanted).get_column(s.FILE_ID) if wanted is not None else pl.Series([], dtype=pl.UInt64)
            keep = keep & pl.col(s.FILE_ID).is_in(ids.implode())
        return chunk.filter(keep)


def descendants(processes: pl.DataFrame, roots: Iterable[int]) -> set[int]:
    """The pids of `roots` and of every process they started (from the trace's process table)."""
    children: dict[int, list[int]] = {}
    for pid, ppid in processes.select(s.PID, s.PPID).iter_rows():
        children.setdefault(ppid, []).append(pid)
    found, todo = set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo += children.get(pid, [])
    return found


def trace_partial(path: Path, filters: Filters = Filters(), damage: list[Damage] | None = None,
                  plan: ChunkPlan = ChunkPlan(), aggregates: list[Aggregate] = AGGREGATES) -> Partial:
    """The partial of one trace file (a Dask task), read in the chunks of `plan`: every
    aggregate's, or those asked."""
    # Polars' in-memory engine: on these chunks its streaming one took 1.3x the peak memory
    # and 1.1-1.25x the time (bench/analysis.py)
    with pl.Config(engine_affinity="in-memory"):
        return _trace_partial(path, filters, damage, plan, aggregates)


def _trace_partial(path: Path, filters: Filters, damage: list[Damage] | None, plan: ChunkPlan,
                   aggregates: list[Aggregate]) -> Partial:
    tables = trace_tables(path, damage)
    processes = process_table(tables, tables.host)
    def reduce(chunk: pl.DataFrame) -> Partial:
        return chunk_partial(filters.events(chunk, tables), tables, processes, aggregates)

    # Chunks are reduced on `reducers` threads while the next one is read: reducers + 1 chunks
    # at most in memory. Their partials are folded in, in time order, FOLD at a time.
    folded, done, pending = None, [], []
    with ThreadPoolExecutor(max_workers=plan.reducers) as reducer:
        for chunk in event_chunks(path, filters.selection(), damage, plan.rows):
            if len(pending) == plan.reducers:
                done.append(pending.pop(0).result())
            if len(done) == FOLD:
                folded, done = fold(folded, done), []
            pending.append(reducer.submit(reduce, chunk))
        done += [reduced.result() for reduced in pending]
    if done or folded is None:
        folded = fold(folded, done or [chunk_partial(_no_events(), tables, processes, aggregates)])  # no events: an empty partial
    return folded


def _no_events() -> pl.DataFrame:
    return pl.DataFrame(schema=s.CHUNK_SCHEMA)
