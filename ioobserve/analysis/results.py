"""The answers of an analysis, named and collected from a combined partial: totals per job,
rank, worker, process, file, layer, operation and Python function, call latency, access sizes
and patterns, overlap, the timeline and process lanes. `analyze` prints them, `report` draws them."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from ioobserve.analysis.call_latency import percentiles
from ioobserve.analysis.copies import copies
from ioobserve.analysis.lineage import derived_links, lineage_rows
from ioobserve.analysis.interval_aggregates import (
    DATA_BUSY_NS,
    EVERY,
    GROUP,
    GROUP_RANK,
    GROUP_WORKER,
    IO_BUSY_NS,
    IO_OR_COMPUTE,
    LENGTH,
    SCOPE,
    SCOPE_COMPUTE,
    SCOPE_DATA,
    SCOPE_IO,
    owned_busy,
)
from ioobserve.analysis.partial import Partial, measured
from ioobserve.analysis.patterns import CONSECUTIVE, RANDOM, SEQUENTIAL, UNALIGNED
from ioobserve.analysis.requests import endpoints, objects, operations, statuses
from ioobserve.analysis.sizes import BUCKET, COUNT
from ioobserve.analysis.timeline import BIN, MS, bin_exponent, rebin
from ioobserve.data import schema as s
from ioobserve.data.operations import KIND, METADATA, READ, SYNC, WRITE, io_layer, totals_layers
from ioobserve.data.totals import (BYTES, CALLS, ERRORS, FIRST_NS, LAST_NS, PLACED_BYTES, READ_BYTES, TIME_NS, WRITE_BYTES, by_kind,
                              combined)
from ioobserve.trace.read.tables import FSTYPE, MOUNTPOINT

BYTES_READ, BYTES_WRITTEN = "bytes_read", "bytes_written"
DATA_NS, META_NS, SYNC_NS = "data_ns", "metadata_ns", "sync_ns"
BYTES_PER_S, WALL_NS, IO_SHARE = "bytes_per_s", "wall_ns", "io_share"
PROCESSES, UNIQUE_BYTES_READ, REREAD_BYTES = "processes", "unique_bytes_read", "reread_bytes"
# I/O no compute hid: a thread computes between its own I/O calls (first to last); the I/O
# time when no thread of the job was computing is what the job waited for (DFTracer's term).
COMPUTE_NS, UNOVERLAPPED_NS = "compute_ns", "unoverlapped_ns"
REPORT_BINS = 300


@dataclass
class Analysis:
    """Everything an analysis found; frames are collected, times in ns since the epoch."""

    layer: str | None  # the layer the totals come from (SYSCALL for our traces)
    hosts: list[str]
    overview: dict[str, float | int | None]
    layers: pl.DataFrame  # per layer, every event
    ops: pl.DataFrame
    jobs: pl.DataFrame
    ranks: pl.DataFrame
    workers: pl.DataFrame
    processes: pl.DataFrame
    files: pl.DataFrame
    sizes: pl.DataFrame  # KIND, BUCKET: COUNT
    patterns: pl.DataFrame  # KIND: CONSECUTIVE, SEQUENTIAL, RANDOM, UNALIGNED
    overlap: pl.DataFrame  # LAYER, JOB: io, compute and unoverlapped ns
    timeline: pl.DataFrame  # LAYER, KIND, BIN: COUNT, BYTES (bins of timeline_ns)
    timeline_ns: int
    lanes: pl.DataFrame  # HOST, PID: START, END
    spawns: pl.DataFrame  # HOST, PPID: worker processes, slots, epochs
    opens: pl.DataFrame  # HOST, PID: OPENS, OPENS_AFTER_STAT
    per_process_sizes: pl.DataFrame  # HOST, PID, FILE_ID, PATH, KIND, BUCKET: COUNT
    per_process_patterns: pl.DataFrame  # HOST, PID, PATH, KIND: CONSECUTIVE, SEQUENTIAL, RANDOM, UNALIGNED
    objects: pl.DataFrame  # PATH (an object's address): requests, bytes, time (the HTTP layer)
    endpoints: pl.DataFrame  # ENDPOINT: requests, bytes, time, a count per latency bucket
    requests: pl.DataFrame  # OP (S3's operation, or the method): requests, bytes, time, errors (the HTTP layer)
    statuses: pl.DataFrame  # OP, STATUS (the answer's; null: none read): requests
    copies: pl.DataFrame  # objects fetched into local copies: bytes fetched, written, read (ioobserve.analysis.copies)
    latency: pl.DataFrame  # LAYER, OP: calls and their duration's percentiles (ioobserve.analysis.call_latency)
    functions: pl.DataFrame  # PY_FUNCTION, PY_FILE: the I/O calls each made, their bytes read and written, time
    lineage: pl.DataFrame  # JOB, HOST, PID, COMM, PY_FUNCTION, PY_FILE, PATH: data read and written (analysis.lineage)
    derived: pl.DataFrame  # JOB, HOST, PID, SOURCE, TARGET: a file read before another was written
    insights: list = field(default_factory=list)
    throttles: pl.DataFrame | None = None  # flood control's throttles (trace.reader.throttles), where read


def _sums(kind: pl.Expr) -> list[pl.Expr]:
    """Calls, bytes and times of named totals, for a group_by."""
    def time_of(which: str) -> pl.Expr:
        return pl.col(TIME_NS).filter(kind == which).sum()

    read, written = by_kind(READ_BYTES, WRITE_BYTES)
    return [
        *combined(CALLS), read.alias(BYTES_READ), written.alias(BYTES_WRITTEN),
        *combined(TIME_NS), (time_of(READ) + time_of(WRITE)).alias(DATA_NS), time_of(METADATA).alias(META_NS),
        time_of(SYNC).alias(SYNC_NS), *combined(ERRORS, FIRST_NS, LAST_NS),
    ]


def summarize(totals: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Calls, bytes read and written, time (all, data, metadata, sync), errors, first and last
    event, per group of named totals; most time first."""
    return totals.group_by(by).agg(_sums(pl.col(KIND))).sort(TIME_NS, *by, descending=[True, *[False] * len(by)])


