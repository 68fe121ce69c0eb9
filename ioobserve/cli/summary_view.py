"""The one-screen summary printed when a recording ends."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from ioobserve.summary import Summary


def human_bytes(n: int) -> str:
    """1536 -> '1.5 KiB'."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def short_path(path: str, width: int = 44) -> str:
    """Keep the informative end of a long path."""
    return path if len(path) <= width else "…" + path[-(width - 1) :]


def print_summary(summary: Summary, result, trace_paths: list[Path], console: Console | None = None) -> None:
    """Totals, losses and the top files, sized for one screen."""
    console = console or Console()
    totals = Table.grid(padding=(0, 2))
    more = f" (+{len(trace_paths) - 1} more parts)" if len(trace_paths) > 1 else ""
    totals.add_row("trace", f"{trace_paths[0]}{more}")
    totals.add_row("duration", f"{result.duration_s:.1f} s (stopped: {result.stopped_by})")
    if result.command_status is not None:
        totals.add_row("command exit", str(result.command_status))
    totals.add_row("events", f"{summary.records:,} ({summary.calls:,} calls)")
    lost = summary.lost_total
    detail = ", ".join(f"{k} {v:,}" for k, v in sorted(summary.lost.items())) if lost else ""
    totals.add_row("lost", f"{lost:,}" + (f" ({detail})" if detail else ""))
    totals.add_row("processes", f"{len(summary.pids):,}")
    totals.add_row("files", f"{len(summary.files):,}")
    totals.add_row("read", human_bytes(summary.bytes_read))
    totals.add_row("written", human_bytes(summary.bytes_written))
    if summary.jobs:
        jobs = sorted(summary.jobs.items(), key=lambda item: item[1][1] + item[1][2], reverse=True)
        shown = ", ".join(f"{job} ({calls:,} calls, {human_bytes(read)} read, {human_bytes(written)} written)"
                          for job, (calls, read, written) in jobs[:4])
        totals.add_row("jobs", shown + (f" and {len(jobs) - 4} more" if len(jobs) > 4 else ""))
    applied, malformed = summary.counters.get("tags_applied", 0), summary.counters.get("tags_malformed", 0)
    if applied or malformed:
        totals.add_row("tags", f"{applied:,} applied" + (f", {malformed:,} malformed (ignored)" if malformed else ""))
    console.print(totals)
    top = Table(title="top files", title_justify="left", show_edge=False)
    for column in ("path", "calls", "read", "written"):
        top.add_column(column, justify="left" if column == "path" else "right", no_wrap=True)
    for path, calls, read, written in summary.top_files(8):
        top.add_row(short_path(path), f"{calls:,}", human_bytes(read), human_bytes(written))
    console.print(top)
