"""Nothing is dropped silently: a tiny ring under a flood reports its losses exactly; and a
SIGTERM'd recorder flushes, detaches every probe and exits 0."""

from __future__ import annotations

import subprocess
import sys

import polars as pl
import pytest

from ioobserve.data import schema as s
from ioobserve.trace.members import build_index, read_index
from ioobserve.trace.read.columnar import valid_copy
from ioobserve.trace.read.reader import load, own_records
from tests.conftest import ROOT
from tests.kernel import programs
from tests.kernel.recorder import Recorder, json_line, record_command, wait_finished
from tests.waiting import wait_until

FLOOD = str(ROOT / "tests" / "workloads" / "flood.py")
LOADER = str(ROOT / "tests" / "workloads" / "loader.py")
OUR_PROGRAMS = {"on_sys_enter", "on_sys_exit", "on_fork", "on_exec", "on_exit"}
WRITES = 50
# Written while recording, just before the SIGTERM: still queued when it comes.
WRITER = f"""
import os, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
for _ in range({WRITES}):
    os.write(fd, b"x" * 100)
os.close(fd)
print(os.getpid())
"""


@pytest.mark.kernel
def test_tiny_ring_counts_every_lost_event(root_required, tmp_path):
    issued = 200_000
    result = record_command(tmp_path / "trace", [sys.executable, FLOOD, str(issued), str(tmp_path / "f")], "--ring-pages", "1")
    assert result.returncode == 0, result.stderr
    traces = sorted((tmp_path / "trace").glob("*.pfw.gz"))
    # glibc's preadv() enters the kernel as preadv or preadv2 depending on its version
    received = load(traces).filter(pl.col(s.OP).is_in(["preadv", "preadv2"])).height
    (end,) = own_records(traces[0], "end")
    lost = end["args"]["lost"].get("preadv", 0) + end["args"]["lost"].get("preadv2", 0)
    # how many the ring drops depends on scheduling; that it drops some, and how many it got, do not
    assert 0 < lost < issued, "a one-page ring under a flood must overflow"
    assert received + lost == issued
    assert f"{lost:,}" in result.stdout.replace("\n", " ")  # shown on exit too


def _attached(recorder: Recorder) -> set[int]:
    """The ids of the recorder's BPF programs, once it holds all of ours."""
    def held() -> set[int]:
        ids, names = programs.held_by(recorder.proc.pid), programs.loaded()
        return ids if OUR_PROGRAMS <= {names.get(i) for i in ids} else set()

    return wait_until(held, f"the recorder (pid {recorder.proc.pid}) holds its programs {sorted(OUR_PROGRAMS)}")


def _wait_unloaded(ids: set[int], why: str) -> None:
    """The kernel frees detached programs after an RCU grace period."""
    wait_until(lambda: not ids & programs.loaded().keys(), f"the recorder's BPF programs {sorted(ids)} unloaded {why}")


@pytest.mark.kernel
def test_sigterm_flushes_and_detaches_everything(root_required, tmp_path):
    recorder = Recorder(tmp_path / "trace")
    ids = _attached(recorder)
    data = tmp_path / "data.bin"
    pid = int(subprocess.run([sys.executable, "-c", WRITER, str(data)], capture_output=True, text=True, check=True).stdout)
    code, out, err = recorder.stop()
    assert code == 0, err
    assert "stopped: SIGTERM" in out
    _wait_unloaded(ids, "after SIGTERM")
    (trace,) = recorder.traces()
    (end,) = own_records(trace, "end")
    frame = load([trace])
    writes = frame.filter((pl.col(s.PID) == pid) & (pl.col(s.OP) == "write") & (pl.col(s.PATH) == str(data)))
    assert writes.height == WRITES, "every call before the SIGTERM is in the trace"
    assert end["args"]["num_events"] == end["args"]["recording_events"] == frame.height  # the end record counts them all
    assert read_index(trace) == build_index(trace)[0]  # index written along
    wait_finished(recorder.out_dir)  # then recompressed, and copied for reading, in the background
    assert read_index(trace) == build_index(trace)[0]
    assert valid_copy(trace) is not None and load([trace]).equals(frame)


@pytest.mark.kernel
def test_sigkill_leaves_a_trace_whose_flushed_members_load(root_required, tmp_path):
    recorder = Recorder(tmp_path / "trace")
    ids = _attached(recorder)
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run([sys.executable, LOADER, "--dir", str(work), "--files", "8", "--size", "65536"], check=True,
                          capture_output=True, text=True)
    expected = {int(pid): entry["counts"]["read"] for pid, entry in json_line(done.stdout, "EXPECTED")["EXPECTED"].items()
                if entry["counts"]["read"]}

    def reads(damage: list | None = None) -> dict[int, int]:
        frame = load(recorder.traces(), path_prefix=str(work), damage=damage if damage is not None else [])
        return dict(frame.filter(pl.col(s.OP) == "read").group_by(s.PID).len().iter_rows())

    # members are flushed at least every second
    wait_until(lambda: reads() == expected, lambda: f"the workload's reads {expected} on disk (found {reads()})")
    recorder.proc.kill()
    recorder.proc.wait()
    assert reads(damage := []) == expected, "the flushed members load after the kill"
    assert all(d.members_lost == 0 for d in damage)
    _wait_unloaded(ids, "after SIGKILL (they go with its file descriptors)")
