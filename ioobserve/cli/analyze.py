"""`ioobserve analyze`: the summary and insights of one or more traces."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from ioobserve.cli import analysis_options as opt
from ioobserve.cli.errors import EXIT_FAILURE, UserError, fail

EPILOG = """Examples:

  ioobserve analyze traces/node1-20261122T101500-4242.pfw.gz

  ioobserve analyze traces/*.pfw.gz --job 81234 --since 60 --until 5m

  ioobserve analyze traces/*.pfw.gz --json > summary.json

  ioobserve analyze traces/*.pfw.gz --lineage --job 81234

  ioobserve analyze /shared/traces/*.pfw.gz --scheduler tcp://10.0.0.5:8786
"""


def analyze(
    traces: opt.TracesArgument,
    job: opt.JobOption = None,
    pid: opt.PidOption = None,
    path_prefix: opt.PrefixOption = None,
    since: opt.SinceOption = None,
    until: opt.UntilOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print everything as JSON (every table, every row).")] = False,
    lineage: Annotated[bool, typer.Option("--lineage", help="Show the data each job and process used and generated, "
                                          "and what each generated file may derive from, instead of the summary.")] = False,
    top: Annotated[int, typer.Option("--top", min=1, help="Rows per table on screen.")] = 10,
    scheduler: opt.SchedulerOption = None,
    memory: opt.MemoryOption = 512,
) -> None:
    """Totals per job, rank, worker, process, file, layer and operation; busy time, bandwidth and
    unoverlapped I/O; access sizes and patterns; and insights with advice."""
    from ioobserve.analysis.results import as_dict
    from ioobserve.cli.analysis_view import print_analysis

    try:
        filters = opt.build_filters(traces, job, pid, path_prefix, since, until)
        analysis = opt.run_analysis(traces, filters, scheduler, memory)
    except UserError as exc:
        fail(str(exc))
    if as_json:
        # One write: json.dump writes each token on its own, 10x slower on a busy trace's 7 MB.
        sys.stdout.write(json.dumps(as_dict(analysis), default=str) + "\n")
    elif lineage:
        from ioobserve.cli.lineage_view import print_lineage

        print_lineage(analysis, top=top)
    else:
        print_analysis(analysis, top=top)
    if not analysis.overview["calls"]:
        print("ioobserve: no events match: check the trace and the filters", file=sys.stderr)
        raise typer.Exit(EXIT_FAILURE)
