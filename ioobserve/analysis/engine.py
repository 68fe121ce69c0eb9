"""Running an analysis over traces: one partial per trace (ioobserve.analysis.trace_partial),
here one trace after the other, or as Dask tasks (ioobserve.analysis.distributed), combined
into one."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ioobserve.analysis.partial import Partial, fold
from ioobserve.analysis.trace_partial import DEFAULT_MEMORY_MB, Filters, chunk_plan, trace_partial
from ioobserve.trace.members import Damage, read_index
from ioobserve.trace.read.reader import own_records


def analyze_partial(paths: Sequence[Path], filters: Filters = Filters(), scheduler: str | None = None,
                    damage: list[Damage] | None = None, memory_mb: int = DEFAULT_MEMORY_MB) -> Partial:
    """All traces' events as one partial: here, one trace after the other, or on the Dask
    cluster at `scheduler` ("local" starts one on this machine), a task per trace; each trace
    is read in chunks that keep a process near `memory_mb`."""
    if scheduler is None:
        plan, folded = chunk_plan(memory_mb), None
        for path in paths:  # one trace's partial at a time beside the ones folded
            folded = fold(folded, [trace_partial(Path(path), filters, damage, plan)])
        return folded
    from ioobserve.analysis.distributed import dask_partial

    return dask_partial([Path(path) for path in paths], filters, scheduler, damage, memory_mb)


def trace_start_ns(paths: Sequence[Path]) -> int | None:
    """When the earliest of the traces starts (its index, else its start record), for times
    given relative to it."""
    starts = []
    for path in paths:
        entries = read_index(Path(path))
        found = [e.ts_min for e in entries or [] if e.ts_min is not None]
        if not found:
            found = [record["ts"] * 1000 for record in own_records(Path(path), "start")]
        starts += found
    return min(starts) if starts else None
