"""`analyze`'s screen: the overview, the insights and the main tables, as rich tables."""

from __future__ import annotations

import polars as pl
from rich.console import Console
from rich.table import Table

from ioobserve.analysis import results as r
from ioobserve.analysis.copies import CELLS, cells
from ioobserve.analysis.requests import ENDPOINT, ERRORS, LATENCY_BUCKETS, REQUESTS, status_spread
from ioobserve.analysis.sizes import BUCKET, COUNT
from ioobserve.cli.summary_view import short_path
from ioobserve.data import schema as s
from ioobserve.data.operations import KIND
from ioobserve.data.units import format_bytes, format_rate

LEVEL_STYLE = {"high": "bold red", "warn": "yellow"}
WIDE = 120  # terminal columns for the full tables


def _ms(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:,.1f} ms"


def _rate(bytes_per_s: float | None) -> str:
    return "-" if bytes_per_s is None else format_rate(bytes_per_s)


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def print_analysis(analysis: r.Analysis, console: Console | None = None, top: int = 10) -> None:
    """Everything `analyze` shows, in reading order."""
    console = console or Console()
    _overview(analysis, console)
    _insights(analysis, console)
    table = _table("Layers (every event)", "layer", "events", "bytes", "time")
    for row in analysis.layers.iter_rows(named=True):
        table.add_row(row[s.LAYER], f"{row['events']:,}", format_bytes(row[s.BYTES]), _ms(row[r.TIME_NS]))
    console.print(table)
    _totals(console, f"Operations ({analysis.layer})", analysis.ops, [s.OP], top, bandwidth=False)
    if analysis.jobs.filter(pl.col(s.JOB).is_not_null()).height:
        _totals(console, "Jobs", analysis.jobs, [s.JOB], top)
    if analysis.ranks.height:
        _totals(console, "Ranks", analysis.ranks, [s.JOB, s.RANK], top)
    if analysis.workers.height:
        _totals(console, "Worker slots (all epochs)", analysis.workers, [s.RANK, s.WORKER], top)
    _latency(analysis, console, top)
    _processes(analysis, console, top)
    _functions(analysis, console, top)
    _files(analysis, console, top)
    _requests(analysis, console, top)
    _sizes_and_patterns(analysis, console)


def _table(title: str, *columns: str) -> Table:
    table = Table(title=title, title_justify="left", title_style="bold")
    for index, column in enumerate(columns):
        table.add_column(column, justify="left" if index == 0 else "right", overflow="fold")
    return table


def _overview(analysis: r.Analysis, console: Console) -> None:
    o = analysis.overview
    grid = Table.grid(padding=(0, 2))
    span = (o[r.LAST_NS] - o[r.FIRST_NS]) if o.get(r.FIRST_NS) is not None else None
    grid.add_row("nodes", ", ".join(analysis.hosts) or "-")
    grid.add_row("totals from", f"the {analysis.layer or '-'} layer")
    grid.add_row("span", _ms(span))
    grid.add_row("processes, files", f"{o['processes']:,}, {o['files']:,}")
    grid.add_row("calls", f"{o[r.CALLS]:,} ({o['read_calls']:,} reads, {o['write_calls']:,} writes, {o[r.ERRORS]:,} failed)")
    ratio = f" (read/write {o['read_write_ratio']:.2f})" if o["read_write_ratio"] is not None else ""
    grid.add_row("read, written", f"{format_bytes(o[r.BYTES_READ] or 0)}, {format_bytes(o[r.BYTES_WRITTEN] or 0)}{ratio}")
    grid.add_row("I/O time", f"{_ms(o[r.TIME_NS])} in calls, {_ms(o[r.IO_BUSY_NS])} with at least one in progress")
    grid.add_row("metadata share", f"{_share(o['metadata_share'])} of the time in calls")
    grid.add_row("bandwidth", f"{_rate(o[r.BYTES_PER_S])} over {_ms(o[r.DATA_BUSY_NS])} of reads and writes in progress")
    grid.add_row("unoverlapped I/O", f"{_ms(o[r.UNOVERLAPPED_NS])} of I/O with no thread computing")
    if o.get("python_io_busy_ns") is not None:
        grid.add_row("Python I/O calls", f"{_ms(o['python_io_busy_ns'])} in imports, open() and the functions that did "
                     f"I/O; unoverlapped {_ms(o['python_unoverlapped_ns'])}")
    console.print(grid)


