"""The aggregates of an analysis made of intervals, whose unions must stay exact across
chunks, traces and nodes: the busy time of each process, rank and worker slot; a job's I/O,
data and compute time; the bytes read of each file. Each is kept as spilled runs
(ioobserve.analysis.spilled_runs) under named keys, and measured here, beside its store."""

from __future__ import annotations

from typing import NamedTuple

import polars as pl

from ioobserve.analysis.aggregation import Aggregate, ChunkInputs, stacked
from ioobserve.analysis.files import read_ranges
from ioobserve.analysis.intervals import END, START, merge_now
from ioobserve.analysis.spilled_runs import IntervalRuns
from ioobserve.data import schema as s
from ioobserve.data.totals import FIRST_NS, LAST_NS

SCOPE, SCOPE_IO, SCOPE_DATA, SCOPE_COMPUTE = "scope", "io", "data", "compute"
IO_BUSY_NS, DATA_BUSY_NS = "io_busy_ns", "data_busy_ns"
GROUP, GROUP_PROCESS, GROUP_RANK, GROUP_WORKER = "group", "process", "rank", "worker"
EVERY, IO_OR_COMPUTE, LENGTH = "every", "io_or_compute", "length"
EVERY_JOB = ("every job",)  # the target of every job's intervals together (a job is a string or None)
THREAD = [s.LAYER, s.JOB, s.HOST, s.PID, s.TID]


class JobKey(NamedTuple):
    """A job's intervals of one scope (io, data, compute) in one layer."""

    layer: str
    job: str | tuple | None  # EVERY_JOB as a measurement's target
    scope: str


class OwnedKey(NamedTuple):
    """A process's intervals of one scope (io, data), with whose they are."""

    layer: str
    pid: int
    job: str | None
    rank: int | None
    worker: int | None
    host: str
    scope: str


class GroupKey(NamedTuple):
    """What an owned interval's length counts for: a process, a rank or a worker slot."""

    layer: str
    group: str
    host: str
    pid: int | None
    job: str | None
    rank: int | None
    worker: int | None
    scope: str


class RangeKey(NamedTuple):
    """The byte ranges read of one file, in one layer."""

    layer: str
    file_id: int


def runs_of(frame: pl.DataFrame, key: type[NamedTuple]) -> IntervalRuns:
    """Intervals of `frame` (the key's fields as columns, START, END) as a store of runs."""
    runs = IntervalRuns(key)
    runs.add(frame.with_columns(pl.col(s.LAYER).cast(pl.String)), list(key._fields))
    return runs


def all_runs(values: list[IntervalRuns], key: type[NamedTuple]) -> IntervalRuns:
    """One store listing the runs of all of `values`."""
    combined = IntervalRuns(key)
    for part in values:
        combined.extend(part)
    return combined


class OwnedIntervals(Aggregate):
    """Each process's merged I/O and data intervals, for busy time per process, rank and worker."""

    name, keys = "owned", OwnedKey._fields

    def chunk(self, inputs: ChunkInputs) -> dict[str, pl.DataFrame]:
        """The chunk's processes' intervals, with their owners and host."""
        timing, host = inputs.timing, pl.lit(inputs.host).alias(s.HOST)
        return {"owned": pl.concat([frame.select(*OwnedKey._fields[:-2], host, pl.lit(scope).alias(SCOPE), START, END)
                                    for scope, frame in ((SCOPE_IO, timing.processes), (SCOPE_DATA, timing.data))])}

    def finish(self, frames: dict[str, pl.DataFrame], inputs: ChunkInputs) -> IntervalRuns:
        """The intervals as runs."""
        return runs_of(frames["owned"], OwnedKey)

    def combine(self, values: list[IntervalRuns | pl.DataFrame]) -> IntervalRuns | pl.DataFrame:
        """Every partial's runs; or their lengths, each node's measured apart (its own processes')."""
        if isinstance(values[0], pl.DataFrame):
            return pl.concat(values)
        return all_runs(values, OwnedKey)

    def measure(self, value: IntervalRuns | pl.DataFrame) -> pl.DataFrame:
        """The busy times (owned_lengths), unless measured already."""
        return value if isinstance(value, pl.DataFrame) else owned_lengths(value)


