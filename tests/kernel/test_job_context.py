"""Job context from real cgroups: Slurm (v1 and v2 layouts), Kubernetes and systemd paths made
under the cgroup v2 mount, workloads moved into them, every event tagged with its job."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import uuid
from pathlib import Path

import polars as pl
import pytest

from ioobserve.data import schema as s
from ioobserve.trace.read.reader import load
from tests.kernel.kernel_side import as_completed, ran
from tests.kernel.recorder import Recorder
from tests.kernel.scratch_cgroups import scratch_cgroups

pytestmark = pytest.mark.matrix  # also run in each guest of the kernel matrix

POD = "8e1d2c3b-4a5f-6e7d-8c9b-0a1b2c3d4e5f"
CID = "3f4b8c2a9d1e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c"
LAYOUTS = {
    "slurm_v1": ("slurm/uid_0/job_4242/step_0/task_1", {"job": "4242", "step": "0", "task": 1, "pod": None}),
    "slurm_v2": ("system.slice/node1_slurmstepd.scope/job_4343/step_batch/user/task_0",
                 {"job": "4343", "step": "batch", "task": 0, "unit": "node1_slurmstepd.scope"}),
    "kubernetes": ((f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{POD.replace('-', '_')}.slice/"
                    f"cri-containerd-{CID}.scope"), {"pod": POD, "container": CID, "job": None}),
    "systemd": ("system.slice/ioobserve-test-app.service", {"unit": "ioobserve-test-app.service", "job": None, "pod": None}),
}
# Moves itself into a cgroup, then does a known number of writes and reads, and says so.
WORKLOAD = """
import json, os, sys

cgroup, path = sys.argv[1], sys.argv[2]
with open(os.path.join(cgroup, "cgroup.procs"), "w") as procs:
    procs.write(str(os.getpid()))
fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o600)
for _ in range(7):
    os.write(fd, b"x" * 512)
os.lseek(fd, 0, 0)
for _ in range(5):
    os.read(fd, 256)
os.close(fd)
print(json.dumps({"pid": os.getpid(), "writes": 7, "reads": 5}))
"""


def _in_cgroups(record):
    """`record(side, base, made)` run with a private tree under the v2 mount, one cgroup per
    layout (`made`: layout -> its cgroup), removed after; its facts, with the tree's name."""
    @functools.wraps(record)
    def in_cgroups(side, *args) -> dict:
        with scratch_cgroups(*(relative for relative, _ in LAYOUTS.values())) as base:
            made = {name: base / relative for name, (relative, _) in LAYOUTS.items()}
            return record(side, base, made, *args) | {"base": base.name}
    return in_cgroups


def _run_in(cgroup, data) -> dict:
    done = subprocess.run([sys.executable, "-c", WORKLOAD, str(cgroup), str(data)], capture_output=True, text=True,
                          timeout=60, check=True)
    return json.loads(done.stdout)


def _stopped(recorder: Recorder) -> dict:
    code, _, err = recorder.stop()
    return {"code": code, "stderr": err}


@_in_cgroups
def _record_the_tree(side, base, made) -> dict:
    """One recording of the tree (--cgroup) for two tests: a workload in each layout's cgroup,
    then a short-lived container whose cgroups are made after the start and removed as soon as
    its process ends."""
    recorder = Recorder(side.out / "trace", "--cgroup", str(base))
    reports = {name: _run_in(path, side.scratch / f"{name}.bin") for name, path in made.items()}
    pod = str(uuid.uuid4())
    relative = f"kubepods/besteffort/pod{pod}/{CID}"  # kubelet's layout with the cgroupfs driver
    brief = base / relative
    brief.mkdir(parents=True)
    report = _run_in(brief, side.scratch / "brief.bin")
    for directory in (brief, brief.parent, brief.parents[1], brief.parents[2]):  # the runtime cleans up
        directory.rmdir()
    return _stopped(recorder) | {"reports": reports, "scratch": str(side.scratch),
                                 "brief": {"pod": pod, "relative": relative, "report": report}}


@pytest.mark.kernel
def test_every_event_carries_its_cgroups_job_context(root_required, kernel_side):
    recorded = kernel_side(_record_the_tree, share=True)
    assert recorded["code"] == 0, recorded["stderr"]
    reports, scratch = recorded["reports"], Path(recorded["scratch"])
    frame = load(recorded.traces())
    for name, (relative, expected) in LAYOUTS.items():
        mine = frame.filter(pl.col(s.PID) == reports[name]["pid"])
        assert mine.height, f"{name}: no events"
        for column, value in {s.CGROUP_PATH: f"/{recorded['base']}/{relative}", s.USER: "root", **expected}.items():
            assert mine.get_column(column).unique().to_list() == [value], f"{name}: {column}"
        on_file = mine.filter(pl.col(s.PATH) == str(scratch / f"{name}.bin"))
        assert on_file.filter(pl.col(s.OP) == "write").height == reports[name]["writes"]
        assert on_file.filter(pl.col(s.OP) == "read").height == reports[name]["reads"]