def _with_bandwidth(frame: pl.DataFrame) -> pl.DataFrame:
    moved = pl.col(BYTES_READ) + pl.col(BYTES_WRITTEN)
    return frame.with_columns(pl.when(pl.col(DATA_BUSY_NS) > 0).then(moved * 1e9 / pl.col(DATA_BUSY_NS)).alias(BYTES_PER_S))


def results(part: Partial) -> Analysis:
    """The analysis of a combined partial."""
    part = measured(part)
    layer = io_layer(part.totals.get_column(s.LAYER).cast(pl.String).unique().to_list())
    files = part.files.select(s.FILE_ID, s.PATH)
    named = (
        part.totals.join(part.owners, on=[s.HOST, s.PID, s.CGROUP], how="left")
        .join(files, on=s.FILE_ID, how="left")
        .join(part.processes.select(s.HOST, s.PID, s.PPID, s.COMM), on=[s.HOST, s.PID], how="left")
    )
    io = named.filter(pl.col(s.LAYER).cast(pl.String).is_in(totals_layers(layer)))
    busy, groups = owned_busy(part.owned, layer or "")
    unions = part.intervals.filter(pl.col(s.LAYER).is_in([layer or "", s.LAYER_PYTHON]))
    whole = _overlap(unions, every_job=True)
    jobs = set(unions.filter(~pl.col(EVERY)).get_column(s.JOB).to_list())
    overlap = (whole.with_columns(pl.lit(next(iter(jobs), None), pl.String).alias(s.JOB)).select(s.LAYER, s.JOB, pl.exclude(s.LAYER, s.JOB))
               if len(jobs) <= 1 else _overlap(unions, every_job=False))
    processes = _processes(io, busy)
    per_object, by_status = objects(named), statuses(part.request_status)
    unique_reads = _unique_reads(part, layer)
    return Analysis(
        layer=layer,
        hosts=sorted(set(part.processes.get_column(s.HOST).to_list()) | set(part.totals.get_column(s.HOST).to_list())),
        overview=_overview(io, unions, whole, layer),
        layers=named.group_by(s.LAYER).agg(pl.col(CALLS).sum().alias("events"), *combined(BYTES, TIME_NS))
        .with_columns(pl.col(s.LAYER).cast(pl.String)).sort(s.LAYER),
        ops=summarize(io.with_columns(pl.col(s.OP).cast(pl.String)), [s.OP]),
        jobs=_jobs(io, unions.filter(pl.col(s.LAYER) == (layer or ""))),
        ranks=_with_bandwidth(summarize(io.filter(pl.col(s.RANK).is_not_null()), [s.JOB, s.RANK]).join(
            groups.filter(pl.col(GROUP) == GROUP_RANK).select(s.JOB, s.RANK, IO_BUSY_NS, DATA_BUSY_NS),
            on=[s.JOB, s.RANK], how="left", nulls_equal=True)),
        workers=_with_bandwidth(summarize(io.filter(pl.col(s.WORKER).is_not_null()), [s.JOB, s.RANK, s.WORKER]).join(
            groups.filter(pl.col(GROUP) == GROUP_WORKER).select(s.JOB, s.RANK, s.WORKER, IO_BUSY_NS, DATA_BUSY_NS),
            on=[s.JOB, s.RANK, s.WORKER], how="left", nulls_equal=True)),
        processes=processes,
        files=_files(io, part, unique_reads),
        sizes=part.sizes.filter(pl.col(s.LAYER) == (layer or "")).group_by(KIND, BUCKET).agg(pl.col(COUNT).sum()).sort(KIND, BUCKET),
        patterns=part.patterns.counts.filter(pl.col(s.LAYER) == (layer or "")).group_by(KIND).agg(
            pl.col(CONSECUTIVE).sum(), pl.col(SEQUENTIAL).sum(), pl.col(RANDOM).sum(), pl.col(UNALIGNED).sum()).sort(KIND),
        overlap=overlap,
        timeline=_timeline(part),
        timeline_ns=MS << _report_exponent(part),
        lanes=part.lanes,
        spawns=_spawns(processes),
        opens=part.opens.counts.filter(pl.col(s.LAYER) == (layer or "")).drop(s.LAYER).sort(s.HOST, s.PID),
        per_process_sizes=part.sizes.filter(pl.col(s.LAYER) == (layer or "")).join(files, on=s.FILE_ID, how="left")
        .drop(s.LAYER, s.FILE_ID).sort(s.HOST, s.PID, s.PATH, KIND, BUCKET),
        per_process_patterns=part.patterns.counts.filter(pl.col(s.LAYER) == (layer or "")).join(files, on=s.FILE_ID, how="left")
        .drop(s.LAYER, s.FILE_ID).sort(s.HOST, s.PID, s.PATH, KIND),
        objects=per_object,
        endpoints=endpoints(part.request_latency, files, per_object),
        requests=operations(named, by_status),
        statuses=by_status,
        copies=copies(named, io, part.files, unique_reads.rename({UNIQUE_BYTES_READ: READ})),
        latency=percentiles(part.call_latency),
        functions=_functions(part.functions),
        lineage=(lineage := lineage_rows(part.lineage, part.files, part.owners, part.processes)),
        derived=derived_links(lineage),
    )


