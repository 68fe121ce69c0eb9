"""`ioobserve top`: watch the node's file I/O live in the terminal, or replay recorded traces."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from ioobserve.cli.errors import EXIT_FAILURE, fail
from ioobserve.cli.filters import (
    CgroupOption,
    CommOption,
    JobOption,
    LayersOption,
    NamespaceOption,
    PidOption,
    PodOption,
    PrefixOption,
    UnitOption,
    build_filters,
    build_python,
    split_layers,
)
from ioobserve.cli.prepare import ProbeChoice

EPILOG = """Examples:

  sudo ioobserve top                                   # every process on the node, live
  sudo ioobserve top --job 81234 --record /var/tmp/t   # one Slurm job, and its trace written as well
  sudo ioobserve top --namespace ml                    # the pods of one Kubernetes namespace
  ioobserve top --trace traces/node1-20261122T101500-4242.pfw.gz    # replay a recording (no root needed)
  sudo ioobserve top --attach /run/ioobserve/events.sock   # watch a running `ioobserve serve`

Keys: q quit, / filter, s sort, p pause, enter drill down, esc back, ? help; replay: arrows, space, home, end.
"""


class Theme(str, Enum):
    """ioobserve.tui.app.THEMES."""

    dark = "dark"
    light = "light"
    ansi_dark = "ansi-dark"
    ansi_light = "ansi-light"


def top(
    pid: PidOption = None,
    cgroup: CgroupOption = None,
    job: JobOption = None,
    unit: UnitOption = None,
    pod: PodOption = None,
    namespace: NamespaceOption = None,
    comm: CommOption = None,
    path_prefix: PrefixOption = None,
    layers: LayersOption = None,
    record: Annotated[Path | None, typer.Option("--record", help="Also write the trace into this directory.")] = None,
    trace: Annotated[list[Path] | None, typer.Option("--trace", help="Replay these traces instead of capturing.")] = None,
    attach: Annotated[Path | None, typer.Option("--attach", help="Watch a running `ioobserve serve` through its "
                                                "socket instead of capturing.")] = None,
    theme: Annotated[Theme, typer.Option("--theme", help="Colours: dark or light background, or the terminal's own "
                                         "palette (ansi-*).")] = Theme.dark,
) -> None:
    """A live view of file I/O: node totals, jobs, processes, files, latency histograms and the
    event stream, refreshed every second; or the same over recorded traces with a time cursor."""
    from ioobserve.cli.summary_view import incomplete_line
    from ioobserve.tui.app import make_app

    if attach is not None and (trace or record or any((pid, cgroup, job, unit, pod, namespace, comm, path_prefix, layers))):
        fail("--attach shows the daemon's whole stream: filters, --record and --trace do not go with it "
             "(filter in the app with /)")
    if attach is not None:
        source = _attach(attach)
    elif trace:
        source = _replay(trace)
    else:
        source = _live(pid, cgroup, job, unit, comm, path_prefix, layers, record, pod=pod, namespace=namespace)
    try:
        make_app(source, theme.value).run()
    finally:  # detach and flush before the process ends, however the app ended
        source.stop()
    outcome = source.outcome
    if outcome.error is not None:
        fail(f"the capture stopped: {outcome.error}", EXIT_FAILURE)
    if outcome.writer is not None:
        print(f"ioobserve: trace written to {outcome.writer.path} ({outcome.writer.events_written:,} events)")
        incomplete = incomplete_line(outcome.writer, outcome.result)
        if incomplete:
            print(f"ioobserve: warning: {incomplete}", file=sys.stderr)


def _attach(path: Path):
    from ioobserve.live.attach import AttachedSource, AttachError

    try:
        return AttachedSource(path)
    except AttachError as exc:
        fail(str(exc))


def _replay(paths: list[Path]):
    from ioobserve.live.source import ReplaySource
    from ioobserve.trace.read.reader import TraceError

    for path in paths:
        if not path.is_file():
            fail(f"{path}: no such trace file")
    try:
        return ReplaySource.from_traces(paths)
    except TraceError as exc:
        fail(str(exc))


def _live(pid, cgroup, job, unit, comm, path_prefix, layers, record: Path | None, pod=None, namespace=None):
    """A live source, or one clear error: no privileges, a bad filter, an unusable --record."""
    from ioobserve.cli.prepare import prepare_recording
    from ioobserve.collect.options import RecordingOptions
    from ioobserve.collect.priority import lower_priority
    from ioobserve.collect.traces import StartRecord, open_trace
    from ioobserve.live.source import LiveSource
    from ioobserve.trace.output import OutputError, check_output_dir

    def choose() -> TopChoice:
        filters = build_filters(pid, cgroup, comm, path_prefix, job, unit, pod, namespace)
        available, missing = split_layers(layers)  # top shows what the kernel lacks instead of refusing
        chosen, python_options = build_python(None, None, available)
        return TopChoice(filters, chosen, python_options, directory=check_output_dir(record) if record else None,
                         missing=missing)

    original_nice = lower_priority()  # the compile and the capture run niced
    choice, probes = prepare_recording("recording", choose)
    writer = None
    if choice.directory is not None:
        try:
            writer = open_trace(probes, choice.directory, StartRecord(["ioobserve", "top"], choice.layers, choice.filters))
        except OutputError as exc:
            probes.close()
            fail(str(exc))
    return LiveSource(probes, choice.filters, RecordingOptions(original_nice=original_nice), writer, choice.missing)


@dataclass
class TopChoice(ProbeChoice):
    """What a live `top` was asked for: the probes' choice, where --record writes (None: no
    trace) and the layers this kernel cannot give, shown instead of refused."""

    directory: Path | None = None
    missing: dict[str, str] = field(default_factory=dict)
