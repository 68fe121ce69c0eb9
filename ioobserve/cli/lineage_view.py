"""`analyze --lineage`'s screen: the data each job used and generated, each process's, and
what each generated file may derive from."""

from __future__ import annotations

import polars as pl
from rich.console import Console
from rich.table import Table

from ioobserve.analysis import lineage as ln
from ioobserve.analysis import results as r
from ioobserve.cli.summary_view import short_path
from ioobserve.data import schema as s
from ioobserve.data.units import format_bytes


def _table(title: str, *columns: str) -> Table:
    table = Table(title=title, title_justify="left", title_style="bold")
    for index, column in enumerate(columns):
        table.add_column(column, justify="left" if index < 2 else "right", overflow="fold")
    return table


def print_lineage(analysis: r.Analysis, console: Console | None = None, top: int = 10) -> None:
    """The lineage tables, the largest first."""
    console = console or Console()
    jobs = ln.per_job(analysis.lineage)
    start = analysis.overview.get(r.FIRST_NS) or 0
    table = _table(f"Data each job used and generated ({jobs.height:,} files; top {min(top, jobs.height)})", "job", "file",
                   "role", "read", "written", "procs", "from s", "to s")
    for row in jobs.head(top).iter_rows(named=True):
        table.add_row(row[s.JOB] or "-", short_path(row[s.PATH], 60), ln.role(row[ln.BYTES_READ], row[ln.GENERATED]),
                      format_bytes(row[ln.BYTES_READ]), format_bytes(row[ln.BYTES_WRITTEN]), f"{row[ln.PROCESSES]:,}",
                      f"{(row[r.FIRST_NS] - start) / 1e9:.3f}", f"{(row[r.LAST_NS] - start) / 1e9:.3f}")
    console.print(table)
    processes = ln.per_process(analysis.lineage)
    table = _table(f"Data each process used and generated (top {min(top, processes.height)} by bytes)", "process", "comm",
                   "files read", "read", "files written", "written")
    for row in processes.head(top).iter_rows(named=True):
        table.add_row(f"{row[s.HOST]}:{row[s.PID]}", row[s.COMM] or "?", f"{row['files_read']:,}", format_bytes(row[ln.BYTES_READ]),
                      f"{row['files_written']:,}", format_bytes(row[ln.BYTES_WRITTEN]))
    console.print(table)
    writers = (analysis.lineage.filter(pl.col(ln.GENERATED))
               .group_by(s.HOST, s.PID, s.COMM, s.PY_FUNCTION, s.PATH).agg(pl.col(ln.BYTES_WRITTEN).sum())
               .sort(ln.BYTES_WRITTEN, s.PATH, descending=[True, False]))
    table = _table(f"Files generated, by process and Python function (top {min(top, writers.height)})", "process",
                   "file", "function", "written")
    for row in writers.head(top).iter_rows(named=True):
        table.add_row(f"{row[s.PID]} {row[s.COMM] or '?'}", short_path(row[s.PATH], 50), row[s.PY_FUNCTION] or "-",
                      format_bytes(row[ln.BYTES_WRITTEN]))
    console.print(table)
    links = analysis.derived.group_by(ln.TARGET).agg(
        pl.col(ln.SOURCE).n_unique().alias("n"), pl.col(ln.SOURCE).min().alias("first"),
        pl.col(s.PID).unique().sort().alias("pids")).sort("n", ln.TARGET, descending=[True, False])
    table = _table(f"What each generated file may derive from: files its writer read before ({analysis.derived.height:,} links)",
                   "file", "read before it", "by")
    for row in links.head(top).iter_rows(named=True):
        more = f" and {row['n'] - 1:,} more" if row["n"] > 1 else ""
        table.add_row(short_path(row[ln.TARGET], 50), f"{short_path(row['first'], 50)}{more}", ", ".join(map(str, row["pids"])))
    console.print(table)