def _insights(analysis: r.Analysis, console: Console) -> None:
    if not analysis.insights:
        console.print("\n[green]No insight fired[/green]: nothing in this trace crossed a threshold.\n")
        return
    console.print(f"\n[bold]Insights ({len(analysis.insights)})[/bold]")
    for insight in analysis.insights:
        console.print(f"[{LEVEL_STYLE.get(insight.level, '')}]{insight.level.upper():4}[/] [bold]{insight.title}[/bold]: {insight.detail}")
        for item in insight.evidence:
            console.print(f"       {short_path(item, 100)}", highlight=False)
        console.print(f"       [dim]try:[/dim] {insight.advice}")
    console.print()


def _wide(console: Console) -> bool:
    """Room for every column (else the tables keep the main ones, for 80 columns over SSH)."""
    return console.width >= WIDE


def _totals(console: Console, title: str, frame: pl.DataFrame, keys: list[str], top: int, bandwidth: bool = True) -> None:
    wide = _wide(console)
    columns = [*keys, "calls", "read", "written", "time"] + (["metadata"] if wide else [])
    columns += (["busy", "bandwidth"] if wide else ["bandwidth"]) if bandwidth else []
    table = _table(title + (f", top {top} of {frame.height}" if frame.height > top else ""), *columns)
    for row in frame.head(top).iter_rows(named=True):
        cells = [("-" if row[key] is None else str(row[key])) for key in keys]
        cells += [f"{row[r.CALLS]:,}", format_bytes(row[r.BYTES_READ] or 0), format_bytes(row[r.BYTES_WRITTEN] or 0),
                  _ms(row[r.TIME_NS])] + ([_ms(row[r.META_NS])] if wide else [])
        if bandwidth:
            cells += ([_ms(row.get(r.DATA_BUSY_NS))] if wide else []) + [_rate(row.get(r.BYTES_PER_S))]
        table.add_row(*cells)
    console.print(table)


def _processes(analysis: r.Analysis, console: Console, top: int) -> None:
    frame, wide = analysis.processes, _wide(console)
    columns = ["pid", "comm", "rank/wkr", "calls", "read", "written", "I/O time"] + (["seen for"] if wide else []) + ["in I/O"]
    table = _table(f"Processes, top {min(top, frame.height)} of {frame.height} by I/O time", *columns)
    for row in frame.head(top).iter_rows(named=True):
        tags = "/".join("-" if row[key] is None else str(row[key]) for key in (s.RANK, s.WORKER))
        host = f"{row[s.HOST]}:" if len(analysis.hosts) > 1 else ""
        cells = [f"{host}{row[s.PID]}", row[s.COMM] or "?", tags, f"{row[r.CALLS]:,}", format_bytes(row[r.BYTES_READ] or 0),
                 format_bytes(row[r.BYTES_WRITTEN] or 0), _ms(row[r.TIME_NS])]
        table.add_row(*cells, *([_ms(row[r.WALL_NS])] if wide else []), _share(row[r.IO_SHARE]))
    console.print(table)
    for row in analysis.spawns.iter_rows(named=True):
        console.print(f"pid {row[s.PPID]} started {row['workers']} worker processes in {row['slots']} slots over "
                      f"{row['epochs']} epoch(s)")


def _latency(analysis: r.Analysis, console: Console, top: int) -> None:
    frame = analysis.latency
    table = _table(f"Call latency, top {min(top, frame.height)} of {frame.height} by calls (within 9%)",
                   "layer op", "calls", "median", "p90", "p99")
    for row in frame.head(top).iter_rows(named=True):
        table.add_row(f"{row[s.LAYER]} {row[s.OP]}", f"{row['calls']:,}", *(_us(row[p]) for p in ("p50_ns", "p90_ns", "p99_ns")))
    console.print(table)


def _us(ns: float | None) -> str:
    if ns is None:
        return "-"
    return f"{ns:.0f} ns" if ns < 1e3 else f"{ns / 1e3:,.1f} µs" if ns < 1e6 else _ms(ns)


