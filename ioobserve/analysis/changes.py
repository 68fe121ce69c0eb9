"""What changed between two runs, as sentences: the whole runs' figures, then the operations,
call latencies, Python functions, endpoints and files whose calls or time changed by a factor
of 1 + threshold or more ("metadata time went from 12.0 ms to 37.1 ms (×3.1)").

Small things are left out, whatever their ratio: a figure below its floor in both runs (under
a millisecond, ten calls, 64 KiB), a row under MIN_SHARE of its table's time in both runs, a
latency of fewer than MIN_CALLS calls or under LATENCY_FLOOR_NS.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from ioobserve.analysis import compare as c
from ioobserve.analysis import results as r
from ioobserve.analysis.requests import ERRORS, REQUESTS
from ioobserve.data import schema as s
from ioobserve.data.units import format_bytes, format_rate, format_seconds

MIN_SHARE = 0.05  # of a table's time in either run, for a row's change to be said
MIN_CALLS = 20  # in both runs, for a latency's change to be said
MIN_ERRORS = 5  # failed requests in either run, for their change to be said (however little time they took)
LATENCY_FLOOR_NS = 10_000  # a percentile under this in both runs is a trace's microsecond steps, not a change
ROWS_PER_TABLE = 5  # changes said per table, the largest first


def _ns(value: float) -> str:
    return format_seconds(value / 1e9)


def _count(value: float) -> str:
    return f"{value:,.1f}" if value != int(value) and value < 100 else f"{value:,.0f}"


@dataclass(frozen=True)
class Figure:
    """How a figure is named and written, and the floor under which its change is not said."""

    label: str
    write: Callable[[float], str]
    floor: float


FIGURES: dict[str, Figure] = {
    r.CALLS: Figure("calls", _count, 10), "read_calls": Figure("read calls", _count, 10),
    "write_calls": Figure("write calls", _count, 10), r.BYTES_READ: Figure("bytes read", format_bytes, 65536),
    r.BYTES_WRITTEN: Figure("bytes written", format_bytes, 65536), r.TIME_NS: Figure("time in I/O calls", _ns, 1e6),
    r.DATA_NS: Figure("read and write time", _ns, 1e6), r.META_NS: Figure("metadata time", _ns, 1e6),
    r.SYNC_NS: Figure("sync time", _ns, 1e6), r.IO_BUSY_NS: Figure("I/O busy time", _ns, 1e6),
    r.DATA_BUSY_NS: Figure("read and write busy time", _ns, 1e6), r.BYTES_PER_S: Figure("bandwidth", format_rate, 0),
    r.UNOVERLAPPED_NS: Figure("unoverlapped I/O", _ns, 1e6), "processes": Figure("processes", _count, 2),
    "files": Figure("files", _count, 2), c.FILES_READ: Figure("files read", _count, 2),
    c.READS_PER_FILE: Figure("read calls per file read", _count, 0), c.READ_SIZE: Figure("bytes per read call", format_bytes, 0),
}
"""The overview's figures a change is said of, in compare.OVERVIEW's order."""


TITLES = {"ops": "Operations", "layers": "Layers (every event)", "jobs": "Jobs", "functions": "Python functions",
          "files": "Files", "endpoints": "Endpoints", "requests": "Requests by operation", "latency": "Call latency"}
"""Each compared table's title."""


def _or_dash(write: Callable[[float], str]) -> Callable[[float | None], str]:
    return lambda value: "-" if value is None else write(value)


MEASURES = {
    r.CALLS: ("calls", _or_dash(_count)), "events": ("events", _or_dash(_count)), REQUESTS: ("requests", _or_dash(_count)),
    ERRORS: ("errors", _or_dash(_count)),
    r.BYTES_READ: ("read", _or_dash(format_bytes)), r.BYTES_WRITTEN: ("written", _or_dash(format_bytes)),
    r.BYTES: ("bytes", _or_dash(format_bytes)), r.TIME_NS: ("time", _or_dash(_ns)), "p50_ns": ("median", _or_dash(_ns)),
    "p99_ns": ("p99", _or_dash(_ns)),
}
"""The measures a compared table shows (on screen and in the report): header and how written."""


