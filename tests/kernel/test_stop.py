"""Stopping a recording: once the probes stop selecting (one config write), no process's
calls reach the rings any more, so the programs can detach while the rings are drained."""

from __future__ import annotations

import os
import sys

import numpy as np

from ioobserve.data import events as ev

STATS = 200
# stat()s of a path nobody else asks for: at least this many stat calls of the child in the ring.
WORKLOAD = [sys.executable, "-c", f"import contextlib, os\nfor _ in range({STATS}):\n"
            "    with contextlib.suppress(OSError):\n        os.stat('/ioobserve-stop-probe')"]


def _run_traced(probes, reader) -> int:
    """Run the workload as a traced child; the stat calls of its pid the ring got."""
    from ioobserve.collect.recording import GatedCommand

    child = GatedCommand(WORKLOAD)
    probes.tables.trace_pid(child.pid)
    child.release()
    assert os.waitpid(child.pid, 0)[1] == 0
    events = reader.read_fixed(ev.EVENT)
    stats = {ev.OP_CODES[name] for name in ("newfstatat", "stat", "statx") if name in ev.OP_CODES}
    return int(np.count_nonzero((events["pid"] == child.pid) & np.isin(events["op"], sorted(stats))))


def test_nothing_is_selected_once_the_recording_stops(root_required):
    from ioobserve.collect.capture import RingReader
    from ioobserve.collect.recording import load_probes
    from ioobserve.context.mappings import file_ident
    from ioobserve.probes.maps.filters import KernelFilters

    probes = load_probes()
    try:
        probes.configure(KernelFilters(filter_pid=True))
        probes.attach()
        reader = RingReader(*probes.tables.ring("events"))
        assert _run_traced(probes, reader) >= STATS  # the interpreter's own stats come on top
        probes.stop_selecting()
        assert _run_traced(probes, reader) == 0
        libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"
        probes.library_mapped(1, libc, file_ident(libc))  # the reader's late calls attach nothing
        assert probes.stopping
        reader.close()
    finally:
        probes.close()