def owned_lengths(runs: IntervalRuns) -> pl.DataFrame:
    """Busy time per process, rank and worker slot, in every layer: LAYER, GROUP, HOST, PID, JOB,
    RANK, WORKER: IO_BUSY_NS, DATA_BUSY_NS (the unions of their processes' calls)."""
    def targets(key: OwnedKey) -> list[GroupKey]:
        found = [GroupKey(key.layer, GROUP_PROCESS, key.host, key.pid, None, None, None, key.scope)]
        if key.rank is not None:
            found.append(GroupKey(key.layer, GROUP_RANK, key.host, None, key.job, key.rank, None, key.scope))
            if key.worker is not None:
                found.append(GroupKey(key.layer, GROUP_WORKER, key.host, None, key.job, key.rank, key.worker, key.scope))
        return found

    rows = [(*target[:-1], target.scope == SCOPE_IO, length) for target, length in runs.union_lengths(targets).items()]
    frame = pl.DataFrame(rows, orient="row", schema={
        s.LAYER: pl.String, GROUP: pl.String, s.HOST: pl.String, s.PID: pl.UInt32, s.JOB: pl.String, s.RANK: pl.Int32,
        s.WORKER: pl.Int32, "_io": pl.Boolean, LENGTH: pl.UInt64})
    keys = [s.LAYER, GROUP, s.HOST, s.PID, s.JOB, s.RANK, s.WORKER]
    io = frame.filter(pl.col("_io")).select(*keys, pl.col(LENGTH).alias(IO_BUSY_NS))
    data = frame.filter(~pl.col("_io")).select(*keys, pl.col(LENGTH).alias(DATA_BUSY_NS))
    return io.join(data, on=keys, how="left", nulls_equal=True).with_columns(pl.col(DATA_BUSY_NS).fill_null(0))


def owned_busy(lengths: pl.DataFrame, layer: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The layer's busy time (IO_BUSY_NS, DATA_BUSY_NS) per process (HOST, PID), and per rank
    and worker slot (GROUP, HOST, JOB, RANK, WORKER), of owned_lengths."""
    both = lengths.filter(pl.col(s.LAYER) == layer).drop(s.LAYER)
    processes = both.filter(pl.col(GROUP) == GROUP_PROCESS).select(s.HOST, s.PID, IO_BUSY_NS, DATA_BUSY_NS)
    return processes, both.filter(pl.col(GROUP) != GROUP_PROCESS).drop(s.PID)


class JobTime(NamedTuple):
    """A job's intervals per scope, and each thread's first and last timed call: the compute
    between one partial's last call of a thread and the next one's first is added on combining."""

    runs: IntervalRuns  # JobKey: START, END
    threads: pl.DataFrame  # THREAD: FIRST_NS, LAST_NS


class JobIntervals(Aggregate):
    """A job's I/O, data and compute intervals (compute: a thread's time between its calls)."""

    name, keys = "intervals", JobKey._fields

    def chunk(self, inputs: ChunkInputs) -> dict[str, pl.DataFrame]:
        """The chunk's job intervals per scope, and its threads' first and last calls."""
        timing = inputs.timing
        thread = [s.LAYER, s.PID, s.CGROUP, s.TID]
        gaps = timing.threads.select(s.LAYER, s.JOB, pl.col(END).alias(START), pl.col(START).shift(-1).over(thread).alias(END))
        job = [s.LAYER, s.JOB]
        intervals = pl.concat([merge_now(frame, job).with_columns(pl.lit(scope).alias(SCOPE)) for scope, frame in (
            (SCOPE_IO, timing.processes), (SCOPE_DATA, timing.data), (SCOPE_COMPUTE, gaps.drop_nulls(END)))])
        threads = timing.threads.group_by(s.LAYER, s.JOB, s.PID, s.TID).agg(
            pl.col(START).min().alias(FIRST_NS), pl.col(END).max().alias(LAST_NS)).with_columns(inputs.on_host)
        return {"intervals": intervals, "threads": threads}

    def finish(self, frames: dict[str, pl.DataFrame], inputs: ChunkInputs) -> JobTime:
        """The intervals as runs, with the threads."""
        return JobTime(runs_of(frames["intervals"], JobKey), frames["threads"])

    def combine(self, values: list[JobTime]) -> JobTime:
        """Every partial's intervals, with the compute of threads between one partial's last
        call and the next one's first."""
        threads = stacked([v.threads for v in values])
        seams = (
            threads.sort(FIRST_NS).with_columns(pl.col(LAST_NS).shift(1).over(THREAD).alias(START))
            .filter(pl.col(START).is_not_null() & (pl.col(FIRST_NS) > pl.col(START)))
            .select(pl.col(s.LAYER).cast(pl.String), s.JOB, pl.lit(SCOPE_COMPUTE).alias(SCOPE), START,
                    pl.col(FIRST_NS).alias(END))
        )
        runs = all_runs([v.runs for v in values], JobKey)
        runs.add(seams, list(JobKey._fields))
        return JobTime(runs, threads.group_by(THREAD).agg(pl.col(FIRST_NS).min(), pl.col(LAST_NS).max()))

    def measure(self, value: JobTime | pl.DataFrame) -> pl.DataFrame:
        """The unions of every layer (busy_unions), unless measured already."""
        return value if isinstance(value, pl.DataFrame) else busy_unions(value.runs)


