"""`ioobserve report`: one self-contained HTML file of the analysis, with plots."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ioobserve.cli import analysis_options as opt
from ioobserve.cli.errors import EXIT_FAILURE, UserError, fail

EPILOG = """Examples:

  ioobserve report traces/node1-20261122T101500-4242.pfw.gz -o report.html

  ioobserve report /shared/traces/*.pfw.gz --job 81234 -o job81234.html --scheduler tcp://10.0.0.5:8786

The file has no script and loads nothing from the network: copy it anywhere and open it.
It names every file the traces saw, so it is created readable by its owner only.
"""


def report(
    traces: opt.TracesArgument,
    output: Annotated[Path, typer.Option("-o", "--output", help="The HTML file to write.")],
    job: opt.JobOption = None,
    pid: opt.PidOption = None,
    path_prefix: opt.PrefixOption = None,
    since: opt.SinceOption = None,
    until: opt.UntilOption = None,
    force: Annotated[bool, typer.Option("--force", help="Replace OUTPUT if it exists.")] = False,
    scheduler: opt.SchedulerOption = None,
    memory: opt.MemoryOption = 512,
) -> None:
    """The analysis as a self-contained HTML report: overview, insights, bandwidth and operations
    over time per layer, a timeline per process, access sizes, top files, metadata vs data time."""
    from ioobserve.report.html import render

    try:
        filters = opt.build_filters(traces, job, pid, path_prefix, since, until)
        analysis = opt.run_analysis(traces, filters, scheduler, memory)
    except UserError as exc:
        fail(str(exc))
    opt.write_page(output, render(analysis, [str(trace) for trace in traces]), force)
    print(f"{output}: report of {analysis.overview['calls']:,} calls, {len(analysis.insights)} insight(s)")
    if not analysis.overview["calls"]:
        print("ioobserve: no events match: check the trace and the filters")
        raise typer.Exit(EXIT_FAILURE)