@dataclass(frozen=True)
class Change:
    """One change past the threshold: where (`table`: "overview" or a compare.TABLES name),
    of what (`name`: a figure or a row's keys), which measure, its values and a sentence."""

    table: str
    name: str
    measure: str
    baseline: float | None
    variant: float | None
    ratio: float | None
    text: str


def factor(ratio: float) -> str:
    """+12% or -8% for a small change, ×3.1 for a rise, ÷2.0 for a fall."""
    if 1 / 1.5 < ratio < 1.5:
        return f"{ratio - 1:+.0%}"
    return f"×{ratio:.1f}" if ratio >= 1 else f"÷{1 / ratio:.1f}"


def change_of(before: float | None, after: float | None) -> str:
    """How a value changed, for a table's cell: a factor, "new", "gone" or "=" (nothing where
    one is unknown)."""
    if before is None or after is None:
        return ""
    if before == after:
        return "="
    if before == 0:
        return "new"
    if after == 0:
        return "gone"
    return factor(after / before)


def past(before: float, after: float, threshold: float) -> bool:
    """Whether two values differ by a factor of 1 + threshold or more (a value appearing or
    going away does too)."""
    if before <= 0 or after <= 0:
        return before != after
    return abs(math.log(after / before)) >= math.log1p(threshold) - 1e-12


def _said(label: str, before: float, after: float, write: Callable[[float], str]) -> str:
    if before <= 0:
        return f"{label}: none in the baseline, {write(after)} in the variant"
    if after <= 0:
        return f"{label}: {write(before)} in the baseline, none in the variant"
    return f"{label} went from {write(before)} to {write(after)} ({factor(after / before)})"


def overview_changes(overview: pl.DataFrame, threshold: float) -> list[Change]:
    """The whole runs' figures that changed."""
    found = []
    for row in overview.iter_rows(named=True):
        figure = FIGURES.get(row[c.FIGURE])
        before, after = row[c.BASELINE], row[c.VARIANT]
        if figure is None or before is None or after is None or max(before, after) < figure.floor or max(before, after) == 0:
            continue
        if past(before, after, threshold):
            found.append(Change("overview", row[c.FIGURE], row[c.FIGURE], before, after, row[c.RATIO],
                                _said(figure.label, before, after, figure.write)))
    return found


def _row_name(table: str, row: dict) -> str:
    keys = c.TABLES[table].keys
    if table == "functions":
        return f"{row[s.PY_FUNCTION]} ({row[s.PY_FILE]})"
    return " ".join(str(row[key]) for key in keys)


ROW_LABELS = {"ops": "operation", "functions": "Python function", "endpoints": "endpoint", "files": "file",
              "requests": "request operation", "jobs": "job", "layers": "layer"}


def row_changes(table: str, frame: pl.DataFrame, threshold: float) -> list[Change]:
    """A table's rows whose calls (requests) or time changed, of those holding MIN_SHARE of the
    table's time in either run."""
    calls = REQUESTS if table in ("endpoints", "requests") else ("events" if table == "layers" else r.CALLS)
    time = r.TIME_NS
    totals = [frame.get_column(f"{time}_{side}").sum() or 0 for side in (c.BASELINE, c.VARIANT)]
    found = []
    for row in frame.iter_rows(named=True):
        if table == "requests":
            found += _error_change(row, threshold)
        before_t, after_t = row[f"{time}_{c.BASELINE}"], row[f"{time}_{c.VARIANT}"]
        if max(before_t / totals[0] if totals[0] else 0, after_t / totals[1] if totals[1] else 0) < MIN_SHARE:
            continue
        before_n, after_n = row[f"{calls}_{c.BASELINE}"], row[f"{calls}_{c.VARIANT}"]
        name = _row_name(table, row)
        label = f"{ROW_LABELS[table]} {name}"
        if past(before_n, after_n, threshold) and max(before_n, after_n) >= 10:
            found.append(Change(table, name, calls, before_n, after_n, row[f"{calls}_{c.RATIO}"],
                                _said(f"{label}: {calls.replace('_', ' ')}", before_n, after_n, _count)))
        elif past(before_t, after_t, threshold) and max(before_t, after_t) >= 1e6:
            found.append(Change(table, name, time, before_t, after_t, row[f"{time}_{c.RATIO}"],
                                _said(f"{label}: time", before_t, after_t, _ns)))
        if len(found) == ROWS_PER_TABLE:
            break
    return found


