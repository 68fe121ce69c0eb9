"""Snapshot -> rows: what each table of `top` shows, sorted and filtered (no Textual here, so
that it is tested on its own)."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from ioobserve.data import schema as s
from ioobserve.data.units import format_bytes, format_count, format_rate, format_seconds
from ioobserve.live import window_totals as ag
from ioobserve.live.window_totals import Snapshot

SORTS = ("bandwidth", "iops", "latency")
MAX_ROWS = 300  # per table: the busiest; a node's thousands of idle processes would only slow the table
RATE = "_rate"


@dataclass
class Focus:
    """What the user drilled into: a job, then one of its processes (None: everything)."""

    job: str | None = None
    pid: int | None = None
    path: str | None = None

    def describe(self) -> str:
        """For the title bar."""
        parts = ([f"job {self.job}"] if self.job else []) + ([f"pid {self.pid}"] if self.pid is not None else [])
        return " › ".join(parts + ([self.path] if self.path else [])) or "all"


@dataclass
class View:
    """How the tables are cut: sort key, filter text, focus."""

    sort: str = SORTS[0]
    text: str = ""
    focus: Focus = field(default_factory=Focus)


def _sort_key(sort: str) -> pl.Expr:
    if sort == "iops":
        return pl.col(ag.OPS)
    if sort == "latency":
        return pl.when(pl.col(ag.OPS) > 0).then(pl.col(ag.TIME_NS) / pl.col(ag.OPS)).otherwise(0)
    return pl.col(ag.READ_BYTES) + pl.col(ag.WRITE_BYTES)


def _contains(columns: list[str], text: str) -> pl.Expr:
    """Rows where any of the columns contains the text (case-insensitive, literally)."""
    needle = text.lower()
    return pl.any_horizontal(pl.col(c).cast(pl.String).str.to_lowercase().str.contains(needle, literal=True).fill_null(False)
                             for c in columns)


def _mean_latency(row: dict) -> str:
    return format_seconds(row[ag.TIME_NS] / row[ag.OPS] / 1e9) if row[ag.OPS] else "-"


def job_rows(snap: Snapshot, view: View) -> list[tuple]:
    """(job, processes, read/s, write/s, IOPS, latency), busiest first."""
    frame = snap.processes.with_columns(pl.col(s.JOB).fill_null("-"))
    if view.text:
        frame = frame.filter(_contains([s.JOB], view.text))
    return _grouped_rows(frame, s.JOB, view, snap.seconds)


def process_rows(snap: Snapshot, view: View) -> list[tuple]:
    """(pid, comm, job, rank/worker, read/s, write/s, IOPS, latency, read, written since the start)."""
    frame = snap.processes
    if view.focus.job is not None:
        frame = frame.filter(pl.col(s.JOB).fill_null("-") == view.focus.job)
    if view.text:
        frame = frame.filter(_contains([s.PID, s.COMM, s.JOB], view.text))
    frame = frame.sort(_sort_key(view.sort), f"total_{ag.OPS}", s.PID, descending=[True, True, False]).head(MAX_ROWS)
    sec = snap.seconds
    rows = []
    for row in frame.iter_rows(named=True):
        tags = "/".join("-" if row[k] is None else str(row[k]) for k in (s.RANK, s.WORKER))
        rows.append((str(row[s.PID]), row[s.COMM] or "?", row[s.JOB] or "-", tags, format_rate(row[ag.READ_BYTES] / sec),
                     format_rate(row[ag.WRITE_BYTES] / sec), format_count(row[ag.OPS] / sec), _mean_latency(row),
                     format_bytes(row[f"total_{ag.READ_BYTES}"] or 0), format_bytes(row[f"total_{ag.WRITE_BYTES}"] or 0)))
    return rows


def _focused(frame: pl.DataFrame, snap: Snapshot, view: View) -> pl.DataFrame:
    """The rows (with PID) of the focused process, or of the focused job's processes, or all."""
    if view.focus.pid is not None:
        return frame.filter(pl.col(s.PID) == view.focus.pid)
    if view.focus.job is not None:
        pids = snap.processes.filter(pl.col(s.JOB).fill_null("-") == view.focus.job).get_column(s.PID)
        return frame.filter(pl.col(s.PID).is_in(pids.implode()))
    return frame


def file_rows(snap: Snapshot, view: View) -> list[tuple]:
    """(path, processes, read/s, write/s, IOPS, latency) of the focused process or of all."""
    frame = _focused(snap.files, snap, view)
    if view.text:
        frame = frame.filter(_contains([s.PATH], view.text))
    return _grouped_rows(frame, s.PATH, view, snap.seconds)


