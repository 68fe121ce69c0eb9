"""`ioobserve record`: capture file I/O system-wide (or filtered) into a trace."""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import typer

from ioobserve.cli import environment_given
from ioobserve.cli.errors import EXIT_INCOMPLETE, UserError, fail, fail_probes
from ioobserve.cli.filters import (
    CgroupOption,
    CommOption,
    JobOption,
    LayersOption,
    NamespaceOption,
    PidOption,
    PodOption,
    PrefixOption,
    PyDepthOption,
    PyStacksOption,
    UnitOption,
    build_filters,
    build_layers,
    build_python,
)
from ioobserve.cli.prepare import ProbeChoice
from ioobserve.collect.backlog import SPILL_FALLBACK, BacklogLimits, spill_directory
from ioobserve.collect.options import RecordingOptions
from ioobserve.plumbing.deadline import DEFAULT_STOP_TIMEOUT_S
from ioobserve.probes.load.loader import ProbeSizes
from ioobserve.trace.output import check_output_dir

EPILOG = """Examples:

  sudo ioobserve record -o /var/tmp/traces --duration 60        # the whole node for a minute

  sudo ioobserve record -o traces -- python train.py --epochs 2  # one command and all its children

  sudo ioobserve record --pid 4242 --path-prefix /lustre/project  # a running process tree, one file system

  sudo ioobserve record --job 81234 --duration 600               # a Slurm job on this node, steps started later too
  sudo ioobserve record --pod ml/train-0 --duration 600           # a Kubernetes pod (or its UID), containers started later too

  sudo ioobserve record -a -- sleep 30                           # every process, for as long as the command runs

  sudo ioobserve record --layers libc -- ./simulation            # stdio and libc calls too, linked to their syscalls

  sudo ioobserve record --layers hdf5,mpiio -- mpiexec -n 4 ./sim # HDF5 and MPI-IO calls above them

  sudo ioobserve record --py-stacks 10 -- python train.py         # the Python stack of one call in 10

  sudo ioobserve record --precision ns -- ./microbench            # times to the ns, not DFTracer's µs
"""


