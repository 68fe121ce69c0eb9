"""`ioobserve export`: a trace as Chrome trace JSON (Perfetto) or Parquet."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from ioobserve.cli.errors import fail

EPILOG = """Examples:

  ioobserve export traces/node1-20261122T101500-4242.pfw.gz --to perfetto -o run.json
  (open run.json at ui.perfetto.dev, or with Perfetto's trace_processor)

  ioobserve export traces/*.pfw.gz --to parquet -o run.parquet
  (read with polars.read_parquet, pyarrow or DuckDB)
"""


class Format(str, Enum):
    """Export formats."""

    perfetto = "perfetto"
    parquet = "parquet"


def export(
    traces: Annotated[list[Path], typer.Argument(help="Trace files (.pfw.gz), ours or DFTracer's.")],
    to: Annotated[Format, typer.Option("--to", help="perfetto (Chrome trace JSON) or parquet.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="The file to write.")],
    force: Annotated[bool, typer.Option("--force", help="Replace OUTPUT if it exists.")] = False,
) -> None:
    """Convert traces for other tools, with the Python calls that made the I/O as PYTHON-layer
    spans (see ioobserve.python.spans); damaged members are skipped and reported."""
    from ioobserve.trace.output import OutputError
    from ioobserve.trace.read.export import WRITERS, write_atomically
    from ioobserve.trace.read.reader import TraceError, load

    for trace in traces:
        if not trace.is_file():
            fail(f"{trace}: no such trace file")
    damage: list = []
    try:
        frame = load(traces, damage=damage)  # the Python spans in it: Perfetto shows them as the calls above the I/O
    except TraceError as exc:
        fail(str(exc))
    for found in damage:
        for note in found.notes:
            print(f"ioobserve: warning: {found.path}: {note}", file=sys.stderr)
        if found:
            print(f"ioobserve: warning: {found.describe()}", file=sys.stderr)
    written = []
    try:
        write_atomically(output, lambda handle: written.append(WRITERS[to.value](frame, handle)), replace=force)
    except OutputError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write {output}: {exc.strerror}")
    print(f"{output}: {written[0]:,} events ({to.value})")
