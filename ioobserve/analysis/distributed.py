"""The analysis on Dask distributed: the same Polars partials as the local loop (so both give
the same numbers), reduced on the workers; the client receives one partial.

1. A task per trace file.
2. Each node's partials are combined (FAN_IN at a time, in a tree), and its processes' busy
   time is measured there: those intervals are the node's alone, and travel on as lengths.
3. The intervals that must meet across nodes are dealt into as many pieces as there are
   workers: a job's I/O, data and compute time by time range, the bytes read of a file by
   file. Each piece is measured on a worker, and the lengths add up.
4. The rest (sums, sizes, patterns, the timeline, tables) is combined in a tree as in step 2,
   and the lengths are put in on a worker."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import polars as pl

from ioobserve.analysis.interval_aggregates import EVERY, LENGTH, SCOPE, JobKey, OwnedIntervals, RangeKey, ReadRanges, all_runs, busy_unions
from ioobserve.analysis.partial import Partial, combine
from ioobserve.analysis.trace_partial import ChunkPlan, chunk_plan, trace_partial
from ioobserve.data import schema as s
from ioobserve.data.totals import FIRST_NS, LAST_NS
from ioobserve.trace.members import Damage

CONNECT_TIMEOUT = "10s"
FAN_IN = 4  # partials one combining task takes: a tree of log4(traces) levels
MIN_TASK_MEMORY_MB = 256  # a local worker's share of --memory is never less than this
ACROSS_NODES = ("intervals", "ranges")  # measured in pieces, apart from the tree
Done = tuple[Partial, list[Damage]]  # what each task returns: a partial, and what was damaged in its traces


class SchedulerError(Exception):
    """The Dask scheduler cannot be reached or Dask is not installed."""


def _trace_task(path: str, filters, plan) -> Done:
    """One trace file's partial."""
    damage: list[Damage] = []
    return trace_partial(Path(path), filters, damage, plan or ChunkPlan()), damage


def _combine_task(*done: Done) -> Done:
    """Several tasks' partials as one."""
    return combine([partial for partial, _ in done]), [found for _, damage in done for found in damage]


def _host_of(done: Done) -> str:
    """The node a trace's partial is of ("" for one without events)."""
    hosts = done[0].processes.get_column(s.HOST).drop_nulls()
    return hosts.first() if hosts.len() else ""


def _node_task(done: Done) -> Done:
    """A node's whole partial with its processes' busy time measured."""
    partial, damage = done
    owned = OwnedIntervals()
    return Partial({**partial.values, owned.name: owned.measure(partial.owned)}), damage


def _span(done: Done) -> tuple[int | None, int | None]:
    """The first and last event of a partial."""
    totals = done[0].totals
    return totals.get_column(FIRST_NS).min(), totals.get_column(LAST_NS).max()


def _deal_task(done: Done, bounds: np.ndarray, pieces: int) -> list[tuple]:
    """A node's intervals that meet other nodes', dealt: its job intervals by time range, its
    files' ranges by file; one (job runs, file runs) per piece."""
    partial = done[0]
    jobs = partial.intervals.runs.split(None, pieces, bounds)
    ranges = partial.ranges
    piece_of_key = np.array([key.file_id % pieces for key in ranges.keys] or [0], dtype=np.int64)
    files = ranges.split(lambda codes, _starts: piece_of_key[codes], pieces)
    return list(zip(jobs, files, strict=True))


def _piece(dealt: list[tuple], index: int) -> tuple:
    """One piece of a node's dealt intervals (taken where they were dealt: only it travels)."""
    return dealt[index]


def _measure_task(*pieces: tuple) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One piece of every node's intervals, measured: job unions and distinct bytes read."""
    jobs = busy_unions(all_runs([job for job, _ in pieces], JobKey))
    ranges = ReadRanges().measure(all_runs([files for _, files in pieces], RangeKey))
    return jobs, ranges


def _without_intervals(done: Done) -> Done:
    """A node's partial less what is measured in pieces."""
    partial, damage = done
    return Partial({**partial.values, **dict.fromkeys(ACROSS_NODES)}), damage