def _functions(calls: pl.DataFrame) -> pl.DataFrame:
    """Per Python function (and its file): the I/O calls it made, bytes read and written, time;
    most time first."""
    read, written = (pl.col(BYTES).filter(pl.col(KIND) == kind).sum() for kind in (READ, WRITE))
    return (calls.group_by(s.PY_FUNCTION, s.PY_FILE)
            .agg(pl.col(CALLS).sum(), read.alias(BYTES_READ), written.alias(BYTES_WRITTEN), pl.col(TIME_NS).sum())
            .sort(TIME_NS, s.PY_FUNCTION, s.PY_FILE, descending=[True, False, False]))


def _processes(io: pl.DataFrame, busy: pl.DataFrame) -> pl.DataFrame:
    """Per process: its names and context, totals, busy time, lifetime seen (first to last
    event) and the share of it spent in I/O."""
    keys = [s.HOST, s.PID]
    context = [pl.col(c).drop_nulls().last() for c in (s.PPID, s.COMM, s.JOB, s.RANK, s.WORKER)]
    frame = io.group_by(keys).agg(*context, *_sums(pl.col(KIND))).join(
        busy.select(*keys, IO_BUSY_NS, DATA_BUSY_NS), on=keys, how="left")
    wall = (pl.col(LAST_NS) - pl.col(FIRST_NS)).alias(WALL_NS)
    return _with_bandwidth(frame.with_columns(wall)).with_columns(
        pl.when(pl.col(WALL_NS) > 0).then(pl.col(IO_BUSY_NS) / pl.col(WALL_NS)).alias(IO_SHARE)
    ).sort(TIME_NS, *keys, descending=[True, False, False])


