"""Every layer's events leave the kernel by one gate (the way out, at the end of
ebpf_probes/core.bpf.c): with `serve`'s aggregation compiled in and the gate shut, a workload
touching every layer puts no event in the ring while the kernel's aggregates count each
layer's; with the gate open, the events received and the aggregates count the same events."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from ioobserve.collect.options import RecordingOptions
from ioobserve.collect.recording import Recording, load_probes
from ioobserve.data import events as ev
from ioobserve.data import schema as s
from ioobserve.data.operations import layer_of
from ioobserve.probes import layers as ly
from ioobserve.probes.load.loader import ProbeSizes
from ioobserve.probes.maps.filters import KernelFilters
from ioobserve.sinks.base import Sink, Sinks

SIZE = 1 << 20
# Evicts FILE from the page cache and reads it whole (syscalls, through libc's read: a block
# request and page cache misses), after importing a module not loaded yet (the Python layer).
WORKLOAD = """
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
import fractions
while os.read(fd, 1 << 16):
    pass
os.close(fd)
"""
# The layers whose events the workload makes, where attached (the VFS where the kernel has kprobes).
EXPECTED = {s.LAYER_SYSCALL, s.LAYER_BLOCK, s.LAYER_CACHE, s.LAYER_POSIX, s.LAYER_PYTHON, s.LAYER_VFS}


class _Kept(Sink):
    """A sink keeping each event's layer, and the kernel's aggregates as they stand when it
    closes (the probes' maps are still open then)."""

    def __init__(self) -> None:
        self.batches: list[pl.DataFrame] = []
        self.probes = None
        self.aggregates: np.ndarray | None = None

    def events(self, frame: pl.DataFrame, tables) -> None:
        self.batches.append(frame.select(pl.col(s.LAYER, s.OP).cast(pl.String)))

    def close(self, deadline=None) -> None:
        self.aggregates, _ = self.probes.tables.aggregates()

    def event_layers(self) -> dict[str, int]:
        """Kernel events received per layer (not the Python calls user space makes of their stacks)."""
        kernel_ops = pl.DataFrame([(layer_of(code), label) for code, label in enumerate(ev.OP_LABELS)],
                                  schema=[s.LAYER, s.OP], orient="row")
        received = pl.concat(self.batches).join(kernel_ops, on=[s.LAYER, s.OP], how="semi") if self.batches else kernel_ops.clear()
        return dict(received.get_column(s.LAYER).value_counts().iter_rows())

    def aggregated_layers(self) -> dict[str, int]:
        """Events the kernel aggregated per layer (the second record of a two-file call included)."""
        counts: dict[str, int] = {}
        for op, calls in zip(self.aggregates["key"]["op"], self.aggregates["value"]["calls"]):
            counts[layer_of(int(op))] = counts.get(layer_of(int(op)), 0) + int(calls)
        return counts


@pytest.fixture
def cold_file(root_required, tmp_path):
    path = Path("/var/tmp") / f"ioobserve-gate-{os.getpid()}-{tmp_path.name}.bin"  # on a disk (/tmp may be tmpfs)
    path.write_bytes(os.urandom(SIZE))
    os.sync()  # its pages clean, so the workload can evict them
    yield path
    path.unlink()


def _record(cold_file: Path, gate_open: bool) -> tuple[_Kept, dict[str, str]]:
    from ioobserve.probes.capabilities import vfs_available

    sink = _Kept()
    layers = ly.parse_layers("all" if vfs_available()[0] else "all,no-vfs")  # every layer this kernel gives
    recording = Recording(load_probes(ProbeSizes(aggregate_entries=4096), layers=layers), KernelFilters(), Sinks([sink]),
                          RecordingOptions(stop_timeout=300))
    sink.probes = recording.probes
    on_start = (lambda: recording.probes.tables.emit_some(False)) if gate_open else None
    result = recording.run(command=[sys.executable, "-c", WORKLOAD, str(cold_file)], on_start=on_start)
    assert result.command_status == 0 and not result.lost, json.dumps(result.lost)
    layers = {layer.upper(): how for layer, how in result.layers.items() if not how.startswith("unavailable")}
    return sink, layers


@pytest.mark.kernel
def test_with_the_gate_shut_no_layer_emits_and_every_layer_is_aggregated(cold_file):
    sink, attached = _record(cold_file, gate_open=False)
    expected = _attached_trace_layers(attached)
    assert sink.event_layers() == {}, "events left the kernel through a shut gate"
    aggregated = sink.aggregated_layers()
    assert expected <= aggregated.keys(), f"layers aggregated: {aggregated}; attached: {attached}"


@pytest.mark.kernel
def test_with_the_gate_open_the_events_are_the_aggregated_ones(cold_file):
    sink, attached = _record(cold_file, gate_open=True)
    expected = _attached_trace_layers(attached)
    received = sink.event_layers()
    assert expected <= received.keys(), f"layers received: {received}; attached: {attached}"
    assert received == sink.aggregated_layers()


def _attached_trace_layers(attached: dict[str, str]) -> set[str]:
    """The trace layers (schema.LAYER_*) of the --layers attached that the workload reaches."""
    trace = {"SYSCALL": {s.LAYER_SYSCALL}, "BLOCK": {s.LAYER_BLOCK}, "CACHE": {s.LAYER_CACHE},
             "LIBC": {s.LAYER_POSIX}, "PYTHON": {s.LAYER_PYTHON}, "VFS": {s.LAYER_VFS}}
    return {layer for name in attached for layer in trace.get(name, ())} & EXPECTED