def _error_change(row: dict, threshold: float) -> list[Change]:
    """An operation's failed requests (status 400 and up), if their number changed."""
    before, after = row[f"{ERRORS}_{c.BASELINE}"], row[f"{ERRORS}_{c.VARIANT}"]
    if not (past(before, after, threshold) and max(before, after) >= MIN_ERRORS):
        return []
    name = _row_name("requests", row)
    return [Change("requests", name, ERRORS, before, after, row[f"{ERRORS}_{c.RATIO}"],
                   _said(f"{ROW_LABELS['requests']} {name}: failed requests (status 400 and up)", before, after, _count))]


def latency_changes(frame: pl.DataFrame, threshold: float) -> list[Change]:
    """Operations whose median or 99th percentile of duration changed (MIN_CALLS calls or more
    in both runs)."""
    found = []
    for row in frame.iter_rows(named=True):
        if min(row[f"calls_{c.BASELINE}"], row[f"calls_{c.VARIANT}"]) < MIN_CALLS:
            continue
        for measure, label in (("p50_ns", "median"), ("p99_ns", "99th percentile")):
            before, after = row[f"{measure}_{c.BASELINE}"], row[f"{measure}_{c.VARIANT}"]
            if max(before, after) >= LATENCY_FLOOR_NS and past(before, after, threshold):
                name = f"{row[s.LAYER]} {row[s.OP]}"
                found.append(Change("latency", name, measure, before, after, row[f"{measure}_{c.RATIO}"],
                                    _said(f"{name}: {label} latency", before, after, _ns)))
                break
        if len(found) == ROWS_PER_TABLE:
            break
    return found


def changes(comparison: c.Comparison, threshold: float) -> list[Change]:
    """Every change past `threshold` (0.25: by a factor of 1.25 or more either way), the whole
    runs' first, then per operation, latency, Python function, endpoint and file."""
    found = []
    layers = (comparison.baseline.layer, comparison.variant.layer)
    if layers[0] != layers[1]:
        found.append(Change("overview", "layer", "layer", None, None, None,
                            f"the baseline's totals are of the {layers[0]} layer, the variant's of the {layers[1]} "
                            "layer: their figures do not count the same calls"))
    found += overview_changes(comparison.overview, threshold)
    found += row_changes("ops", comparison.tables["ops"], threshold)
    found += latency_changes(comparison.tables["latency"], threshold)
    for table in ("functions", "endpoints", "requests"):
        found += row_changes(table, comparison.tables[table], threshold)
    return found + file_changes(comparison.tables["files"], threshold)


def file_changes(frame: pl.DataFrame, threshold: float) -> list[Change]:
    """Files whose calls changed: said of each (as row_changes) when they are a few, else once
    for them all, with the median file's calls (a dataset's shards change together)."""
    before, after = pl.col(f"{r.CALLS}_{c.BASELINE}"), pl.col(f"{r.CALLS}_{c.VARIANT}")
    both = frame.filter((before > 0) & (after > 0))
    moved = both.filter((after / before).log().abs() >= math.log1p(threshold) - 1e-12)
    if moved.height <= ROWS_PER_TABLE:
        return row_changes("files", frame, threshold)
    medians = moved.select(before.median(), after.median()).row(0)
    ratio = medians[1] / medians[0]
    return [Change("files", f"{moved.height} files", r.CALLS, medians[0], medians[1], ratio,
                   f"{moved.height} of the {both.height} files both runs used: calls went from {_count(medians[0])} to "
                   f"{_count(medians[1])} ({factor(ratio)}) in the median one")]