def record(
    command: Annotated[Optional[list[str]], typer.Argument(help="Command to run and trace with all its descendants (after --).")] = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Directory for the trace (created 0700 if missing).")] = None,
    duration: Annotated[Optional[float], typer.Option("--duration", help="Stop after this many seconds.", min=0.0)] = None,
    pid: PidOption = None,
    cgroup: CgroupOption = None,
    job: JobOption = None,
    unit: UnitOption = None,
    pod: PodOption = None,
    namespace: NamespaceOption = None,
    comm: CommOption = None,
    path_prefix: PrefixOption = None,
    layers: LayersOption = None,
    py_stacks: PyStacksOption = None,
    py_depth: PyDepthOption = None,
    all_processes: Annotated[bool, typer.Option("--all", "-a", help="Trace every process even when a command is given (the command only bounds the recording).")] = False,
    rotate_mb: Annotated[Optional[float], typer.Option("--rotate-mb", help="Start a new trace file (-1, -2, ...) after this many MB on disk.")] = None,
    rotate_s: Annotated[Optional[float], typer.Option("--rotate-s", help="Start a new trace file after this many seconds.")] = None,
    ring_pages: Annotated[int, typer.Option("--ring-pages", help="Event ring buffer size in pages (a power of two; 4096 = 16 MiB).")] = 4096,
    backlog_mb: Annotated[Optional[float], typer.Option("--backlog-mb", help="MB of events a burst may queue while the recorder is behind (default 1024, ~8 M events); beyond it the kernel drops new ones and counts them as lost.")] = None,
    backlog_memory_mb: Annotated[Optional[float], typer.Option("--backlog-memory-mb", help="Of the backlog, MB held in memory (default 64); the rest waits in an unlinked file on a local disk, the output directory's or else /var/tmp's (page cache, written back under memory pressure; none on NFS, FUSE or tmpfs: then all in memory). At least --backlog-mb: all in memory.")] = None,
    writer_threads: Annotated[Optional[int], typer.Option("--writer-threads", min=1, help="Most threads formatting and compressing the trace (default: the cores but one, at most 4); one does the work until the event rate needs more.")] = None,
    precision: Annotated[str, typer.Option("--precision", help="Time resolution written: us (DFTracer's, the default) or ns (adds the sub-µs remainders; parent links are exact either way).")] = "us",
    compact: Annotated[bool, typer.Option("--compact/--no-compact", help="Once each trace file is closed, write its Parquet copy for fast reading (and recompress what was written in a hurry, while the writer was behind), in the background at the lowest priority.")] = True,
    probe_stats: Annotated[bool, typer.Option("--probe-stats", help="Have the kernel count the probes' own run time while recording (its BPF stats, a few tens of ns per probe run), for the summary's cost line.")] = False,
    flood_limit: Annotated[Optional[int], typer.Option("--flood-limit", min=0, help="Events a second one cgroup may send; past it the kernel counts them instead, and the trace marks the throttle's start and end with the count (0: no limit). Default 200000 when every process is traced (--all, or no command), none for a command's own processes.")] = None,
    exec_gate: Annotated[bool, typer.Option("--exec-gate/--no-exec-gate", help="Hold the exec of a program that loads a library or Python copy no probe covers yet (a new container root's libc or python) until its probes are on, at most 0.2 s, so a short job's first calls are seen; invisible to the job (fanotify, not a signal). --no-exec-gate: such a copy is probed when first mapped, tens of ms late.")] = True,
    stop_timeout: Annotated[float, typer.Option("--stop-timeout", help="Seconds a stop may spend writing out what is queued; the rest is counted as lost (a second Ctrl-C: at once).", min=0.0)] = DEFAULT_STOP_TIMEOUT_S,
) -> None:
    """Record the file I/O of every process (or of the ones the filters select) into a trace.

    Stops at --duration, when the command ends, or on Ctrl-C / SIGTERM; then prints a summary.
    A full or failing disk never stops the command: events that cannot be written are counted
    as lost, writing resumes in a new file when the disk has room again, and `record` exits
    with the command's status (without a command: 3, the trace is incomplete).
    """
    # The recorder runs niced (ioobserve/collect/priority.py) with Polars' pool capped
    # (ioobserve/cli/__init__.py). The traced command gets the environment and priority we
    # were given, untouched. Deferred imports keep `--help` fast and free of polars and bcc.
    from ioobserve.cli.prepare import prepare_recording
    from ioobserve.collect.priority import lower_priority
    from ioobserve.collect.recording import Recording, install_stop_signals
    from ioobserve.plumbing.memory import keep_freed_buffers
    from ioobserve.probes.load.loader import ProbeError
    from ioobserve.sinks.background import BackgroundSink
    from ioobserve.sinks.base import Sinks
    from ioobserve.sinks.summary import SummarySink

    command_env = environment_given()
    original_nice = lower_priority()
    keep_freed_buffers(keep_bytes=64 << 20)  # each batch's lines and members: reused, not faulted in again

    def choose() -> RecordChoice:
        _check_sizes(rotate_mb, rotate_s, ring_pages, precision)
        if command and shutil.which(command[0]) is None:
            raise UserError(f"command not found: {command[0]}")
        filters = build_filters(pid, cgroup, comm, path_prefix, job, unit, pod, namespace)
        filters.flood_limit = default_flood_limit(flood_limit, every_process=all_processes or not command)
        chosen, python = build_python(py_stacks, py_depth, build_layers(layers))
        directory = check_output_dir(output or Path.cwd())
        options = RecordingOptions(original_nice, stop_timeout, backlog_limits(backlog_mb, backlog_memory_mb, directory),
                                   probe_stats, exec_gate)
        return RecordChoice(filters, chosen, python, ProbeSizes(events_pages=ring_pages), directory, options)

    choice, probes = prepare_recording("recording", choose)
    writer = _open_writer(probes, choice, command or [], rotate_mb, rotate_s, precision, compact, writer_threads)
    summary = SummarySink()
    recording = Recording(probes, choice.filters, Sinks([writer, BackgroundSink(summary, "ioobserve-summary")]),
                          choice.options)  # the summary's group-bys off the worker's path
    install_stop_signals(recording)
    try:
        result = recording.run(duration=duration, command=command, command_env=command_env,
                               trace_command=not all_processes, on_start=lambda: print(
            f"ioobserve: recording to {writer.path} (Ctrl-C to stop)", file=sys.stderr, flush=True))
    except ProbeError as exc:  # attaching failed: nothing was recorded, so nothing is left behind
        writer.discard()
        fail_probes(exc)
    _report(summary.summary, result, writer, command)


