"""The syscall layer's ways into the kernel (probes/attach/syscall.py) trace the same calls:
the ground-truth DataLoader-like workload, counted exactly by itself, under tp_btf and raw
tracepoints, and under fentry where the kernel allows it (where it refuses, asking for it is
one clear line). The fentry path's own programs (stubs tail-calling the bodies through their
program arrays) run here on sys_enter/sys_exit, as fentry is refused on this kind of VM."""

from __future__ import annotations

import os
import sys

import polars as pl
import pytest

from ioobserve.collect import recording as recording_module
from ioobserve.collect.options import RecordingOptions
from ioobserve.collect.recording import Recording, load_probes
from ioobserve.data import schema as s
from ioobserve.probes import layers as ly
from ioobserve.probes.attach import syscall as syscall_attach
from ioobserve.probes.build.compile import ProbeError, compile_bpf
from ioobserve.probes.maps.filters import KernelFilters
from ioobserve.sinks.base import Sink, Sinks
from ioobserve.trace.read.reader import load, own_records
from tests.kernel.kernel_side import ran
from tests.kernel.loader_counts import ARGS, LOADER, expected_counts, trace_counts
from tests.kernel.recorder import json_line, record_command

pytestmark = pytest.mark.matrix  # also run in each guest of the kernel matrix

DESCRIBED = {"fentry": "fentry/fexit on the", "tp_btf": "tp_btf sys_enter/sys_exit", "raw": "raw tracepoints sys_enter/sys_exit"}
PREADS = 300  # the stand-in test's workload: exactly these pread64 calls of one file


def _fentry_loads() -> bool:
    """Whether this kernel loads a fentry program, asked through bcc (not the code under test)."""
    try:
        compile_bpf(text="KFUNC_PROBE(vfs_read) { return 0; }").cleanup()
    except ProbeError:
        return False
    return True


def _record_loader(side, mechanism: str) -> dict:
    env = {**os.environ, syscall_attach.ENV: mechanism}
    (side.scratch / "work").mkdir()
    done = record_command(side.out / "trace", [sys.executable, LOADER, "--dir", str(side.scratch / "work"), "--start",
                                               "fork", *ARGS], env=env)
    return ran(done) | {"fentry_loads": _fentry_loads() if mechanism == "fentry" else None}


@pytest.mark.kernel
@pytest.mark.parametrize("mechanism", ["tp_btf", "raw"])
def test_each_way_in_traces_every_call_and_byte_of_the_workload(root_required, kernel_side, mechanism):
    recorded = kernel_side(_record_loader, mechanism)
    result = recorded.done()
    assert result.returncode == 0, result.stderr
    assert DESCRIBED[mechanism] in " ".join(result.stdout.split()), result.stdout
    traces = recorded.traces()
    frame = load(traces)
    expected = json_line(result.stdout, "EXPECTED")["EXPECTED"]
    for pid, entry in expected.items():
        assert trace_counts(frame, int(pid)) == expected_counts(entry), f"pid {pid} under {mechanism}"
    (end,) = own_records(traces[0], "end")
    assert end["args"]["lost_total"] == 0


@pytest.mark.kernel
def test_fentry_traces_the_workload_where_allowed_and_is_refused_in_one_line_elsewhere(root_required, kernel_side):
    recorded = kernel_side(_record_loader, "fentry")
    result = recorded.done()
    if recorded["fentry_loads"]:
        assert result.returncode == 0, result.stderr
        frame = load(recorded.traces())
        for pid, entry in json_line(result.stdout, "EXPECTED")["EXPECTED"].items():
            assert trace_counts(frame, int(pid)) == expected_counts(entry), f"pid {pid} under fentry"
    else:
        assert result.returncode != 0
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "fentry refused" in lines[0] and "Traceback" not in result.stderr, result.stderr
        assert not recorded.traces(), "a refused recording leaves no trace"


class _Preads(Sink):
    """A sink counting the pread64 calls of one file, and the probes' runs as it closes."""

    def __init__(self, path: str) -> None:
        self.path, self.calls, self.bytes, self.probes, self.runs = path, 0, 0, None, {}

    def events(self, frame: pl.DataFrame, tables) -> None:
        ids = tables.files.filter(pl.col(s.PATH) == self.path).get_column(s.FILE)  # a batch holds ids, its tables names
        mine = frame.filter((pl.col(s.OP) == "pread64") & pl.col(s.FILE).is_in(ids.implode()))
        self.calls += mine.height
        self.bytes += int(mine.get_column(s.BYTES).sum() or 0)

    def close(self, deadline=None) -> None:
        self.runs = {name: runs for name, (_, runs) in self.probes.run_stats().items()}


def _record_preads_on_the_stand_in(side, monkeypatch) -> dict:
    """The stand-in's recording (in this process) of PREADS preads: what the sink counted."""
    tracepoints = syscall_attach.choose(wanted="tp_btf")
    stand_in = syscall_attach.SyscallEntry("fentry", tracepoints.enter, tracepoints.exit,
                                           (("sys_enter/sys_exit", tracepoints.enter.btf_id, tracepoints.exit.btf_id, 0),))
    monkeypatch.setattr(recording_module, "choose_syscall_entry", lambda btf: stand_in)
    path = side.scratch / "data"
    path.write_bytes(b"x" * 4096)
    sink = _Preads(str(path))
    recording = Recording(load_probes(layers=ly.parse_layers("syscall,python")), KernelFilters(), Sinks([sink]),
                          RecordingOptions(probe_stats=True))
    sink.probes = recording.probes
    workload = f"import os\nfd = os.open({str(path)!r}, os.O_RDONLY)\nfor _ in range({PREADS}):\n    os.pread(fd, 4096, 0)"
    result = recording.run(command=[sys.executable, "-c", workload])
    return {"status": result.command_status, "lost": bool(result.lost), "calls": sink.calls, "bytes": sink.bytes,
            "runs": sink.runs}


@pytest.mark.kernel
def test_the_fentry_stubs_and_bodies_trace_exactly_when_run_on_the_syscall_tracepoints(root_required, kernel_side,
                                                                                         monkeypatch):
    recorded = kernel_side(_record_preads_on_the_stand_in, monkeypatch)
    assert recorded["status"] == 0 and not recorded["lost"]
    assert (recorded["calls"], recorded["bytes"]) == (PREADS, PREADS * 4096)
    # the stubs ran (on every syscall here); the kernel counts a tail-called body's runs in its caller's
    runs = recorded["runs"]
    assert runs["syscall_fentry"] >= PREADS and runs["syscall_fexit"] >= PREADS
