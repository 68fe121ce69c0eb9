"""Two analyses side by side (`ioobserve diff`): the same figures and tables as `analyze`, each
with the baseline's value, the variant's, their delta and their ratio; and the changes past a
threshold, said as sentences ("read calls per file read went from 2 to 257").

Rows are matched by their keys: a job by its id (or the two runs' only jobs with each other),
a layer, an operation, a Python function and its file, an endpoint, and a file by the key
FileKey gives it (its path, its name, or a part of its path that a regular expression picks),
so that two runs over copies of a dataset in different places compare shard by shard; a Python
function's file is matched the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import polars as pl

from ioobserve.analysis import results as r
from ioobserve.analysis.requests import ENDPOINT, ERRORS, REQUESTS
from ioobserve.data import schema as s

BASELINE, VARIANT, DELTA, RATIO = "baseline", "variant", "delta", "ratio"
FIGURE, FILE_KEY = "figure", "file_key"
READS_PER_FILE, READ_SIZE, FILES_READ = "read_calls_per_file_read", "bytes_per_read_call", "files_read"


@dataclass(frozen=True)
class TableSpec:
    """A compared table: its rows' keys, its measures, which of them are sums (a row missing on
    one side is 0 there; the others, rates and percentiles, are unknown), and the measure its
    rows are ordered by (the largest change first)."""

    keys: tuple[str, ...]
    measures: tuple[str, ...]
    sums: tuple[str, ...]
    order: str


_SUMS = (r.CALLS, r.BYTES_READ, r.BYTES_WRITTEN, r.TIME_NS)
TABLES: dict[str, TableSpec] = {
    "jobs": TableSpec((s.JOB,), (*_SUMS, r.IO_BUSY_NS, r.BYTES_PER_S), (*_SUMS, r.IO_BUSY_NS), r.TIME_NS),
    "layers": TableSpec((s.LAYER,), ("events", r.BYTES, r.TIME_NS), ("events", r.BYTES, r.TIME_NS), r.TIME_NS),
    "ops": TableSpec((s.OP,), _SUMS, _SUMS, r.TIME_NS),
    "files": TableSpec((FILE_KEY,), _SUMS, _SUMS, r.TIME_NS),
    "functions": TableSpec((s.PY_FUNCTION, s.PY_FILE), _SUMS, _SUMS, r.TIME_NS),
    "endpoints": TableSpec((ENDPOINT,), (REQUESTS, r.BYTES, r.TIME_NS), (REQUESTS, r.BYTES, r.TIME_NS), r.TIME_NS),
    "requests": TableSpec((s.OP,), (REQUESTS, ERRORS, r.BYTES, r.TIME_NS), (REQUESTS, ERRORS, r.BYTES, r.TIME_NS), r.TIME_NS),
    "latency": TableSpec((s.LAYER, s.OP), ("calls", "p50_ns", "p90_ns", "p99_ns"), ("calls",), "p99_ns"),
}
"""Every compared table, by the name `diff --json` gives it."""

OVERVIEW = (r.CALLS, "read_calls", "write_calls", r.BYTES_READ, r.BYTES_WRITTEN, r.TIME_NS, r.DATA_NS, r.META_NS,
            r.SYNC_NS, r.IO_BUSY_NS, r.DATA_BUSY_NS, r.BYTES_PER_S, r.UNOVERLAPPED_NS, "processes", "files",
            FILES_READ, READS_PER_FILE, READ_SIZE)
"""The whole runs' figures compared, in the order they are shown."""


@dataclass(frozen=True)
class FileKey:
    """How files of two runs are matched: "path" (as it is), "name" (the last component), or
    a regular expression whose first group (or whole match) is the key; a path it does not
    match keeps its whole path."""

    how: str = "path"

    def expr(self, column: str = s.PATH) -> pl.Expr:
        """The key of each row's path (in `column`)."""
        path = pl.col(column).cast(pl.String)
        if self.how == "path":
            return path
        if self.how == "name":
            return path.str.split("/").list.last()
        return pl.coalesce(path.str.extract(self.how, 1 if _has_group(self.how) else 0), path)


def _has_group(pattern: str) -> bool:
    return re.compile(pattern).groups > 0


@dataclass
class Comparison:
    """Two analyses compared: the overview's figures (FIGURE, BASELINE, VARIANT, DELTA, RATIO)
    and each table of TABLES side by side; the changes past a threshold are added by
    ioobserve.analysis.changes."""

    baseline: r.Analysis
    variant: r.Analysis
    overview: pl.DataFrame
    tables: dict[str, pl.DataFrame]
    changes: list = field(default_factory=list)


def figures(analysis: r.Analysis) -> dict[str, float | None]:
    """The OVERVIEW figures of one analysis (the overview's, and the reads per file read and
    bytes per read call, which say how a job reads what it reads)."""
    o = dict(analysis.overview)
    files_read = analysis.files.filter(pl.col(r.BYTES_READ) > 0).height
    o[FILES_READ] = files_read
    o[READS_PER_FILE] = o["read_calls"] / files_read if files_read else None
    o[READ_SIZE] = (o[r.BYTES_READ] or 0) / o["read_calls"] if o["read_calls"] else None
    return {name: o.get(name) for name in OVERVIEW}


