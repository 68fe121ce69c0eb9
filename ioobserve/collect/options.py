"""How a recording runs, beside what it probes and where its batches go (light: the CLI
builds these before anything heavy is imported)."""

from __future__ import annotations

from dataclasses import dataclass

from ioobserve.collect.backlog import BacklogLimits
from ioobserve.plumbing.deadline import DEFAULT_STOP_TIMEOUT_S


@dataclass(frozen=True)
class RecordingOptions:
    """How a recording runs, beside what it probes and where its batches go."""

    original_nice: int | None = None  # the priority the command runs at (the recorder's own is lowered)
    stop_timeout: float = DEFAULT_STOP_TIMEOUT_S  # how long writing out what is left may take
    backlog: BacklogLimits = BacklogLimits()
    probe_stats: bool = False  # the kernel counts the probes' run time while recording
    exec_gate: bool = True  # hold the exec of a program loading a copy not probed yet (exec_gate.py)
