"""What every aggregate of an analysis is (its keys, its step over one chunk, its combination)
and what a chunk's steps read: the chunk's events cut once into the frames they share."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property

import polars as pl

from ioobserve.analysis.intervals import event_intervals, merge_now
from ioobserve.analysis.timeline import bin_exponent
from ioobserve.data import schema as s
from ioobserve.data.operations import DATA_KINDS, IO_LAYERS, KERNEL_VIEW, KIND, METADATA, kernel_view, op_kind
from ioobserve.trace.read.chunks import TraceTables

LANE_DETAIL = 4000  # lanes keep gaps longer than a chunk's span / LANE_DETAIL
# Layers whose time is the program's I/O, for busy and unoverlapped time: the ones totals come
# from, and the interpreter's calls.
TIMED_LAYERS = [*IO_LAYERS, s.LAYER_PYTHON]
OWNED = [s.LAYER, s.PID, s.CGROUP]  # a process's intervals, before they are named by their owner


def local(keys: list[str]) -> list[str]:
    """Keys within one chunk: all but HOST, which is the chunk's."""
    return [key for key in keys if key != s.HOST]


@dataclass(frozen=True)
class Timing:
    """A chunk's merged intervals of timed calls, named by their owners: per process, per
    process's data calls and per thread; the processes' unnamed, for the lanes."""

    processes: pl.DataFrame
    data: pl.DataFrame
    threads: pl.DataFrame
    unnamed: pl.DataFrame


