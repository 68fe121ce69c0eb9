"""What one chunk of one trace contributes to an analysis, and how contributions combine.

A chunk's events (ids, not names: ioobserve.trace.chunks) are reduced at once to small
aggregates keyed by host, pid, cgroup, file id, layer, op and kind, plus intervals where a
union must stay exact across chunks and nodes (busy, data and compute time of a job, a
process, a rank and a worker slot; the bytes read of each file), kept as sorted runs
(ioobserve.analysis.runs) that go to disk past a bound and are measured by a streaming
merge. Partials of any number of chunks, traces and nodes combine into one, in any grouping:
that is what the local loop and the Dask tasks both do.

Exact across chunks: every figure. Totals, sizes, patterns (each chunk's first access of a
stream is re-classified against where the previous chunk left it), busy, data and compute
time and unoverlapped I/O (the compute between a thread's chunks added), bytes re-read,
stat-then-open pairs, the timeline."""

from __future__ import annotations

from dataclasses import dataclass, fields

import polars as pl

from ioobserve import schema as s
from ioobserve.analysis.files import OPENS, OPENS_AFTER_STAT, call_edges, read_ranges, seam_opens, stat_then_open
from ioobserve.analysis.intervals import END, START, event_intervals, merge_now
from ioobserve.analysis.runs import IntervalRuns
from ioobserve.operations import DATA_KINDS, IO_LAYERS, KERNEL_VIEW, KIND, METADATA, kernel_view, op_kind
from ioobserve.analysis.patterns import CONSECUTIVE, RANDOM, SEQUENTIAL, UNALIGNED, access_patterns
from ioobserve.analysis.sizes import BUCKET, COUNT, access_sizes
from ioobserve.analysis.timeline import BIN, MAX_BINS, MS, bin_exponent, binned, lanes, rebin
from ioobserve.totals import BYTES, CALLS, ERRORS, FIRST_NS, LAST_NS, PLACED_BYTES, TIME_NS, combined, over_events
from ioobserve.trace.chunks import TraceTables

TOTAL_SUMS = [CALLS, BYTES, TIME_NS, ERRORS, PLACED_BYTES, FIRST_NS, LAST_NS]  # ioobserve.totals
IO_BUSY_NS, DATA_BUSY_NS = "io_busy_ns", "data_busy_ns"
SCOPE, SCOPE_IO, SCOPE_DATA, SCOPE_COMPUTE = "scope", "io", "data", "compute"
GROUP, GROUP_RANK, GROUP_WORKER = "group", "rank", "worker"
TOTAL_KEYS = [s.HOST, s.PID, s.CGROUP, s.LAYER, s.OP, KIND, s.FILE_ID]
LANE_DETAIL = 4000  # lanes keep gaps longer than a chunk's span / LANE_DETAIL
# Layers whose time is the program's I/O, for busy and unoverlapped time: the ones totals come
# from, and the interpreter's calls.
TIMED_LAYERS = [*IO_LAYERS, s.LAYER_PYTHON]
OPEN_KEYS = [s.HOST, s.PID, s.LAYER]