def _scope_lengths(unions: pl.DataFrame, by: list[str]) -> pl.LazyFrame:
    """Per group with I/O: IO_BUSY_NS, COMPUTE_NS and UNOVERLAPPED_NS (I/O or compute, less compute)."""
    def of(scope: str, name: str) -> pl.LazyFrame:
        return unions.lazy().filter(pl.col(SCOPE) == scope).select(*by, pl.col(LENGTH).alias(name))

    return (
        of(SCOPE_IO, IO_BUSY_NS).join(of(SCOPE_COMPUTE, COMPUTE_NS), on=by, how="left", nulls_equal=True)
        .join(of(IO_OR_COMPUTE, "_either"), on=by, how="left", nulls_equal=True)
        .with_columns(pl.col(COMPUTE_NS).fill_null(0))
        .with_columns((pl.col("_either") - pl.col(COMPUTE_NS)).cast(pl.UInt64).alias(UNOVERLAPPED_NS))
        .drop("_either")
    )


def _jobs(io: pl.DataFrame, unions: pl.DataFrame) -> pl.DataFrame:
    """Per job: totals, busy time of all its I/O and of its data I/O (unions across its
    processes and nodes), bandwidth over the latter."""
    per_job = unions.filter(~pl.col(EVERY))
    busy = [per_job.filter(pl.col(SCOPE) == scope).select(s.JOB, pl.col(LENGTH).alias(name)).sort(s.JOB)
            for scope, name in ((SCOPE_IO, IO_BUSY_NS), (SCOPE_DATA, DATA_BUSY_NS))]
    frame = summarize(io, [s.JOB]).join(busy[0], on=s.JOB, how="left", nulls_equal=True)
    return _with_bandwidth(frame.join(busy[1], on=s.JOB, how="left", nulls_equal=True))


def _overview(io: pl.DataFrame, unions: pl.DataFrame, overlap: pl.DataFrame, layer: str | None) -> dict:
    """Whole-trace figures: totals, busy time (the union over every job), bandwidth and overlap."""
    totals = io.select(_sums(pl.col(KIND))).row(0, named=True)
    for scope, name in ((SCOPE_IO, IO_BUSY_NS), (SCOPE_DATA, DATA_BUSY_NS)):
        union = unions.filter(pl.col(EVERY) & (pl.col(SCOPE) == scope) & (pl.col(s.LAYER) == (layer or "")))
        totals[name] = int(union.get_column(LENGTH).sum() or 0)
    moved = (totals[BYTES_READ] or 0) + (totals[BYTES_WRITTEN] or 0)
    totals[BYTES_PER_S] = moved * 1e9 / totals[DATA_BUSY_NS] if totals[DATA_BUSY_NS] else None
    totals["processes"] = io.select(pl.struct(s.HOST, s.PID).n_unique()).item()
    totals["files"] = io.get_column(s.PATH).n_unique()
    totals["metadata_share"] = totals[META_NS] / totals[TIME_NS] if totals[TIME_NS] else None
    data_calls = io.filter(pl.col(KIND).is_in([READ, WRITE])).group_by(KIND).agg(combined(CALLS))
    calls = dict(data_calls.iter_rows())
    totals["read_calls"], totals["write_calls"] = calls.get(READ, 0), calls.get(WRITE, 0)
    totals["read_write_ratio"] = totals[BYTES_READ] / totals[BYTES_WRITTEN] if totals[BYTES_WRITTEN] else None
    for row in overlap.iter_rows(named=True):
        prefix = "" if row[s.LAYER] == layer else f"{row[s.LAYER].lower()}_"  # python_unoverlapped_ns ...
        totals.update({f"{prefix}{key}": row[key] for key in (COMPUTE_NS, UNOVERLAPPED_NS)})
        if prefix:
            totals[f"{prefix}{IO_BUSY_NS}"] = row[IO_BUSY_NS]
    totals.setdefault(UNOVERLAPPED_NS, 0)
    totals.setdefault(COMPUTE_NS, 0)
    totals["layer"] = layer
    return totals


def _overlap(unions: pl.DataFrame, every_job: bool) -> pl.DataFrame:
    """Per layer (over every job), or per layer and job: I/O time, compute time and the I/O
    no compute hid."""
    by = [s.LAYER] if every_job else [s.LAYER, s.JOB]
    chosen = unions.filter(pl.col(EVERY) == every_job)
    return _scope_lengths(chosen, by).collect().sort(by, nulls_last=True)


