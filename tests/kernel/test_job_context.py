"""Job context from real cgroups: Slurm (v1 and v2 layouts), Kubernetes and systemd paths made
under the cgroup v2 mount, workloads moved into them, every event tagged with its job."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import polars as pl
import pytest

from ioobserve import schema as s
from ioobserve.trace.reader import load
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


@pytest.fixture
def cgroups(root_required):
    """A private tree under the v2 mount with one cgroup per layout."""
    with scratch_cgroups(*(relative for relative, _ in LAYOUTS.values())) as base:
        yield base, {name: base / relative for name, (relative, _) in LAYOUTS.items()}


def _run_in(cgroup, data) -> dict:
    done = subprocess.run([sys.executable, "-c", WORKLOAD, str(cgroup), str(data)], capture_output=True, text=True,
                          timeout=60, check=True)
    return json.loads(done.stdout)


@pytest.mark.kernel
def test_every_event_carries_its_cgroups_job_context(cgroups, tmp_path):
    base, made = cgroups
    recorder = Recorder(tmp_path / "trace", "--cgroup", str(base))
    reports = {name: _run_in(path, tmp_path / f"{name}.bin") for name, path in made.items()}
    code, _, err = recorder.stop()
    assert code == 0, err
    frame = load(recorder.traces())
    for name, (relative, expected) in LAYOUTS.items():
        mine = frame.filter(pl.col(s.PID) == reports[name]["pid"])
        assert mine.height, f"{name}: no events"
        for column, value in {s.CGROUP_PATH: f"/{base.name}/{relative}", s.USER: "root", **expected}.items():
            assert mine.get_column(column).unique().to_list() == [value], f"{name}: {column}"
        on_file = mine.filter(pl.col(s.PATH) == str(tmp_path / f"{name}.bin"))
        assert on_file.filter(pl.col(s.OP) == "write").height == reports[name]["writes"]
        assert on_file.filter(pl.col(s.OP) == "read").height == reports[name]["reads"]


@pytest.mark.kernel
def test_a_cgroup_made_and_removed_while_recording_is_still_named(cgroups, tmp_path):
    """A short-lived container: its cgroups are made after the start and removed as soon as its
    process ends, before a walk of the tree could find them; the probes' record of each cgroup
    made names it."""
    base, _ = cgroups
    recorder = Recorder(tmp_path / "trace", "--cgroup", str(base))
    pod = str(uuid.uuid4())
    relative = f"kubepods/besteffort/pod{pod}/{CID}"  # kubelet's layout with the cgroupfs driver
    brief = base / relative
    brief.mkdir(parents=True)
    report = _run_in(brief, tmp_path / "brief.bin")
    for directory in (brief, brief.parent, brief.parents[1], brief.parents[2]):  # the runtime cleans up
        directory.rmdir()
    code, _, err = recorder.stop()
    assert code == 0, err
    mine = load(recorder.traces()).filter(pl.col(s.PID) == report["pid"])
    context = {s.CGROUP_PATH: f"/{base.name}/{relative}", s.POD: pod, s.CONTAINER: CID}
    for column, value in context.items():
        assert mine.get_column(column).unique().to_list() == [value], column
    on_file = mine.filter(pl.col(s.PATH) == str(tmp_path / "brief.bin"))
    assert (on_file.filter(pl.col(s.OP) == "write").height, on_file.filter(pl.col(s.OP) == "read").height) == (7, 5)


@pytest.mark.kernel
def test_job_filter_follows_steps_created_after_the_start(cgroups, tmp_path):
    _, made = cgroups
    recorder = Recorder(tmp_path / "trace", "--job", "4242")
    later = made["slurm_v1"].parent.parent / "step_1" / "task_0"  # job_4242/step_1/task_0, made now
    later.mkdir(parents=True)
    inside = _run_in(later, tmp_path / "later.bin")
    outside = _run_in(made["slurm_v2"], tmp_path / "other.bin")  # job 4343
    code, _, err = recorder.stop()
    assert code == 0, err
    frame = load(recorder.traces())
    assert set(frame.get_column(s.JOB).unique().to_list()) == {"4242"}
    mine = frame.filter(pl.col(s.PID) == inside["pid"])
    assert mine.select(s.STEP, s.TASK).unique().rows() == [("1", 0)]
    assert mine.filter((pl.col(s.PATH) == str(tmp_path / "later.bin")) & (pl.col(s.OP) == "write")).height == 7
    assert frame.filter(pl.col(s.PID) == outside["pid"]).height == 0


@pytest.mark.kernel
def test_pod_filter_keeps_one_pods_containers(cgroups, tmp_path):
    _, made = cgroups
    recorder = Recorder(tmp_path / "trace", "--pod", POD)
    later = made["kubernetes"].parent / f"cri-containerd-{'ab' * 32}.scope"  # a container started after the start
    later.mkdir()
    inside = [_run_in(made["kubernetes"], tmp_path / "pod.bin"), _run_in(later, tmp_path / "later.bin")]
    outside = _run_in(made["slurm_v2"], tmp_path / "other.bin")
    code, _, err = recorder.stop()
    assert code == 0, err
    frame = load(recorder.traces())
    assert set(frame.get_column(s.POD).unique().to_list()) == {POD}
    for report, name in zip(inside, ("pod.bin", "later.bin")):
        mine = frame.filter((pl.col(s.PID) == report["pid"]) & (pl.col(s.PATH) == str(tmp_path / name)))
        assert mine.filter(pl.col(s.OP) == "write").height == 7, name
    assert frame.filter(pl.col(s.PID) == outside["pid"]).height == 0


@pytest.mark.kernel
def test_unknown_pod_or_namespace_is_refused_in_one_line(root_required, tmp_path):
    from tests.kernel.recorder import IOOBSERVE

    for command in (["record", "-o", str(tmp_path), "--duration", "1"], ["top"]):
        for option in (["--pod", str(uuid.uuid4())], ["--pod", "nowhere/none"], ["--namespace", "nowhere"]):
            done = subprocess.run([IOOBSERVE, *command, *option], capture_output=True, text=True, timeout=60, check=False)
            assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
            assert done.stderr.startswith(f"ioobserve: error: {' '.join(option)}: no pod of it runs on this node")
            assert not list(tmp_path.glob("*.pfw.gz"))


@pytest.mark.kernel
def test_unknown_job_is_refused_before_attaching(root_required, tmp_path):
    from tests.kernel.recorder import IOOBSERVE

    done = subprocess.run([IOOBSERVE, "record", "-o", str(tmp_path), "--job", "987654321", "--duration", "1"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0
    assert "--job 987654321: no cgroup of this job" in done.stderr
    assert "Traceback" not in done.stderr and not list(tmp_path.glob("*.pfw.gz"))