@dataclass
class Partial:
    """Aggregates of some events; see the module docstring. Frames hold ids (FILE_ID, PID,
    CGROUP) named by `files` and `processes`."""

    totals: pl.DataFrame  # TOTAL_KEYS: TOTAL_SUMS
    sizes: pl.DataFrame  # HOST, PID, LAYER, FILE_ID, KIND, BUCKET: COUNT
    patterns: pl.DataFrame  # HOST, PID, LAYER, FILE_ID, KIND: CONSECUTIVE, SEQUENTIAL, RANDOM, UNALIGNED
    streams: pl.DataFrame  # per descriptor stream: its first access and where its last ended
    owned: IntervalRuns  # under OWNED_KEYS: START, END of a process's I/O and data calls (busy time per process, rank, worker)
    intervals: IntervalRuns  # under (LAYER, JOB, SCOPE (io|data|compute)): START, END
    threads: pl.DataFrame  # LAYER, JOB, HOST, PID, TID: FIRST_NS, LAST_NS (compute across chunk seams)
    ranges: IntervalRuns  # under (LAYER, FILE_ID): START, END bytes read
    opens: pl.DataFrame  # HOST, PID, LAYER: OPENS, OPENS_AFTER_STAT
    edges: pl.DataFrame  # per thread: its first and last metadata call (stat and open across chunk seams)
    bins: pl.DataFrame  # LAYER, KIND, BIN: COUNT, BYTES
    bin_exponent: int
    lanes: pl.DataFrame  # HOST, PID: START, END
    owners: pl.DataFrame  # HOST, PID, CGROUP: JOB, RANK, WORKER
    files: pl.DataFrame  # FILE_ID: PATH, DEV, INO
    mounts: pl.DataFrame  # HOST, DEV: MOUNTPOINT, FSTYPE
    processes: pl.DataFrame  # HOST, PID: PPID, COMM, JOB, RANK, WORKER


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


def _local(keys: list[str]) -> list[str]:
    """Keys within one chunk: all but HOST, which is the chunk's."""
    return [key for key in keys if key != s.HOST]


def _owners(events: pl.LazyFrame, tables: TraceTables, processes: pl.DataFrame) -> pl.LazyFrame:
    """PID, CGROUP -> JOB (the cgroup's, else the environment's), RANK, WORKER."""
    cgroup_jobs = tables.cgroups.select(s.CGROUP, pl.col(s.JOB).alias("_cgroup_job")).lazy()
    return (
        events.select(s.PID, s.CGROUP).unique()
        .join(cgroup_jobs, on=s.CGROUP, how="left")
        .join(processes.lazy().drop(s.HOST), on=s.PID, how="left")
        .select(s.PID, s.CGROUP, pl.coalesce("_cgroup_job", s.JOB).alias(s.JOB), s.RANK, s.WORKER)
    )