def _unique_reads(part: Partial, layer: str | None) -> pl.DataFrame:
    """FILE_ID: UNIQUE_BYTES_READ, the distinct bytes read of each file (in the I/O layer)."""
    return part.ranges.filter(pl.col(s.LAYER) == (layer or "")).select(s.FILE_ID, pl.col(LENGTH).alias(UNIQUE_BYTES_READ))


def _files(io: pl.DataFrame, part: Partial, unique: pl.DataFrame) -> pl.DataFrame:
    """Per file: totals, how many processes used it, the distinct bytes read (`unique`: per
    FILE_ID) and re-reads."""
    named = part.files.select(s.FILE_ID, s.PATH).join(unique, on=s.FILE_ID, how="inner").drop(s.FILE_ID)
    users = io.filter(pl.col(s.PATH).is_not_null()).group_by(s.PATH).agg(
        pl.struct(s.HOST, s.PID).n_unique().alias(PROCESSES),
        pl.struct(s.HOST, s.PID).filter(pl.col(KIND) == READ).n_unique().alias("readers"),
        pl.col(PLACED_BYTES).filter(pl.col(KIND) == READ).sum().alias("_placed"), *_sums(pl.col(KIND)))
    # Each file's file system, from its device (a dev names one mount per node; the first host's
    # is kept). A path seen under several devices (one the event naming it did not know) takes
    # one with a known mount: sorted first, so that the choice is the same on every run.
    mounts = part.mounts.sort(s.HOST, s.DEV).select(s.DEV, MOUNTPOINT, FSTYPE).unique(s.DEV, keep="first", maintain_order=True)
    where = (part.files.select(s.PATH, s.DEV).join(mounts, on=s.DEV, how="left")
             .sort(s.PATH, MOUNTPOINT, FSTYPE, nulls_last=True).unique(s.PATH, keep="first", maintain_order=True).drop(s.DEV))
    return users.join(named.group_by(s.PATH).agg(pl.col(UNIQUE_BYTES_READ).sum()), on=s.PATH, how="left").with_columns(
        pl.col(UNIQUE_BYTES_READ).fill_null(0),
        # re-read: of the bytes read at a known offset, those beyond the distinct ranges
        (pl.col("_placed") - pl.col(UNIQUE_BYTES_READ).fill_null(0)).clip(lower_bound=0).alias(REREAD_BYTES),
    ).drop("_placed").join(where, on=s.PATH, how="left").sort(TIME_NS, s.PATH, descending=[True, False])


def _spawns(processes: pl.DataFrame) -> pl.DataFrame:
    """Per parent of worker processes: how many it started, in how many worker slots, over
    how many epochs (the most processes one slot had)."""
    workers = processes.filter(pl.col(s.WORKER).is_not_null())
    per_slot = workers.group_by(s.HOST, s.PPID, s.WORKER).agg(pl.len().alias("_n"), pl.col(FIRST_NS).min())
    return per_slot.group_by(s.HOST, s.PPID).agg(
        pl.col("_n").sum().alias("workers"), pl.len().alias("slots"), pl.col("_n").max().alias("epochs"),
    ).sort(s.HOST, s.PPID)


def _report_exponent(part: Partial) -> int:
    """Bins for the report: at most REPORT_BINS over the trace's span."""
    bins = part.timeline
    if not bins.frame.height:
        return bins.exponent
    span = int(bins.frame.get_column(BIN).max() - bins.frame.get_column(BIN).min()) + (MS << bins.exponent)
    return max(bins.exponent, bin_exponent(span, REPORT_BINS))


def _timeline(part: Partial) -> pl.DataFrame:
    return rebin(part.timeline.frame.lazy(), _report_exponent(part), [s.LAYER, KIND]).with_columns(
        pl.col(s.LAYER).cast(pl.String)).collect()



def as_dict(analysis: Analysis) -> dict:
    """The analysis as plain JSON-ready data: figures, insights and every table's rows (the
    lanes excepted: drawing data, at the detail each chunk kept)."""
    from dataclasses import asdict, fields

    out: dict = {"layer": analysis.layer, "hosts": analysis.hosts, "overview": analysis.overview,
                 "insights": [asdict(insight) for insight in analysis.insights], "timeline_ns": analysis.timeline_ns}
    for item in fields(analysis):
        value = getattr(analysis, item.name)
        if isinstance(value, pl.DataFrame) and item.name != "lanes":
            enums = [name for name, dtype in value.schema.items() if isinstance(dtype, (pl.Enum, pl.Categorical))]
            out[item.name] = value.with_columns(pl.col(enums).cast(pl.String)).to_dicts()
    return out
