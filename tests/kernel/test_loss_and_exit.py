"""Nothing is dropped silently: a tiny ring under a flood reports its losses exactly; and a
SIGTERM'd recorder flushes, detaches every probe and exits 0."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import polars as pl
import pytest

from ioobserve import schema as s
from ioobserve.trace.index import build_index, read_index
from ioobserve.trace.reader import load, own_records
from tests.conftest import ROOT
from tests.kernel.recorder import Recorder, record_command

FLOOD = str(ROOT / "tests" / "workloads" / "flood.py")
OUR_PROGRAMS = {"on_sys_enter", "on_sys_exit", "on_fork", "on_exec", "on_exit"}


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
    assert lost > 0, "a one-page ring under a flood must overflow"
    assert received + lost == issued
    assert f"{lost:,}" in result.stdout.replace("\n", " ")  # shown on exit too


def _our_programs() -> set[str]:
    listing = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True, check=True)
    return {prog.get("name", "") for prog in json.loads(listing.stdout)} & OUR_PROGRAMS


@pytest.mark.kernel
def test_sigterm_flushes_and_detaches_everything(root_required, tmp_path):
    recorder = Recorder(tmp_path / "trace")
    time.sleep(0.5)
    assert _our_programs() == OUR_PROGRAMS, "probes attached while recording"
    code, out, err = recorder.stop()
    assert code == 0, err
    assert "stopped: SIGTERM" in out
    deadline = time.monotonic() + 10  # the kernel frees detached programs after an RCU grace period
    while _our_programs() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _our_programs() == set(), "no probe of ours remains after SIGTERM"
    (end,) = own_records(recorder.traces()[0], "end")
    assert end["args"]["num_events"] >= 0
    assert read_index(recorder.traces()[0]) == build_index(recorder.traces()[0])[0]  # index written along


@pytest.mark.kernel
def test_sigkill_leaves_a_trace_whose_flushed_members_load(root_required, tmp_path):
    recorder = Recorder(tmp_path / "trace")
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run([sys.executable, str(ROOT / "tests" / "workloads" / "loader.py"), "--dir", str(work),
                    "--files", "8", "--size", "65536", "--report", "text"], check=True, capture_output=True)
    time.sleep(2.5)  # members are flushed at least every second
    recorder.proc.kill()
    recorder.proc.wait()
    frame = load(recorder.traces(), damage=(damage := []))
    samples = frame.filter(pl.col(s.PATH).str.contains("/sample-") & (pl.col(s.OP) == "read"))
    assert samples.height > 0, "the workload's reads were flushed before the kill"
    assert all(d.members_lost == 0 for d in damage)
    deadline = time.monotonic() + 10  # a killed recorder's probes go with its file descriptors
    while _our_programs() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _our_programs() == set()
