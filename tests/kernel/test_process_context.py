"""Process context from real launches: ranks from the environment a launcher sets, worker
ordinals of a spawn pool, tags written mid-run, and a process that lives under 5 ms."""

from __future__ import annotations

import json
import os
import sys

import polars as pl
import pytest

from ioobserve.data import schema as s
from ioobserve.trace.read.export import tags_text
from ioobserve.trace.read.reader import load, own_records
from tests.conftest import ROOT
from tests.kernel.recorder import Recorder, Workload, json_line, record_command

WORKLOAD = ROOT / "tests" / "workloads" / "launch_workload.py"


@pytest.fixture(scope="module")
def launched(root_required, tmp_path_factory):
    """(reports of the two ranks, events on the data file, the trace's end record)."""
    tmp = tmp_path_factory.mktemp("launch")
    data = tmp / "data.bin"
    data.write_bytes(b"x" * 8192)
    done = record_command(tmp / "trace", [sys.executable, str(WORKLOAD), "launcher", str(data)])
    assert done.returncode == 0, done.stderr
    reports = [json.loads(line) for line in done.stdout.splitlines() if line.startswith('{"rank_pid"')]
    assert len(reports) == 2, done.stdout
    traces = sorted((tmp / "trace").glob("*.pfw.gz"))
    frame = load(traces).with_columns(tags_text().alias("tag_text"))
    return reports, frame, frame.filter(pl.col(s.PATH) == str(data)), own_records(traces[-1], "end")[-1]


def _opens(events: pl.DataFrame, pid: int) -> pl.DataFrame:
    return events.filter((pl.col(s.PID) == pid) & (pl.col(s.OP) == "openat")).sort(s.TS)


@pytest.mark.kernel
def test_ranks_come_from_the_launchers_environment(launched):
    reports, _, on_data, _ = launched
    for report in reports:
        mine = on_data.filter(pl.col(s.PID) == report["rank_pid"])  # after its exec: before, it was the launcher's
        # RANK (torchrun's) wins over SLURM_PROCID (srun's, 0 for both); the job is SLURM_JOB_ID.
        assert mine.select(s.RANK, s.LOCAL_RANK, s.WORLD_SIZE, s.JOB, s.WORKER).unique().rows() == [
            (report["rank"], report["rank"] - 10, 16, "777", None)
        ]


@pytest.mark.kernel
def test_a_spawn_pool_gets_ordinals_in_spawn_order(launched):
    reports, frame, on_data, _ = launched
    numbered = set()
    for report in reports:
        for ordinal, pid in enumerate(report["workers"]):
            mine = on_data.filter(pl.col(s.PID) == pid)  # numbered from its exec (before: closing fds)
            assert mine.select(s.RANK, s.WORKER).unique().rows() == [(report["rank"], ordinal)], f"worker {pid}"
            assert _opens(on_data, pid).height == ordinal + 1  # worker k read the file k+1 times
            numbered.add(pid)
        child = on_data.filter(pl.col(s.PID) == report["fork_child"])
        # Forked after the pool's workers exited: the next epoch's first worker.
        assert child.select(s.RANK, s.WORKER).unique().rows() == [(report["rank"], 0)]
        numbered.add(report["fork_child"])
    # The resource tracker and `cat` are children too, but not workers.
    assert set(frame.filter(pl.col(s.WORKER).is_not_null()).get_column(s.PID).unique().to_list()) == numbered


@pytest.mark.kernel
def test_tags_switch_later_events_only_and_children_inherit_them(launched):
    reports, _, on_data, end = launched
    for report in reports:
        opens = _opens(on_data, report["rank_pid"]).get_column("tag_text").to_list()
        assert opens == ["epoch=0"] * 3 + ["epoch=1,phase=train"] * 2
        for pid in report["workers"]:  # spawned after epoch=0
            assert set(_opens(on_data, pid).get_column("tag_text").to_list()) == {"epoch=0"}
        assert _opens(on_data, report["fork_child"]).get_column("tag_text").to_list() == ["epoch=1,phase=train"]
    counters = end["args"]["counters"]
    assert (counters["tags_applied"], counters["tags_malformed"]) == (4, 2)  # "not a tag" from each rank


@pytest.mark.kernel
def test_a_process_living_under_5_ms_still_gets_its_job(launched):
    reports, _, on_data, _ = launched
    for report in reports:
        assert report["cat_alive_s"] < 0.005, "the workload found no run of cat under 5 ms"
        mine = on_data.filter(pl.col(s.PID) == report["cat"])
        assert mine.height and mine.get_column(s.COMM).unique().to_list() == ["cat"]
        assert mine.select(s.JOB, s.RANK, s.WORKER).unique().rows() == [("777", report["rank"], None)]


@pytest.mark.kernel
def test_a_rank_already_running_when_recording_starts(root_required, tmp_path):
    data = tmp_path / "data.bin"
    data.write_bytes(b"x" * 4096)
    tree = ROOT / "tests" / "workloads" / "tree_workload.py"
    workload = Workload([sys.executable, str(tree), str(data)], env={**os.environ, "RANK": "7", "LOCAL_RANK": "1"})
    recorder = Recorder(tmp_path / "trace", "--pid", str(workload.pid))
    pids = json_line(workload.go(), "pids")["pids"]  # itself, a forked child, the child's child
    code, _, err = recorder.stop()
    assert code == 0, err
    on_data = load(recorder.traces()).filter(pl.col(s.PATH) == str(data))
    found = {pid: on_data.filter(pl.col(s.PID) == pid).select(s.RANK, s.LOCAL_RANK, s.WORKER).unique().rows() for pid in pids}
    # Read from /proc at the start; its fork is its first worker, whose own child works for it.
    assert found == {pids[0]: [(7, 1, None)], pids[1]: [(7, 1, 0)], pids[2]: [(7, 1, 0)]}
