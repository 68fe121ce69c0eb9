"""The analysis on Dask distributed: one task per trace file, each running the same Polars
partial as the local loop (so both give the same numbers), combined by the caller."""

from __future__ import annotations

import os
from pathlib import Path

from ioobserve.analysis.partial import Partial
from ioobserve.trace.members import Damage

CONNECT_TIMEOUT = "10s"


class SchedulerError(Exception):
    """The Dask scheduler cannot be reached or Dask is not installed."""


def _task(path: str, filters, plan) -> tuple[Partial, list[Damage]]:
    """Runs on a Dask worker: the partial of one trace file and what was damaged in it."""
    from ioobserve.analysis.run import ChunkPlan, trace_partial

    damage: list[Damage] = []
    return trace_partial(Path(path), filters, damage, plan or ChunkPlan()), damage


def _client(scheduler: str):
    """A client of the cluster at `scheduler`: "local" (a new one on this machine, loopback
    only, no dashboard), a scheduler file, or an address."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise SchedulerError("--scheduler needs Dask: pip install 'ioobserve[dask]'") from None
    try:
        if scheduler == "local":
            cluster = LocalCluster(n_workers=min(os.cpu_count() or 1, 4), threads_per_worker=1, host="127.0.0.1",
                                   dashboard_address="127.0.0.1:0", processes=True)  # loopback only, any free port
            return Client(cluster), cluster
        if Path(scheduler).is_file():
            return Client(scheduler_file=scheduler, timeout=CONNECT_TIMEOUT), None
        return Client(scheduler, timeout=CONNECT_TIMEOUT), None
    except (OSError, TimeoutError, ValueError) as exc:
        raise SchedulerError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None


def dask_partials(paths: list[Path], filters, scheduler: str, damage: list[Damage] | None = None,
                  plan=None) -> list[Partial]:
    """The partial of each trace, computed as Dask tasks on the cluster at `scheduler`; the
    workers must see the trace files at the same (absolute) paths."""
    client, cluster = _client(scheduler)
    try:
        futures = client.map(_task, [str(Path(path).resolve()) for path in paths], filters=filters, plan=plan, pure=False)
        done = client.gather(futures)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    if damage is not None:
        damage.extend(found for _, task_damage in done for found in task_damage)
    return [partial for partial, _ in done]
