"""Kernel-side filters: a pid tree including children born later, a cgroup, a path prefix."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from ioobserve.data import schema as s
from ioobserve.trace.read.reader import load
from tests.conftest import ROOT
from tests.kernel.recorder import Recorder, Workload, json_line
from tests.kernel.scratch_cgroups import scratch_cgroups
from tests.waiting import wait_until

TREE = str(ROOT / "tests" / "workloads" / "tree_workload.py")
WRITE_CALLS = 1000
WRITES = f"""
import json, os, sys
with open(sys.argv[1], "wb", buffering=0) as handle:
    for _ in range({WRITE_CALLS}):
        handle.write(b"x")
print(json.dumps({{"pid": os.getpid()}}))
"""


def _file(tmp_path, name: str) -> str:
    path = tmp_path / name
    path.write_bytes(os.urandom(4096))
    return str(path)


def _record(tmp_path, options: list[str], *commands: list[str], cwds: tuple = ()):
    """Start the workloads, record with `options` (a callable of their pids), release them
    in order; returns the loaded trace and each workload's tree of pids."""
    cwds = cwds or (None,) * len(commands)
    workloads = [Workload([sys.executable, TREE, *command], cwd) for command, cwd in zip(commands, cwds)]
    recorder = Recorder(tmp_path / "trace", *options([w.pid for w in workloads]))
    trees = [json_line(w.go(), "pids")["pids"] for w in workloads]
    code, _, err = recorder.stop()
    assert code == 0, err
    return load(recorder.traces()), trees


def _pids_reading(frame: pl.DataFrame, path: str) -> set[int]:
    return set(frame.filter((pl.col(s.PATH) == path) & (pl.col(s.OP) == "read")).get_column(s.PID).to_list())


@pytest.mark.kernel
def test_pid_tree_includes_later_children_and_nothing_else(root_required, tmp_path):
    mine, other = _file(tmp_path, "mine.bin"), _file(tmp_path, "other.bin")
    frame, (tree, bystander) = _record(tmp_path, lambda pids: ["--pid", str(pids[0])], [mine], [other])
    assert _pids_reading(frame, mine) == set(tree)
    assert frame.filter(pl.col(s.PID).is_in(bystander)).height == 0
    assert set(frame.get_column(s.PID).unique().to_list()) <= set(tree)


@pytest.fixture
def cgroup(root_required):
    with scratch_cgroups() as path:
        yield path


@pytest.mark.kernel
def test_cgroup_filter(cgroup, tmp_path):
    inside, outside = _file(tmp_path, "in.bin"), _file(tmp_path, "out.bin")
    member = [inside, "--cgroup-procs", str(cgroup / "cgroup.procs")]
    frame, (tree, _) = _record(tmp_path, lambda pids: ["--cgroup", str(cgroup)], member, [outside])
    assert _pids_reading(frame, inside) == set(tree)
    assert _pids_reading(frame, outside) == set()
    assert frame.get_column(s.CGROUP).unique().to_list() == [os.stat(cgroup).st_ino]


@pytest.mark.kernel
def test_path_prefix(root_required, tmp_path):
    wanted_dir, other_dir = tmp_path / "wanted", tmp_path / "other"
    wanted_dir.mkdir()
    other_dir.mkdir()
    wanted, other = _file(wanted_dir, "a.bin"), _file(other_dir, "b.bin")
    # absolute path arguments are filtered in the kernel, relative ones once joined to the cwd
    frame, (tree, _, _, relative_tree) = _record(
        tmp_path,
        lambda pids: ["--path-prefix", str(wanted_dir)] + [arg for pid in pids for arg in ("--pid", str(pid))],
        [wanted, "--stat", str(wanted_dir / "missing")],
        [other, "--stat", str(other_dir / "missing")],
        [other, "--stat", "missing-relative"],
        [wanted, "--stat", "missing-relative"],
        cwds=(None, None, other_dir, wanted_dir),
    )
    assert _pids_reading(frame, wanted) == set(tree) | set(relative_tree)
    paths = set(frame.get_column(s.PATH).drop_nulls().to_list())
    assert paths == {wanted, str(wanted_dir / "missing"), str(wanted_dir / "missing-relative")}
    failed_stats = frame.filter(pl.col(s.OP) == "newfstatat")
    assert failed_stats.height == 6 and set(failed_stats.get_column(s.ERRNO).to_list()) == {2}


@pytest.mark.kernel
def test_comm_filter(root_required, tmp_path):
    named, other = _file(tmp_path, "named.bin"), _file(tmp_path, "other.bin")
    frame, (tree, _) = _record(tmp_path, lambda pids: ["--comm", "ioo-test-comm"], [named, "--comm", "ioo-test-comm"], [other])
    assert _pids_reading(frame, named) == set(tree)  # forked children keep the name
    assert _pids_reading(frame, other) == set()


def _descendants(pid: int) -> set[int]:
    """`pid`'s children and theirs, from /proc."""
    found, todo = set(), [pid]
    while todo:
        for task in Path(f"/proc/{todo.pop()}/task").glob("*"):
            children = {int(c) for c in (task / "children").read_text().split()} if (task / "children").exists() else set()
            todo += children - found
            found |= children
    return found


@pytest.mark.kernel
def test_the_recorder_and_its_helper_processes_are_never_traced(root_required, tmp_path):
    """A system-wide recording holds a workload's writes, and nothing of the recorder, its
    capture process, the process writing its trace or its exec gate's keeper: not even the
    trace's own writes."""
    out = tmp_path / "trace"
    recorder = Recorder(out)
    (trace,) = recorder.traces()
    ours = {recorder.proc.pid} | _descendants(recorder.proc.pid)
    assert len(ours) == 4, ours  # the recorder, its capture process, its disk process, its exec gate's keeper
    started = trace.stat().st_size
    writes = subprocess.run([sys.executable, "-c", WRITES, str(tmp_path / "w.bin")], capture_output=True, text=True,
                            check=True, timeout=120)
    wait_until(lambda: trace.stat().st_size > started, "the trace to grow while the probes are attached")
    code, _, err = recorder.stop()
    assert code == 0, err
    frame = load(recorder.traces())
    workload = json_line(writes.stdout, "pid")["pid"]
    assert frame.filter((pl.col(s.PID) == workload) & (pl.col(s.OP) == "write")).height == WRITE_CALLS
    assert frame.filter(pl.col(s.PID).is_in(list(ours))).height == 0
    # only this test looked at the trace (its size, while waiting)
    assert frame.filter(pl.col(s.PATH).cat.starts_with(str(out))).get_column(s.PID).unique().to_list() == [os.getpid()]