def side_tables(analysis: r.Analysis, files_by: FileKey) -> dict[str, pl.DataFrame]:
    """One analysis's tables as TABLES compares them: each its keys and measures, a row per key."""
    files = analysis.files.select(files_by.expr().alias(FILE_KEY), *_SUMS).group_by(FILE_KEY).agg(pl.col(_SUMS).sum())
    # A Python function's file is matched as files are: the same code in two environments
    functions = analysis.functions.with_columns(files_by.expr(s.PY_FILE).alias(s.PY_FILE)).group_by(
        s.PY_FUNCTION, s.PY_FILE).agg(pl.col(_SUMS).sum())
    frames = {"jobs": analysis.jobs, "layers": analysis.layers, "ops": analysis.ops, "files": files,
              "functions": functions, "endpoints": analysis.endpoints, "requests": analysis.requests,
              "latency": analysis.latency}
    return {name: frames[name].select(*spec.keys, *spec.measures).with_columns(pl.col(spec.keys).cast(pl.String))
            for name, spec in TABLES.items()}


def _paired_jobs(baseline: pl.DataFrame, variant: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Two runs of one job each (their ids differ: two submissions) compared as one row, its
    key "BASELINE_ID → VARIANT_ID"; otherwise jobs are matched by id."""
    ids = [frame.get_column(s.JOB).drop_nulls().unique().to_list() for frame in (baseline, variant)]
    if len(ids[0]) != 1 or len(ids[1]) != 1 or ids[0] == ids[1]:
        return baseline, variant
    pair = pl.lit(f"{ids[0][0]} → {ids[1][0]}")
    return tuple(frame.with_columns(pl.when(pl.col(s.JOB).is_not_null()).then(pair).alias(s.JOB))
                 for frame in (baseline, variant))


def side_by_side(baseline: pl.DataFrame, variant: pl.DataFrame, spec: TableSpec) -> pl.DataFrame:
    """The rows of both sides matched by key: each measure's BASELINE, VARIANT, DELTA (variant
    less baseline) and RATIO (variant over baseline, where the baseline is not 0); the largest
    change of the spec's order measure first."""
    keys = list(spec.keys)
    joined = baseline.rename({m: f"{m}_{BASELINE}" for m in spec.measures}).join(
        variant.rename({m: f"{m}_{VARIANT}" for m in spec.measures}), on=keys, how="full", coalesce=True, nulls_equal=True)
    columns = []
    for m in spec.measures:
        before, after = pl.col(f"{m}_{BASELINE}").cast(pl.Float64), pl.col(f"{m}_{VARIANT}").cast(pl.Float64)
        if m in spec.sums:
            before, after = before.fill_null(0), after.fill_null(0)
        columns += [before.alias(f"{m}_{BASELINE}"), after.alias(f"{m}_{VARIANT}"), (after - before).alias(f"{m}_{DELTA}"),
                    pl.when(before != 0).then(after / before).alias(f"{m}_{RATIO}")]
    return (joined.select(*keys, *columns)
            .sort(pl.col(f"{spec.order}_{DELTA}").abs(), *keys, descending=[True, *[False] * len(keys)], nulls_last=True))


def overview_side_by_side(baseline: dict, variant: dict) -> pl.DataFrame:
    """FIGURE, BASELINE, VARIANT, DELTA, RATIO of each OVERVIEW figure."""
    rows = []
    for name in OVERVIEW:
        before, after = baseline.get(name), variant.get(name)
        delta = after - before if before is not None and after is not None else None
        rows.append({FIGURE: name, BASELINE: before, VARIANT: after, DELTA: delta,
                     RATIO: after / before if delta is not None and before else None})
    schema = {FIGURE: pl.String, BASELINE: pl.Float64, VARIANT: pl.Float64, DELTA: pl.Float64, RATIO: pl.Float64}
    return pl.DataFrame(rows, schema=schema)


def compare(baseline: r.Analysis, variant: r.Analysis, files_by: FileKey = FileKey()) -> Comparison:
    """The comparison of two analyses (without its changes)."""
    before, after = side_tables(baseline, files_by), side_tables(variant, files_by)
    before["jobs"], after["jobs"] = _paired_jobs(before["jobs"], after["jobs"])
    tables = {name: side_by_side(before[name], after[name], spec) for name, spec in TABLES.items()}
    return Comparison(baseline, variant, overview_side_by_side(figures(baseline), figures(variant)), tables)


def comparison_dict(comparison: Comparison, baseline_traces: list[str], variant_traces: list[str]) -> dict:
    """The comparison as plain JSON-ready data."""
    from dataclasses import asdict

    return {
        BASELINE: {"traces": baseline_traces, "hosts": comparison.baseline.hosts, "layer": comparison.baseline.layer},
        VARIANT: {"traces": variant_traces, "hosts": comparison.variant.hosts, "layer": comparison.variant.layer},
        "overview": comparison.overview.to_dicts(),
        "changes": [asdict(change) for change in comparison.changes],
        "tables": {name: frame.to_dicts() for name, frame in comparison.tables.items()},
    }