def network_rows(snap: Snapshot, view: View) -> list[tuple]:
    """(peer, processes, received/s, sent/s, calls/s, requests/s, request latency, operations)
    of the focused process or of all (the NET and HTTP layers: `--layers net` or `tls`), most
    bytes first; operations: the peer's requests per second by operation (S3's or the method),
    the most first."""
    frame = _focused(snap.network, snap, view)
    if view.text:
        frame = frame.filter(_contains([ag.PEER], view.text))
    sec = snap.seconds
    by_op = (frame.filter(pl.col(ag.REQUEST_OP).is_not_null()).group_by(ag.PEER, ag.REQUEST_OP).agg(pl.col(ag.REQUESTS).sum())
             .sort(ag.REQUESTS, ag.REQUEST_OP, descending=[True, False]))
    operations: dict[str, list[str]] = {}
    for peer, op, requests in by_op.iter_rows():
        operations.setdefault(peer, []).append(f"{op} {format_count(requests / sec)}")
    groups = frame.group_by(ag.PEER).agg(pl.col(s.PID).n_unique().alias("n"), *(pl.col(name).sum() for name in ag.NETWORK_SUMS))
    groups = groups.sort(pl.col(ag.RECEIVED) + pl.col(ag.SENT), ag.PEER, descending=[True, False]).head(MAX_ROWS)
    return [(row[ag.PEER], str(row["n"]), format_rate(row[ag.RECEIVED] / sec), format_rate(row[ag.SENT] / sec),
             format_count(row[ag.NET_CALLS] / sec), format_count(row[ag.REQUESTS] / sec),
             format_seconds(row[ag.REQUEST_NS] / row[ag.REQUESTS] / 1e9) if row[ag.REQUESTS] else "-",
             ", ".join(operations.get(row[ag.PEER], [])[:3]) or "-")
            for row in groups.iter_rows(named=True)]


def _grouped_rows(frame: pl.DataFrame, key: str, view: View, sec: float) -> list[tuple]:
    """(key, rows summed, read/s, write/s, IOPS, latency) per value of key, sorted by the view, the first MAX_ROWS."""
    groups = frame.group_by(key).agg(pl.len().alias("n"), pl.col(ag.OPS).sum(), pl.col(ag.READ_BYTES).sum(),
                                     pl.col(ag.WRITE_BYTES).sum(), pl.col(ag.TIME_NS).sum())
    groups = groups.sort(_sort_key(view.sort), key, descending=[True, False]).head(MAX_ROWS)
    return [(row[key], str(row["n"]), format_rate(row[ag.READ_BYTES] / sec), format_rate(row[ag.WRITE_BYTES] / sec),
             format_count(row[ag.OPS] / sec), _mean_latency(row)) for row in groups.iter_rows(named=True)]


def event_rows(snap: Snapshot, view: View) -> list[tuple]:
    """The most recent events, newest first: (time, pid, comm, op, path, bytes, latency, ret)."""
    frame = snap.events
    if view.focus.pid is not None:
        frame = frame.filter(pl.col(s.PID) == view.focus.pid)
    if view.text:
        frame = frame.filter(_contains([s.PATH, s.OP, s.COMM, s.PID], view.text))
    rows = []
    for row in frame.reverse().iter_rows(named=True):
        when = f"{(row[s.TS] % 60_000_000_000) / 1e9:06.3f}"  # seconds within the minute
        rows.append((when, str(row[s.PID]), row[s.COMM] or "?", row[s.OP], row[s.PATH] or "", format_bytes(row[s.BYTES] or 0),
                     format_seconds(row[s.DUR] / 1e9), str(row[s.RET])))
    return rows


def latency_lines(snap: Snapshot, view: View, width: int = 40, top_ops: int = 6) -> list[str]:
    """A log2 latency histogram per operation (the busiest ops), as text bars."""
    frame = snap.latency
    if view.text:
        frame = frame.filter(_contains([s.OP], view.text))
    ops = frame.group_by(s.OP).agg(pl.col("count").sum()).sort("count", s.OP, descending=[True, False]).head(top_ops)
    lines = []
    for op, total in ops.iter_rows():
        lines.append(f"{op} ({total:,} calls)")
        buckets = frame.filter(pl.col(s.OP) == op).sort(ag.LATENCY_BUCKET)
        most = buckets.get_column("count").max() or 1
        for bucket, count in buckets.select(ag.LATENCY_BUCKET, "count").iter_rows():
            bar = "█" * max(1, round(width * count / most))
            lines.append(f"  {format_seconds(2 ** bucket / 1e9):>9} {bar} {count:,}")
    return lines or ["no calls in this window"]
