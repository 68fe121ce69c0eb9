"""`ioobserve index`: rebuild the member index of traces."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ioobserve.cli.errors import EXIT_FAILURE, fail

EPILOG = """Examples:

  ioobserve index traces/node1-20261122T101500-4242.pfw.gz

  ioobserve index traces/*.pfw.gz      # after copying traces without their .ioidx files
"""


def index(traces: Annotated[list[Path], typer.Argument(help="Trace files (.pfw.gz).")]) -> None:
    """Rebuild each trace's member index (<trace>.ioidx) by reading it; damaged members are
    skipped and reported, and the exit status is then non-zero."""
    from ioobserve.trace.members import NotATrace, build_index, write_index

    damaged = False
    for trace in traces:
        if not trace.is_file():
            fail(f"{trace}: no such trace file")
        try:
            entries, damage = build_index(trace)
        except NotATrace as exc:
            fail(str(exc))
        except OSError as exc:
            fail(f"{trace}: cannot read it ({exc.strerror})")
        target = write_index(trace, entries)
        lines = sum(e.lines for e in entries)
        events = sum(e.events for e in entries)
        print(f"{target}: {len(entries)} members, {lines:,} lines, {events:,} events")
        if damage:
            damaged = True
            print(f"ioobserve: warning: {damage.describe()}", file=sys.stderr)
    if damaged:
        raise typer.Exit(EXIT_FAILURE)
