"""Options shared by `analyze`, `report` and `diff`: which traces, which events, where to compute; and
writing a page."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer

from ioobserve.cli.errors import UserError

TracesArgument = Annotated[list[Path], typer.Argument(help="Trace files (.pfw.gz), ours or DFTracer's; one per node or several.")]
JobOption = Annotated[list[str] | None, typer.Option("--job", help="Keep this Slurm job's events (repeatable).")]
PidOption = Annotated[
    list[int] | None, typer.Option("--pid", help="Keep this process's events and its descendants' (repeatable).")]
PrefixOption = Annotated[
    list[str] | None, typer.Option("--path-prefix", help="Keep events on files under this path (repeatable).")]
SinceOption = Annotated[
    str | None,
    typer.Option("--since", help="Keep events from this time: seconds after the trace starts (90, 1.5m, 2h) or a date "
                 "and time (2026-11-22T10:15:00, local time unless it has an offset)."),
]
UntilOption = Annotated[str | None, typer.Option("--until", help="Keep events before this time (as --since).")]
SchedulerOption = Annotated[
    str | None,
    typer.Option("--scheduler", help="Run on this Dask cluster (tcp://HOST:PORT, or a scheduler file), one task per "
                 "trace; 'local' starts one on this machine. Without it, the analysis runs here."),
]
MemoryOption = Annotated[
    int,
    typer.Option("--memory", min=256, metavar="MIB",
                 help="Peak memory to aim for, in MiB, whatever the traces' size: they are read in chunks that fit. "
                 "Larger is a little faster."),
]

_RELATIVE = re.compile(r"^\+?(\d+(?:\.\d+)?)\s*(s|m|h)?$")
_UNIT_S = {None: 1, "s": 1, "m": 60, "h": 3600}


def parse_time(text: str, start_ns: int | None, option: str) -> int:
    """A --since/--until value as ns since the epoch; relative values count from start_ns."""
    relative = _RELATIVE.match(text.strip())
    if relative:
        if start_ns is None:
            raise UserError(f"{option} {text}: the traces have no events to count from; give a date and time instead")
        return start_ns + int(float(relative.group(1)) * _UNIT_S[relative.group(2)] * 1e9)
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UserError(f"{option} {text!r}: expected seconds after the start (90, 1.5m, 2h) or a date and time "
                        "(2026-11-22T10:15:00)") from None
    return int(when.timestamp() * 1e9)


def build_filters(traces: list[Path], jobs, pids, prefixes, since: str | None, until: str | None):
    """The analysis Filters of the options (checking the traces exist first)."""
    from ioobserve.analysis.engine import trace_start_ns
    from ioobserve.analysis.trace_partial import Filters

    for trace in traces:
        if not trace.is_file():
            raise UserError(f"{trace}: no such trace file")
    start = trace_start_ns(traces) if since and _RELATIVE.match(since.strip()) or until and _RELATIVE.match(
        until.strip()) else None
    start_ns = parse_time(since, start, "--since") if since else None
    end_ns = parse_time(until, start, "--until") if until else None
    if start_ns is not None and end_ns is not None and end_ns <= start_ns:
        raise UserError(f"--until {until} is not after --since {since}")
    return Filters(
        jobs=tuple(jobs) if jobs else None, pids=tuple(pids) if pids else None,
        path_prefixes=tuple(prefixes) if prefixes else None, start_ns=start_ns, end_ns=end_ns,
    )


def run_analysis(traces: list[Path], filters, scheduler: str | None, memory_mb: int | None = None):
    """The Analysis of the traces, with its insights; damage is warned about on stderr."""
    import signal
    import sys

    from ioobserve.analysis.distributed import SchedulerError
    from ioobserve.analysis.engine import analyze_partial
    from ioobserve.analysis.insights import insights
    from ioobserve.analysis.results import results
    from ioobserve.analysis.trace_partial import DEFAULT_MEMORY_MB
    from ioobserve.trace.read.reader import TraceError, throttles

    # SIGTERM ends the run as Ctrl-C does, through the exit handlers that remove its runs on disk
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    damage: list = []
    try:
        analysis = results(analyze_partial(traces, filters, scheduler, damage, memory_mb or DEFAULT_MEMORY_MB))
    except (TraceError, SchedulerError) as exc:
        raise UserError(str(exc)) from None
    for found in damage:
        for note in found.notes:
            print(f"ioobserve: warning: {found.path}: {note}", file=sys.stderr)
        if found:
            print(f"ioobserve: warning: {found.describe()}", file=sys.stderr)
    analysis.throttles = throttles(traces)
    analysis.insights = insights(analysis)
    return analysis


def write_page(output: Path, page: str, replace: bool) -> None:
    """An HTML page written whole (0600, never through a link) or one clear line and exit."""
    from ioobserve.cli.errors import fail
    from ioobserve.trace.output import OutputError
    from ioobserve.trace.read.export import write_atomically

    data = page.encode()
    try:
        write_atomically(output, lambda handle: handle.write(data), replace=replace)
    except OutputError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write {output}: {exc.strerror}")