@pytest.mark.kernel
def test_a_cgroup_made_and_removed_while_recording_is_still_named(root_required, kernel_side):
    """A short-lived container: its cgroups are made after the start and removed as soon as its
    process ends, before a walk of the tree could find them; the probes' record of each cgroup
    made names it."""
    recorded = kernel_side(_record_the_tree, share=True)
    assert recorded["code"] == 0, recorded["stderr"]
    brief = recorded["brief"]
    mine = load(recorded.traces()).filter(pl.col(s.PID) == brief["report"]["pid"])
    context = {s.CGROUP_PATH: f"/{recorded['base']}/{brief['relative']}", s.POD: brief["pod"], s.CONTAINER: CID}
    for column, value in context.items():
        assert mine.get_column(column).unique().to_list() == [value], column
    on_file = mine.filter(pl.col(s.PATH) == str(Path(recorded["scratch"]) / "brief.bin"))
    assert (on_file.filter(pl.col(s.OP) == "write").height, on_file.filter(pl.col(s.OP) == "read").height) == (7, 5)


@_in_cgroups
def _record_a_job_and_a_later_step(side, base, made) -> dict:
    recorder = Recorder(side.out / "trace", "--job", "4242")
    later = made["slurm_v1"].parent.parent / "step_1" / "task_0"  # job_4242/step_1/task_0, made now
    later.mkdir(parents=True)
    inside = _run_in(later, side.scratch / "later.bin")
    outside = _run_in(made["slurm_v2"], side.scratch / "other.bin")  # job 4343
    return _stopped(recorder) | {"inside": inside, "outside": outside, "data": str(side.scratch / "later.bin")}


@pytest.mark.kernel
def test_job_filter_follows_steps_created_after_the_start(root_required, kernel_side):
    recorded = kernel_side(_record_a_job_and_a_later_step)
    assert recorded["code"] == 0, recorded["stderr"]
    frame = load(recorded.traces())
    assert set(frame.get_column(s.JOB).unique().to_list()) == {"4242"}
    mine = frame.filter(pl.col(s.PID) == recorded["inside"]["pid"])
    assert mine.select(s.STEP, s.TASK).unique().rows() == [("1", 0)]
    assert mine.filter((pl.col(s.PATH) == recorded["data"]) & (pl.col(s.OP) == "write")).height == 7
    assert frame.filter(pl.col(s.PID) == recorded["outside"]["pid"]).height == 0


@_in_cgroups
def _record_a_pod(side, base, made) -> dict:
    recorder = Recorder(side.out / "trace", "--pod", POD)
    later = made["kubernetes"].parent / f"cri-containerd-{'ab' * 32}.scope"  # a container started after the start
    later.mkdir()
    inside = [_run_in(made["kubernetes"], side.scratch / "pod.bin"), _run_in(later, side.scratch / "later.bin")]
    outside = _run_in(made["slurm_v2"], side.scratch / "other.bin")
    return _stopped(recorder) | {"inside": inside, "outside": outside, "scratch": str(side.scratch)}


@pytest.mark.kernel
def test_pod_filter_keeps_one_pods_containers(root_required, kernel_side):
    recorded = kernel_side(_record_a_pod)
    assert recorded["code"] == 0, recorded["stderr"]
    frame = load(recorded.traces())
    assert set(frame.get_column(s.POD).unique().to_list()) == {POD}
    for report, name in zip(recorded["inside"], ("pod.bin", "later.bin")):
        mine = frame.filter((pl.col(s.PID) == report["pid"]) & (pl.col(s.PATH) == str(Path(recorded["scratch"]) / name)))
        assert mine.filter(pl.col(s.OP) == "write").height == 7, name
    assert frame.filter(pl.col(s.PID) == recorded["outside"]["pid"]).height == 0


def _refusals_of_unknown_pods(side) -> dict:
    from tests.kernel.recorder import IOOBSERVE

    runs = []
    for command in (["record", "-o", str(side.out), "--duration", "1"], ["top"]):
        for option in (["--pod", str(uuid.uuid4())], ["--pod", "nowhere/none"], ["--namespace", "nowhere"]):
            done = subprocess.run([IOOBSERVE, *command, *option], capture_output=True, text=True, timeout=60, check=False)
            runs.append({"option": option, "done": ran(done)})
    return {"runs": runs}


@pytest.mark.kernel
def test_unknown_pod_or_namespace_is_refused_in_one_line(root_required, kernel_side):
    recorded = kernel_side(_refusals_of_unknown_pods)
    assert len(recorded["runs"]) == 6
    for run in recorded["runs"]:
        done = as_completed(run["done"])
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith(f"ioobserve: error: {' '.join(run['option'])}: no pod of it runs on this node")
    assert not list(recorded.out.glob("*.pfw.gz"))


def _refusal_of_an_unknown_job(side) -> dict:
    from tests.kernel.recorder import IOOBSERVE

    done = subprocess.run([IOOBSERVE, "record", "-o", str(side.out), "--job", "987654321", "--duration", "1"],
                          capture_output=True, text=True, timeout=60, check=False)
    return ran(done)


@pytest.mark.kernel
def test_unknown_job_is_refused_before_attaching(root_required, kernel_side):
    recorded = kernel_side(_refusal_of_an_unknown_job)
    done = recorded.done()
    assert done.returncode != 0
    assert "--job 987654321: no cgroup of this job" in done.stderr
    assert "Traceback" not in done.stderr and not list(recorded.out.glob("*.pfw.gz"))