def chunk_partial(chunk: pl.DataFrame, tables: TraceTables, processes: pl.DataFrame) -> Partial:
    """The partial of one chunk of events (schema.CHUNK_SCHEMA) of a trace."""
    host = processes.get_column(s.HOST).first() if processes.height else tables.host
    # Eager, once: every frame below reads them; in time order, so that merges need not sort.
    # A chunk is one host's: HOST is added to each aggregate, not grouped by per event.
    events = chunk.sort(s.TS).with_columns(op_kind().alias(KIND))
    # Totals keep each event's layer; the rest analyse the kernel's view (syscalls and the
    # io_uring and AIO requests) as one layer, whose I/O it all is.
    by_layer = events.lazy()
    if events.get_column(s.LAYER).is_in(KERNEL_VIEW[1:]).any():  # the relabelling costs a cast of every row
        events = events.with_columns(kernel_view())
    io = events.filter(pl.col(s.LAYER).is_in(IO_LAYERS)).lazy()
    # Of the Python spans, the innermost: the calls the I/O was made in (outer ones hold them).
    timed = events.filter(pl.col(s.LAYER).is_in(TIMED_LAYERS) & (pl.col(s.PY_FRAME).fill_null(0) == 0)).lazy()
    events = events.lazy()
    span = int(chunk.get_column(s.TS).max() - chunk.get_column(s.TS).min()) if chunk.height else 0
    exponent = bin_exponent(span)
    owners = _owners(events, tables, processes).collect()
    timing = _interval_frames(timed, owners, host, max(span // LANE_DETAIL, 1))
    metadata = io.filter(pl.col(KIND) == METADATA).with_columns(pl.col(s.FILE_ID).alias(s.PATH))
    on_host = pl.lit(host).alias(s.HOST)
    frames = {
        "totals": by_layer.group_by(_local(TOTAL_KEYS)).agg(over_events(*TOTAL_SUMS)).with_columns(on_host),
        "sizes": access_sizes(io, [s.PID, s.LAYER, s.FILE_ID]).with_columns(on_host),
        "patterns": access_patterns(io, [s.PID, s.LAYER, s.FILE_ID]).with_columns(on_host),
        "streams": _streams(io).with_columns(on_host),
        "ranges": read_ranges(io.with_columns(pl.col(s.FILE_ID).alias(s.PATH)), [s.LAYER]).rename({s.PATH: s.FILE_ID}),
        "opens": stat_then_open(metadata, _local(OPEN_KEYS)).with_columns(on_host),
        "edges": call_edges(metadata, _local(OPEN_KEYS)).with_columns(on_host),
        "bins": binned(events, exponent, [s.LAYER, KIND]),
    }
    collected = dict(zip(frames, pl.collect_all(frames.values()), strict=True))
    collected["ranges"] = _runs(collected["ranges"], RANGE_KEYS)
    return Partial(**collected, **timing, bin_exponent=exponent, owners=owners.with_columns(pl.lit(host).alias(s.HOST)),
                   files=tables.files, mounts=tables.mounts.with_columns(pl.lit(host).alias(s.HOST)), processes=processes)


def _interval_frames(timed: pl.LazyFrame, owners: pl.DataFrame, host: str, lane_tolerance: int) -> dict[str, pl.DataFrame]:
    """The Partial's frames made of merged intervals: busy time per process, rank and worker
    slot; a job's I/O, data and compute intervals; thread ends; lanes."""
    owned = [s.LAYER, s.PID, s.CGROUP]
    threads = merge_now(event_intervals(timed, [*owned, s.TID]).collect(), [*owned, s.TID])
    # A process's intervals from its threads' (the same when it has one thread, as most do)
    several = threads.group_by(owned).agg(pl.col(s.TID).n_unique()).get_column(s.TID).max() or 0
    processes = merge_now(threads, owned) if several > 1 else threads.drop(s.TID)
    data = merge_now(event_intervals(timed.filter(pl.col(KIND).is_in(DATA_KINDS)), owned).collect(), owned)

    def named(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.join(owners, on=[s.PID, s.CGROUP], how="left")

    io_named, data_named, threads_named = named(processes), named(data), named(threads)
    thread = [s.LAYER, s.PID, s.CGROUP, s.TID]
    gaps = threads_named.select(s.LAYER, s.JOB, pl.col(END).alias(START), pl.col(START).shift(-1).over(thread).alias(END))
    job = [s.LAYER, s.JOB]
    intervals = pl.concat([merge_now(frame, job).with_columns(pl.lit(scope).alias(SCOPE)) for scope, frame in (
        (SCOPE_IO, io_named), (SCOPE_DATA, data_named), (SCOPE_COMPUTE, gaps.drop_nulls(END)))])
    owned_frames = [frame.select(*OWNED_KEYS[:-2], pl.lit(host).alias(s.HOST), pl.lit(scope).alias(SCOPE), START, END)
                    for scope, frame in ((SCOPE_IO, io_named), (SCOPE_DATA, data_named))]
    return {
        "owned": _runs(pl.concat(owned_frames), OWNED_KEYS),
        "intervals": _runs(intervals, INTERVAL_KEYS),
        "threads": threads_named.group_by(s.LAYER, s.JOB, s.PID, s.TID).agg(
            pl.col(START).min().alias(FIRST_NS), pl.col(END).max().alias(LAST_NS)).with_columns(pl.lit(host).alias(s.HOST)),
        "lanes": lanes(processes.lazy().filter(pl.col(s.LAYER).is_in(IO_LAYERS)).with_columns(pl.lit(host).alias(s.HOST)),
                       lane_tolerance, [s.HOST, s.PID]).collect(),
    }


INTERVAL_KEYS = [s.LAYER, s.JOB, SCOPE]
RANGE_KEYS = [s.LAYER, s.FILE_ID]
OWNED_KEYS = [s.LAYER, s.PID, s.JOB, s.RANK, s.WORKER, s.HOST, SCOPE]  # a process's intervals, with whose it is


def _runs(intervals: pl.DataFrame, keys: list[str]) -> IntervalRuns:
    runs = IntervalRuns()
    runs.add(intervals.with_columns(pl.col(s.LAYER).cast(pl.String)), keys)
    return runs


STREAM = [s.HOST, s.PID, s.LAYER, s.FILE_ID, s.FD, KIND]


def _streams(io: pl.LazyFrame) -> pl.LazyFrame:
    """Per descriptor stream: its first access (time, offset) and where its last one ended."""
    data = io.filter(pl.col(KIND).is_in(DATA_KINDS) & (pl.col(s.OFFSET) >= 0)).sort(s.TS)
    return data.group_by(_local(STREAM)).agg(
        pl.col(s.TS).first().alias(FIRST_NS), pl.col(s.OFFSET).first().alias("first_offset"),
        (pl.col(s.OFFSET) + pl.col(s.BYTES).cast(pl.Int64)).last().alias("last_end"))


def combine(parts: list[Partial]) -> Partial:
    """One partial holding all of `parts`."""
    if len(parts) == 1:
        return parts[0]
    stacked = {f.name: pl.concat([getattr(p, f.name) for p in parts], how="diagonal_relaxed")
               for f in fields(Partial) if f.name not in ("bin_exponent", "intervals", "ranges", "owned")}
    exponent = max(p.bin_exponent for p in parts)
    patterns, streams = _stitch_streams(stacked["patterns"], stacked["streams"])
    return Partial(
        totals=stacked["totals"].group_by(TOTAL_KEYS).agg(combined(*TOTAL_SUMS)),
        sizes=_summed(stacked["sizes"], [s.HOST, s.PID, s.LAYER, s.FILE_ID, KIND, BUCKET], [COUNT]),
        patterns=patterns, streams=streams,
        owned=_all_runs([p.owned for p in parts]),
        intervals=_stitch_compute([p.intervals for p in parts], stacked["threads"]),
        threads=stacked["threads"].group_by(s.LAYER, s.JOB, s.HOST, s.PID, s.TID).agg(
            pl.col(FIRST_NS).min(), pl.col(LAST_NS).max()),
        ranges=_all_runs([p.ranges for p in parts]),
        opens=_summed(pl.concat([stacked["opens"], seam_opens(stacked["edges"], OPEN_KEYS)], how="diagonal_relaxed")
                      .with_columns(pl.col(OPENS).fill_null(0)), OPEN_KEYS, [OPENS, OPENS_AFTER_STAT]),
        edges=stacked["edges"].sort(s.TS).group_by(*OPEN_KEYS, s.TID).agg(
            pl.col(s.TS).first(), pl.col("first_open").first(), pl.col("first_path").first(), pl.col("last_stat").last(),
            pl.col("last_path").last()),
        bins=rebin(stacked["bins"].lazy(), exponent, [s.LAYER, KIND]).collect(),
        bin_exponent=exponent,
        lanes=merge_now(stacked["lanes"], [s.HOST, s.PID]),
        owners=stacked["owners"].unique([s.HOST, s.PID, s.CGROUP], keep="last"),
        files=stacked["files"].unique(s.FILE_ID, keep="last"),
        mounts=stacked["mounts"].unique([s.HOST, s.DEV], keep="last"),
        processes=stacked["processes"].unique([s.HOST, s.PID], keep="last"),
    )


def fold(folded: Partial | None, later: list[Partial]) -> Partial:
    """`folded` (None: nothing yet) with the partials that come after it in time, combined;
    the timeline and lanes are coarsened as the span grows, so that a long trace's partial
    stays about as small as a short one's (the report draws at most REPORT_BINS bins)."""
    part = combine(([folded] if folded is not None else []) + later)
    if part.bins.height > 4 * MAX_BINS:
        first, last = part.bins.get_column(BIN).min(), part.bins.get_column(BIN).max()
        exponent = bin_exponent(int(last - first) + (MS << part.bin_exponent))
        if exponent > part.bin_exponent:
            part.bins, part.bin_exponent = rebin(part.bins.lazy(), exponent, [s.LAYER, KIND]).collect(), exponent
    if part.lanes.height > 4 * LANE_DETAIL:
        span = int(part.lanes.get_column(END).max() - part.lanes.get_column(START).min())
        part.lanes = lanes(part.lanes.lazy(), max(span // LANE_DETAIL, 1), [s.HOST, s.PID]).collect()
    return part


def _summed(frame: pl.DataFrame, keys: list[str], columns: list[str]) -> pl.DataFrame:
    return frame.group_by(keys).agg(pl.col(column).sum() for column in columns)


def _stitch_compute(runs: list[IntervalRuns], threads: pl.DataFrame) -> IntervalRuns:
    """Intervals of all partials, with the compute of threads between one partial's last I/O
    and the next one's first."""
    thread = [s.LAYER, s.JOB, s.HOST, s.PID, s.TID]
    seams = (
        threads.sort(FIRST_NS).with_columns(pl.col(LAST_NS).shift(1).over(thread).alias(START))
        .filter(pl.col(START).is_not_null() & (pl.col(FIRST_NS) > pl.col(START)))
        .select(pl.col(s.LAYER).cast(pl.String), s.JOB, pl.lit(SCOPE_COMPUTE).alias(SCOPE), START,
                pl.col(FIRST_NS).alias(END))
    )
    combined = _all_runs(runs)
    combined.add(seams, INTERVAL_KEYS)
    return combined


def _all_runs(runs: list[IntervalRuns]) -> IntervalRuns:
    combined = IntervalRuns()
    for part in runs:
        combined.extend(part)
    return combined


def _stitch_streams(patterns: pl.DataFrame, streams: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Patterns summed across partials, each later partial's first access of a stream
    re-classified against where the earlier one left it (each partial took 0)."""
    ordered = streams.sort(FIRST_NS).with_columns(pl.col("last_end").shift(1).over(STREAM).alias("_before"))
    # the partial counted a first access consecutive at offset 0, and sequential in any case
    fixes = ordered.filter(pl.col("_before").is_not_null()).select(
        *STREAM,
        ((pl.col("first_offset") == pl.col("_before")).cast(pl.Int64) - (pl.col("first_offset") == 0).cast(pl.Int64))
        .alias(CONSECUTIVE),
        ((pl.col("first_offset") >= pl.col("_before")).cast(pl.Int64) - 1).alias(SEQUENTIAL),
    )
    keys = [s.HOST, s.PID, s.LAYER, s.FILE_ID, KIND]
    adjust = fixes.group_by(keys).agg(pl.col(CONSECUTIVE).sum(), pl.col(SEQUENTIAL).sum())
    counts = patterns.group_by(keys).agg(pl.col(c).sum().cast(pl.Int64) for c in (CONSECUTIVE, SEQUENTIAL, RANDOM, UNALIGNED))
    fixed = counts.join(adjust, on=keys, how="left", suffix="_fix").with_columns(
        (pl.col(CONSECUTIVE) + pl.col(f"{CONSECUTIVE}_fix").fill_null(0)).cast(pl.UInt64).alias(CONSECUTIVE),
        (pl.col(SEQUENTIAL) + pl.col(f"{SEQUENTIAL}_fix").fill_null(0)).cast(pl.UInt64).alias(SEQUENTIAL),
        (pl.col(RANDOM) - pl.col(f"{SEQUENTIAL}_fix").fill_null(0)).cast(pl.UInt64).alias(RANDOM),
        pl.col(UNALIGNED).cast(pl.UInt64),
    ).select(*keys, CONSECUTIVE, SEQUENTIAL, RANDOM, UNALIGNED)
    merged = ordered.group_by(STREAM).agg(pl.col(FIRST_NS).first(), pl.col("first_offset").first(),
                                          pl.col("last_end").last())
    return fixed, merged