class ChunkInputs:
    """One chunk of one trace's events (ids: schema.CHUNK_SCHEMA), with what every aggregate's
    step reads, each made once."""

    def __init__(self, chunk: pl.DataFrame, tables: TraceTables, processes: pl.DataFrame):
        self.tables = tables
        self.processes = processes  # HOST, PID: PPID, COMM, JOB, RANK, WORKER (partial.process_table)
        self.host = processes.get_column(s.HOST).first() if processes.height else tables.host
        # Eager, once: every frame below reads them; in time order, so that merges need not sort.
        # A chunk is one host's: HOST is added to each aggregate, not grouped by per event.
        events = chunk if chunk.get_column(s.TS).is_sorted() else chunk.sort(s.TS)  # a copy's chunks are in order
        events = events.with_columns(op_kind().alias(KIND))
        # Totals keep each event's layer; the rest analyse the kernel's view (syscalls and the
        # io_uring and AIO requests) as one layer, whose I/O it all is.
        self.by_layer = events.lazy()
        if events.get_column(s.LAYER).is_in(KERNEL_VIEW[1:]).any():  # the relabelling costs a cast of every row
            events = events.with_columns(kernel_view())
        self.io = events.filter(pl.col(s.LAYER).is_in(IO_LAYERS)).lazy()
        # Of the Python spans, the innermost: the calls the I/O was made in (outer ones hold them).
        self.timed = events.filter(pl.col(s.LAYER).is_in(TIMED_LAYERS) & (pl.col(s.PY_FRAME).fill_null(0) == 0)).lazy()
        self.events = events.lazy()
        self.span = int(chunk.get_column(s.TS).max() - chunk.get_column(s.TS).min()) if chunk.height else 0
        self.exponent = bin_exponent(self.span)
        self.metadata = self.io.filter(pl.col(KIND) == METADATA).with_columns(pl.col(s.FILE_ID).alias(s.PATH))
        self.on_host = pl.lit(self.host).alias(s.HOST)

    @cached_property
    def owners(self) -> pl.DataFrame:
        """PID, CGROUP -> JOB (the cgroup's, else the environment's), RANK, WORKER."""
        cgroup_jobs = self.tables.cgroups.select(s.CGROUP, pl.col(s.JOB).alias("_cgroup_job")).lazy()
        return (
            self.events.select(s.PID, s.CGROUP).unique()
            .join(cgroup_jobs, on=s.CGROUP, how="left")
            .join(self.processes.lazy().drop(s.HOST), on=s.PID, how="left")
            .select(s.PID, s.CGROUP, pl.coalesce("_cgroup_job", s.JOB).alias(s.JOB), s.RANK, s.WORKER)
        ).collect()

    @cached_property
    def timing(self) -> Timing:
        """The chunk's timed calls merged per thread, per process and per process's data calls."""
        threads = merge_now(event_intervals(self.timed, [*OWNED, s.TID]).collect(), [*OWNED, s.TID])
        # A process's intervals from its threads' (the same when it has one thread, as most do)
        several = threads.group_by(OWNED).agg(pl.col(s.TID).n_unique()).get_column(s.TID).max() or 0
        processes = merge_now(threads, OWNED) if several > 1 else threads.drop(s.TID)
        data = merge_now(event_intervals(self.timed.filter(pl.col(KIND).is_in(DATA_KINDS)), OWNED).collect(), OWNED)

        def named(frame: pl.DataFrame) -> pl.DataFrame:
            return frame.join(self.owners, on=[s.PID, s.CGROUP], how="left")

        return Timing(processes=named(processes), data=named(data), threads=named(threads), unnamed=processes)

    @property
    def lane_tolerance(self) -> int:
        """Gaps shorter than this are not drawn in a lane."""
        return max(self.span // LANE_DETAIL, 1)


class Aggregate(ABC):
    """One part of a partial: `name` (its attribute in the partial), `keys` (what its rows are
    keyed by), its step over one chunk, and how the values of many chunks combine into one."""

    name: str = ""
    keys: tuple[str, ...] = ()

    @abstractmethod
    def chunk(self, inputs: ChunkInputs) -> dict[str, pl.LazyFrame | pl.DataFrame]:
        """The chunk's frames (lazy ones are collected together with the other aggregates')."""

    def finish(self, frames: dict[str, pl.DataFrame], inputs: ChunkInputs):
        """The chunk's value, from its collected frames (the one frame, unless overridden)."""
        (frame,) = frames.values()
        return frame

    @abstractmethod
    def combine(self, values: list):
        """One value holding all of `values`, in time order."""

    def coarsen(self, value):
        """The value made smaller as a long trace's span grows (most keep every row)."""
        return value

    def measure(self, value):
        """What the results read of the value: the lengths of the unions of intervals kept as
        runs (most aggregates are read as they are)."""
        return value


def stacked(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """Frames of one kind from many partials, as one (columns a partial lacks are null)."""
    return pl.concat(frames, how="diagonal_relaxed")


class Summed(Aggregate):
    """Counts summed per key (`columns`), made by `step` from a chunk's inputs."""

    def __init__(self, name: str, keys: list[str], columns: list[str], step):
        self.name, self.keys, self.columns, self.step = name, tuple(keys), columns, step

    def chunk(self, inputs: ChunkInputs) -> dict[str, pl.LazyFrame]:
        """The chunk's counts per key."""
        return {self.name: self.step(inputs)}

    def combine(self, values: list[pl.DataFrame]) -> pl.DataFrame:
        """The counts of every partial summed per key."""
        return summed(stacked(values), list(self.keys), self.columns)


def summed(frame: pl.DataFrame, keys: list[str], columns: list[str]) -> pl.DataFrame:
    """`columns` summed per key."""
    return frame.group_by(keys).agg(pl.col(column).sum() for column in columns)


class Latest(Aggregate):
    """A table of the trace (files, mounts, processes, owners): the last row of each key."""

    def __init__(self, name: str, keys: list[str], step):
        self.name, self.keys, self.step = name, tuple(keys), step

    def chunk(self, inputs: ChunkInputs) -> dict[str, pl.DataFrame]:
        """The chunk's table."""
        return {self.name: self.step(inputs)}

    def combine(self, values: list[pl.DataFrame]) -> pl.DataFrame:
        """Every partial's rows, the last of each key kept."""
        return stacked(values).unique(list(self.keys), keep="last")

