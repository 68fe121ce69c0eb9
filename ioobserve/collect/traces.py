"""A trace added to a recording, the one way record, top and serve do it: its writer named
for the node and given the node's mounts, its helper's own writes kept out of what the probes
see, and its start record, whose keys are declared here once."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ioobserve import __version__
from ioobserve.context.mounts import node_mounts
from ioobserve.plumbing.host import node_name
from ioobserve.probes.maps.filters import KernelFilters
from ioobserve.trace.output import trace_name
from ioobserve.trace.write.writer import TraceWriter


@dataclass(frozen=True)
class StartRecord:
    """What a trace's start record says of the recording that made it (the writer adds the
    part, the precision and the time)."""

    command: list[str]  # the recorded command, or the recorder's own (["ioobserve", "top"])
    layers: frozenset[str] | set[str] = frozenset()
    filters: KernelFilters | None = None
    job: str | None = None  # serve: the Slurm job the trace is of
    python_stacks: dict | None = None  # the Python layer's depth, sampling and whether calls inside imports are walked

    def fields(self) -> dict:
        """The record's keys and values, those not given left out."""
        record = {"host": node_name(), "kernel": os.uname().release, "ioobserve": __version__,
                  "command": list(self.command), "recorder_pid": os.getpid(), "layers": sorted(self.layers)}
        if self.filters is not None:
            record["filters"] = {"pid": sorted(self.filters.pids), "cgroup_ids": sorted(self.filters.cgroup_ids),
                                 "comm": sorted(self.filters.comms), "path_prefix": self.filters.prefixes}
        if self.job is not None:
            record["job"] = self.job
        if self.python_stacks is not None:
            record["python_stacks"] = self.python_stacks
        return record


def open_trace(probes, directory: Path, start: StartRecord, **options) -> TraceWriter:
    """A new trace in `directory` for a recording by `probes` (loader.Probes), its
    writer's disk process excluded from them: its writes are the recorder's, not the node's.
    `options`: TraceWriter's (rotation, precision, callbacks). Raises OutputError for a
    directory that is not safe to write and OSError for one that fails."""
    writer = TraceWriter(directory, trace_name(), start.fields(), mounts=node_mounts(), **options)
    probes.tables.exclude_helper(writer.disk_pid)
    return writer