def _assemble_task(done: Done, *measured: tuple[pl.DataFrame, pl.DataFrame]) -> Done:
    """The combined partial with the pieces' lengths: a job's added over the time ranges."""
    partial, damage = done
    jobs = pl.concat([jobs for jobs, _ in measured]).group_by(s.LAYER, s.JOB, EVERY, SCOPE, maintain_order=True).agg(
        pl.col(LENGTH).sum())
    ranges = pl.concat([ranges for _, ranges in measured])
    return Partial({**partial.values, "intervals": jobs, "ranges": ranges}), damage


def local_workers() -> int:
    """How many workers a local cluster has: one per core."""
    return os.cpu_count() or 1


def _client(scheduler: str):
    """A client of the cluster at `scheduler`: "local" (workers as threads of this process:
    nothing listens, nothing is copied between processes, and it starts in a fraction of a
    second), a scheduler file, or an address."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise SchedulerError("--scheduler needs Dask: pip install 'ioobserve[dask]'") from None
    try:
        if scheduler == "local":
            cluster = LocalCluster(n_workers=local_workers(), threads_per_worker=1, processes=False,
                                   dashboard_address=None)
            return Client(cluster), cluster
        if Path(scheduler).is_file():
            return Client(scheduler_file=scheduler, timeout=CONNECT_TIMEOUT), None
        return Client(scheduler, timeout=CONNECT_TIMEOUT), None
    except (OSError, TimeoutError, ValueError) as exc:
        raise SchedulerError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None


def _tree(client, futures: list, last=None):
    """The futures' partials combined on the workers, neighbours first (the traces' order is
    kept, as the local loop keeps it); `last`, a task run on the result."""
    level = futures
    while len(level) > 1:
        level = [client.submit(_combine_task, *level[at:at + FAN_IN], pure=False) for at in range(0, len(level), FAN_IN)]
    return client.submit(last, level[0], pure=False) if last is not None else level[0]


def _bounds(spans: list[tuple[int | None, int | None]], pieces: int) -> np.ndarray:
    """pieces + 1 times cutting the traces' span in equal ranges, the first and last open."""
    firsts = [first for first, _ in spans if first is not None]
    lasts = [last for _, last in spans if last is not None]
    first, last = (min(firsts), max(lasts)) if firsts else (0, 0)
    inner = np.linspace(first, last, pieces + 1)[1:-1].astype(np.int64)
    return np.concatenate([[np.iinfo(np.int64).min], inner, [np.iinfo(np.int64).max]])


def dask_partial(paths: list[Path], filters, scheduler: str, damage: list[Damage] | None = None,
                 memory_mb: int | None = None) -> Partial:
    """All traces' events as one partial, reduced on the cluster at `scheduler` (see the
    module's docstring); the workers must see the trace files at the same (absolute) paths.
    Each task reads its trace in chunks that keep it near `memory_mb`, which a local
    cluster's workers, sharing this process, share."""
    client, cluster = _client(scheduler)
    if memory_mb is not None and cluster is not None:
        memory_mb = max(MIN_TASK_MEMORY_MB, memory_mb // local_workers())
    plan = chunk_plan(memory_mb) if memory_mb is not None else None
    try:
        traces = client.map(_trace_task, [str(Path(path).resolve()) for path in paths], filters=filters, plan=plan,
                            pure=False)
        by_node: dict[str, list] = {}
        for future, host in zip(traces, client.gather(client.map(_host_of, traces, pure=False)), strict=True):
            by_node.setdefault(host, []).append(future)
        nodes = [_tree(client, futures, _node_task) for futures in by_node.values()]
        pieces = max(1, len(client.scheduler_info()["workers"]))
        bounds = _bounds(client.gather(client.map(_span, nodes, pure=False)), pieces)
        dealt = [client.submit(_deal_task, node, bounds, pieces, pure=False) for node in nodes]
        measured = [client.submit(_measure_task, *[client.submit(_piece, deal, index, pure=False) for deal in dealt],
                                  pure=False) for index in range(pieces)]
        rest = _tree(client, [client.submit(_without_intervals, node, pure=False) for node in nodes])
        partial, found = client.submit(_assemble_task, rest, *measured, pure=False).result()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    if damage is not None:
        damage.extend(found)
    return partial