@dataclass
class RecordChoice(ProbeChoice):
    """What `record` was asked for, checked: the probes' choice, where the trace goes and how
    the recording runs."""

    directory: Path = Path(".")
    options: RecordingOptions = RecordingOptions()


def _check_sizes(rotate_mb: float | None, rotate_s: float | None, ring_pages: int, precision: str) -> None:
    """UserError for a rotation, ring size or precision that cannot be."""
    from ioobserve.trace.lines import PRECISIONS

    for flag, value in (("--rotate-mb", rotate_mb), ("--rotate-s", rotate_s)):
        if value is not None and value <= 0:
            raise UserError(f"{flag} {value:g}: must be more than 0")
    if ring_pages < 1 or ring_pages & (ring_pages - 1):
        raise UserError(f"--ring-pages {ring_pages}: must be a power of two (e.g. 1024, 4096)")
    if precision not in PRECISIONS:
        raise UserError(f"--precision {precision}: must be one of {', '.join(PRECISIONS)}")


def default_flood_limit(given: int | None, every_process: bool) -> int:
    """--flood-limit, or its default: a limit where every process is traced, none for a
    command's own processes (its floods are what the user asked to see)."""
    from ioobserve.probes.maps.filters import DEFAULT_FLOOD_LIMIT

    if given is not None:
        return given
    return DEFAULT_FLOOD_LIMIT if every_process else 0


def _open_writer(probes, choice: RecordChoice, command: list[str], rotate_mb: float | None, rotate_s: float | None,
                 precision: str, compact: bool, writer_threads: int | None):
    """The recording's trace writer; each part closed whole gets its Parquet copy in the
    background (with --compact), by a finisher the probes leave out."""
    from ioobserve.cli.prepare import warn
    from ioobserve.collect.traces import StartRecord, open_trace
    from ioobserve.probes import layers as ly
    from ioobserve.trace.output import OutputError
    from ioobserve.trace.write.finish import finish_later

    def finish_in_background(path: Path, hurried: bool) -> None:
        finisher = finish_later(path, recompress=hurried)
        if finisher is not None:
            probes.tables.exclude_helper(finisher)  # its reading and writing of traces is ours, not the node's

    python = choice.python
    start = StartRecord(command, choice.layers, choice.filters, python_stacks={
        "depth": python.depth, "sample": python.sample, "inside_imports": python.walk_imports}
        if ly.PYTHON in choice.layers else None)
    try:
        return open_trace(probes, choice.directory, start, rotate_bytes=int(rotate_mb * 1e6) if rotate_mb else None,
                          rotate_seconds=rotate_s, precision=precision, on_trouble=warn,
                          on_closed=finish_in_background if compact else None,
                          **({"writer_threads": writer_threads} if writer_threads else {}))
    except OutputError as exc:
        probes.close()
        fail(str(exc))


def _report(summary, result, writer, command: list[str] | None) -> None:
    """The summary and what the trace misses; exits with the command's status, or 3 for a
    recording without a command whose trace is incomplete."""
    from ioobserve.cli.prepare import warn
    from ioobserve.cli.summary_view import incomplete_line, print_summary

    print_summary(summary, result, writer.paths, unwritten=result.dropped_at_stop + writer.unwritten)
    incomplete = incomplete_line(writer, result)
    if incomplete:
        warn(incomplete)
    if command and result.command_status not in (None, 0):
        raise typer.Exit(result.command_status if result.command_status > 0 else 128 - result.command_status)
    if not command and incomplete:
        raise typer.Exit(EXIT_INCOMPLETE)


def backlog_limits(total_mb: float | None, memory_mb: float | None, directory: Path) -> BacklogLimits:
    """The capture process's backlog from the options: what is beyond the memory part waits
    in an unlinked file on a local disk (the output directory's, else /var/tmp's), or in
    memory too where there is none."""
    for flag, value in (("--backlog-mb", total_mb), ("--backlog-memory-mb", memory_mb)):
        if value is not None and value < 1:
            raise UserError(f"{flag} {value:g}: must be at least 1")
    default = BacklogLimits()
    total = int(total_mb * (1 << 20)) if total_mb is not None else default.total_bytes
    memory = int(memory_mb * (1 << 20)) if memory_mb is not None else default.memory_bytes
    spill = spill_directory([str(directory), SPILL_FALLBACK]) if memory < total else None
    return BacklogLimits(total, memory if spill else total, spill)
