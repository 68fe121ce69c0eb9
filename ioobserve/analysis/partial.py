"""What one chunk of one trace contributes to an analysis, and how contributions combine.

A chunk's events (ids, not names: ioobserve.trace.read.chunks) are reduced at once to the
aggregates of AGGREGATES, each declared once with its keys, its step over a chunk and its
combination: small frames keyed by host, pid, cgroup, file id, layer, op and kind
(ioobserve.analysis.frame_aggregates), and intervals where a union must stay exact across chunks
and nodes, kept as spilled runs (ioobserve.analysis.interval_aggregates). Partials of any number of
chunks, traces and nodes combine into one, in any grouping: that is what the local loop and
the Dask tasks both do.

Exact across chunks: every figure. Totals, sizes, patterns (each chunk's first access of a
stream is re-classified against where the previous chunk left it), busy, data and compute
time and unoverlapped I/O (the compute between a thread's chunks added), bytes re-read,
stat-then-open pairs, the timeline."""

from __future__ import annotations

import polars as pl

from ioobserve.analysis import frame_aggregates as a
from ioobserve.analysis import interval_aggregates as b
from ioobserve.analysis.aggregation import Aggregate, ChunkInputs
from ioobserve.analysis.lineage import Lineage
from ioobserve.data import schema as s
from ioobserve.trace.read.chunks import TraceTables

AGGREGATES: list[Aggregate] = [
    a.Totals(), a.SIZES, a.Patterns(), b.OwnedIntervals(), b.JobIntervals(), b.ReadRanges(), a.Opens(),
    a.Timeline(), a.Lanes(), a.REQUEST_LATENCY, a.REQUEST_STATUS, a.CALL_LATENCY, a.FUNCTIONS, Lineage(), a.OWNERS, a.FILES, a.MOUNTS, a.PROCESSES,
]


class Partial:
    """Aggregates of some events, by name (an attribute each: `part.totals`); their frames
    hold ids (FILE_ID, PID, CGROUP) named by `files` and `processes`."""

    def __init__(self, values: dict[str, object]):
        self.values = values

    def __getattr__(self, name: str):
        try:
            return self.__dict__["values"][name]
        except KeyError:
            raise AttributeError(name) from None


def process_table(tables: TraceTables, host: str) -> pl.DataFrame:
    """HOST, PID: PPID, COMM and the latest context (JOB from the environment, RANK, WORKER)."""
    context = tables.contexts.sort("since").group_by(s.PID).agg(
        pl.col("env_job").drop_nulls().last().alias(s.JOB), pl.col(s.RANK).drop_nulls().last(),
        pl.col(s.WORKER).drop_nulls().last())
    return (
        tables.processes.join(context, on=s.PID, how="full", coalesce=True)
        .with_columns(pl.lit(host).alias(s.HOST))
        .select(s.HOST, s.PID, s.PPID, s.COMM, s.JOB, s.RANK, s.WORKER)
    )


def chunk_partial(chunk: pl.DataFrame, tables: TraceTables, processes: pl.DataFrame,
                  aggregates: list[Aggregate] = AGGREGATES) -> Partial:
    """The partial of one chunk of events (schema.CHUNK_SCHEMA) of a trace: every aggregate's,
    or those asked (the partials made of it hold those only)."""
    inputs = ChunkInputs(chunk, tables, processes)
    steps = {aggregate.name: aggregate.chunk(inputs) for aggregate in aggregates}
    lazy = [(name, part) for name, frames in steps.items() for part, frame in frames.items() if isinstance(frame, pl.LazyFrame)]
    for (name, part), frame in zip(lazy, pl.collect_all([steps[name][part] for name, part in lazy]), strict=True):
        steps[name][part] = frame  # every aggregate's lazy frames at once: Polars runs them side by side
    return Partial({aggregate.name: aggregate.finish(steps[aggregate.name], inputs) for aggregate in aggregates})


def _held(part: Partial) -> list[Aggregate]:
    """The aggregates a partial holds."""
    return [aggregate for aggregate in AGGREGATES if aggregate.name in part.values]


def combine(parts: list[Partial]) -> Partial:
    """One partial holding all of `parts`."""
    if len(parts) == 1:
        return parts[0]
    return Partial({aggregate.name: _combined(aggregate, [part.values[aggregate.name] for part in parts])
                    for aggregate in _held(parts[0])})


def _combined(aggregate: Aggregate, values: list):
    """The aggregate's values combined; None where the partials hold none (the Dask path
    measures the intervals of many nodes apart from the rest: ioobserve.analysis.distributed)."""
    return None if all(value is None for value in values) else aggregate.combine(values)


def fold(folded: Partial | None, later: list[Partial]) -> Partial:
    """`folded` (None: nothing yet) with the partials that come after it in time, combined;
    the timeline and lanes are coarsened as the span grows, so that a long trace's partial
    stays about as small as a short one's."""
    part = combine(([folded] if folded is not None else []) + later)
    return Partial({aggregate.name: aggregate.coarsen(part.values[aggregate.name]) for aggregate in _held(part)})


def measured(part: Partial) -> Partial:
    """The partial as the results read it: its intervals' unions measured."""
    return Partial({aggregate.name: aggregate.measure(part.values[aggregate.name]) for aggregate in _held(part)})