def _functions(analysis: r.Analysis, console: Console, top: int) -> None:
    """The Python functions that made I/O calls (a recording with the Python layer)."""
    frame = analysis.functions
    if not frame.height:
        return
    table = _table(f"Python functions, top {min(top, frame.height)} of {frame.height} by I/O time", "function (file)",
                   "calls", "read", "written", "time")
    for row in frame.head(top).iter_rows(named=True):
        table.add_row(f"{row[s.PY_FUNCTION]} ({short_path(row[s.PY_FILE] or '?', 40)})", f"{row[r.CALLS]:,}",
                      format_bytes(row[r.BYTES_READ] or 0), format_bytes(row[r.BYTES_WRITTEN] or 0), _ms(row[r.TIME_NS]))
    console.print(table)


def _files(analysis: r.Analysis, console: Console, top: int) -> None:
    frame = analysis.files
    table = _table(f"Files, top {min(top, frame.height)} of {frame.height} by I/O time", "path", "procs", "calls",
                   "read", "re-read", "written", "time")
    for row in frame.head(top).iter_rows(named=True):
        table.add_row(short_path(row[s.PATH], 60 if _wide(console) else 30), f"{row[r.PROCESSES]:,}", f"{row[r.CALLS]:,}",
                      format_bytes(row[r.BYTES_READ] or 0), format_bytes(row[r.REREAD_BYTES] or 0),
                      format_bytes(row[r.BYTES_WRITTEN] or 0), _ms(row[r.TIME_NS]))
    console.print(table)
    shared = frame.filter(pl.col(r.PROCESSES) > 1).height
    console.print(f"{shared:,} file(s) used by more than one process, {frame.height - shared:,} by one only\n")


def _requests(analysis: r.Analysis, console: Console, top: int) -> None:
    """Object-storage requests (the HTTP layer, with --layers net or tls): per object, and
    per endpoint with the spread of their latency."""
    if not analysis.objects.height:
        return
    table = _table(f"Objects ({analysis.objects.height:,}, by time)", "object", "requests", "bytes", "time")
    for row in analysis.objects.head(top).iter_rows(named=True):
        table.add_row(row[s.PATH], f"{row[REQUESTS]:,}", format_bytes(row[s.BYTES]), _ms(row[r.TIME_NS]))
    console.print(table)
    table = _table("Requests by operation", "operation", "requests", "failed", "answers by status", "bytes", "time")
    for row in analysis.requests.iter_rows(named=True):
        table.add_row(row[s.OP] or "?", f"{row[REQUESTS]:,}", f"{row[ERRORS]:,}", status_spread(analysis.statuses, row[s.OP]),
                      format_bytes(row[s.BYTES]), _ms(row[r.TIME_NS]))
    console.print(table)
    table = _table("Endpoints: requests by latency", "endpoint", "requests", "bytes", "latency (requests per bucket)")
    for row in analysis.endpoints.iter_rows(named=True):
        spread = ", ".join(f"{bucket} {row[bucket]:,}" for bucket in LATENCY_BUCKETS if row[bucket])
        table.add_row(row[ENDPOINT] or "?", f"{row[REQUESTS]:,}", format_bytes(row[s.BYTES]), spread)
    console.print(table)
    if analysis.copies.height:
        table = _table(f"Objects read through local copies ({analysis.copies.height:,}, most unread first)", *CELLS)
        for row in analysis.copies.head(top).iter_rows(named=True):
            shown = cells(row)
            table.add_row(shown[0], short_path(shown[1], 60 if _wide(console) else 30), *shown[2:])
        console.print(table)


def _sizes_and_patterns(analysis: r.Analysis, console: Console) -> None:
    sizes = analysis.sizes.with_columns(pl.col(BUCKET).cast(pl.String), pl.col(KIND).cast(pl.String))
    table = _table("Access sizes (requested)", "size", "reads", "writes")
    counts = {(row[KIND], row[BUCKET]): row[COUNT] for row in sizes.iter_rows(named=True)}
    for bucket in sizes.get_column(BUCKET).unique(maintain_order=True).to_list():
        table.add_row(bucket, f"{counts.get(('read', bucket), 0):,}", f"{counts.get(('write', bucket), 0):,}")
    patterns = _table("Access patterns (per file descriptor)", "kind", "consecutive", "sequential", "random", "unaligned")
    for row in analysis.patterns.with_columns(pl.col(KIND).cast(pl.String)).iter_rows(named=True):
        patterns.add_row(row[KIND], *(f"{row[key]:,}" for key in ("consecutive", "sequential", "random", "unaligned")))
    console.print(table)
    console.print(patterns)
