"""`ioobserve diff`: two runs side by side, with what changed between them."""

from __future__ import annotations

import glob
import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from ioobserve.cli import analysis_options as opt
from ioobserve.cli.errors import EXIT_FAILURE, UserError, fail

EPILOG = """Examples:

  ioobserve diff yesterday/node1-20261122T101500-4242.pfw.gz today/node1-20261123T091200-5120.pfw.gz

  ioobserve diff 'run1/*.pfw.gz' 'run2/*.pfw.gz' --files-by name --threshold 50

  ioobserve diff run1/ run2/ --files-by '/dataset/(.*)' --json > change.json

  ioobserve diff run1/ run2/ --html change.html

A run is a trace file, a directory of traces, or a quoted glob (several nodes' traces).
Files are matched by path, by name, or by the part of their path a regular expression's
first group picks (two copies of a dataset in different places compare shard by shard).
"""

Side = Annotated[str, typer.Argument(help="A run: a trace (.pfw.gz), a directory of traces, or a quoted glob.")]


def run_traces(run: str, which: str) -> list[Path]:
    """The trace files of a run given as a file, a directory or a glob."""
    path = Path(run)
    if path.is_file():
        return [path]
    if path.is_dir():
        found = sorted(path.glob("*.pfw.gz"))
        if not found:
            raise UserError(f"{which} {run}: the directory holds no trace (*.pfw.gz)")
        return found
    found = sorted(Path(p) for p in glob.glob(run) if Path(p).is_file())
    if not found:
        raise UserError(f"{which} {run}: no trace file, directory or glob of traces by that name")
    return found


def files_key(text: str):
    """The --files-by value as a FileKey: path, name, or a regular expression Polars accepts."""
    import re

    import polars as pl

    from ioobserve.analysis.compare import FileKey

    if text in ("path", "name"):
        return FileKey(text)
    try:
        if re.compile(text).groups > 1:
            raise UserError(f"--files-by {text!r}: give at most one group, the part of the path that names a file")
        pl.Series([""]).str.extract(text, 0)
    except (re.error, pl.exceptions.PolarsError) as exc:
        raise UserError(f"--files-by {text!r}: not a regular expression ({str(exc).splitlines()[0]}); "
                        "give path, name, or a pattern such as '/dataset/(.*)'") from None
    return FileKey(text)


def diff(
    baseline: Side,
    variant: Side,
    files_by: Annotated[str, typer.Option("--files-by", help="Match files by 'path', 'name', or a regular expression "
                                          "whose first group (or whole match) is the key.")] = "path",
    threshold: Annotated[int, typer.Option("--threshold", min=1, metavar="PERCENT",
                                           help="Say a change when a figure grew or shrank by this much or more.")] = 25,
    path_prefix: opt.PrefixOption = None,
    since: opt.SinceOption = None,
    until: opt.UntilOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print everything as JSON (every table, every row).")] = False,
    html: Annotated[Path | None, typer.Option("--html", help="Also write the comparison as an HTML report here.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace the --html file if it exists.")] = False,
    top: Annotated[int, typer.Option("--top", min=1, help="Rows per table on screen.")] = 10,
    scheduler: opt.SchedulerOption = None,
    memory: opt.MemoryOption = 512,
) -> None:
    """Compare two runs: the tables of `analyze` (per job, layer, operation, file, Python
    function, endpoint; busy time, bandwidth, unoverlapped I/O, call latency) side by side with
    their delta and ratio, and the changes past a threshold. --since and --until count from
    each run's own start."""
    from ioobserve.analysis.changes import changes
    from ioobserve.analysis.compare import compare, comparison_dict
    from ioobserve.cli.diff_view import print_comparison

    try:
        key = files_key(files_by)
        runs = [run_traces(baseline, "BASELINE"), run_traces(variant, "VARIANT")]
        analyses = [opt.run_analysis(traces, opt.build_filters(traces, None, None, path_prefix, since, until),
                                     scheduler, memory) for traces in runs]
    except UserError as exc:
        fail(str(exc))
    comparison = compare(*analyses, key)
    comparison.changes = changes(comparison, threshold / 100)
    names = [[str(trace) for trace in traces] for traces in runs]
    if html is not None:
        _write_html(comparison, names, threshold, html, force)
    if as_json:
        sys.stdout.write(json.dumps(comparison_dict(comparison, *names) | {"threshold_percent": threshold}, default=str) + "\n")
    else:
        print_comparison(comparison, names, threshold, top=top)
    empty = [which for which, a in zip(("baseline", "variant"), analyses, strict=True) if not a.overview["calls"]]
    if empty:
        print(f"ioobserve: no events match in the {' and the '.join(empty)}: check the traces and the filters", file=sys.stderr)
        raise typer.Exit(EXIT_FAILURE)


def _write_html(comparison, names: list[list[str]], threshold: int, output: Path, force: bool) -> None:
    from ioobserve.report.diff_html import render_comparison

    opt.write_page(output, render_comparison(comparison, *names, threshold), force)
    print(f"{output}: comparison of {len(names[0])} and {len(names[1])} trace(s), {len(comparison.changes)} change(s)",
          file=sys.stderr)