def busy_unions(runs: IntervalRuns) -> pl.DataFrame:
    """LAYER, JOB, EVERY, SCOPE: LENGTH of the union of the intervals of each layer, per job and
    over every job (EVERY), for each scope and for I/O and compute together (IO_OR_COMPUTE):
    the I/O no compute hid is the latter less the compute."""
    jobs: dict[str, set] = {}
    for key in runs.keys:
        jobs.setdefault(key.layer, set()).add(key.job)
    alone = {layer for layer, held in jobs.items() if len(held) == 1}  # every job's union is the one job's

    def targets(key: JobKey) -> list[JobKey]:
        scopes = [key.scope, IO_OR_COMPUTE] if key.scope in (SCOPE_IO, SCOPE_COMPUTE) else [key.scope]
        owners = (key.job,) if key.layer in alone else (key.job, EVERY_JOB)
        return [JobKey(key.layer, owner, each) for owner in owners for each in scopes]

    lengths = runs.union_lengths(targets)
    lengths |= {JobKey(key.layer, EVERY_JOB, key.scope): length for key, length in lengths.items() if key.layer in alone}
    rows = [(key.layer, None if key.job is EVERY_JOB else key.job, key.job is EVERY_JOB, key.scope, length)
            for key, length in lengths.items()]
    return pl.DataFrame(rows, schema={s.LAYER: pl.String, s.JOB: pl.String, EVERY: pl.Boolean, SCOPE: pl.String,
                                      LENGTH: pl.UInt64}, orient="row")


class ReadRanges(Aggregate):
    """The byte ranges read of each file, for the distinct bytes read and the re-reads."""

    name, keys = "ranges", RangeKey._fields

    def chunk(self, inputs: ChunkInputs) -> dict[str, pl.LazyFrame]:
        """The chunk's merged ranges per file."""
        return {"ranges": read_ranges(inputs.io.with_columns(pl.col(s.FILE_ID).alias(s.PATH)), [s.LAYER])
                .rename({s.PATH: s.FILE_ID})}

    def finish(self, frames: dict[str, pl.DataFrame], inputs: ChunkInputs) -> IntervalRuns:
        """The ranges as runs."""
        return runs_of(frames["ranges"], RangeKey)

    def combine(self, values: list[IntervalRuns]) -> IntervalRuns:
        """Every partial's runs."""
        return all_runs(values, RangeKey)

    def measure(self, value: IntervalRuns | pl.DataFrame) -> pl.DataFrame:
        """LAYER, FILE_ID: LENGTH, the bytes of each file read at least once, unless measured already."""
        if isinstance(value, pl.DataFrame):
            return value
        lengths = value.union_lengths(lambda key: [key])
        return pl.DataFrame([(*key, length) for key, length in lengths.items()], orient="row",
                            schema={s.LAYER: pl.String, s.FILE_ID: pl.UInt64, LENGTH: pl.UInt64})
