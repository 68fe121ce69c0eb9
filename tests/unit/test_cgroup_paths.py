"""What cgroup paths say about their jobs, per scheduler, orchestrator and runtime layout."""

from __future__ import annotations

import pytest

from ioobserve.context.cgroups import CgroupTable

from ioobserve.data.model import parse_cgroup_path

CID = "3f4b8c2a9d1e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c"
POD = "8e1d2c3b-4a5f-6e7d-8c9b-0a1b2c3d4e5f"


@pytest.mark.parametrize(("path", "expected"), [
    ("/slurm/uid_1000/job_4242/step_0/task_3", {"job": "4242", "step": "0", "task": 3}),
    ("/slurm_node7/uid_0/job_17/step_batch", {"job": "17", "step": "batch", "task": None}),
    ("/slurm/uid_1000/job_9", {"job": "9", "step": None, "task": None}),
    ("/system.slice/slurmstepd.scope/job_4343/step_1/user/task_0",
     {"job": "4343", "step": "1", "task": 0, "unit": "slurmstepd.scope"}),
    ("/system.slice/node1_slurmstepd.scope/job_55/step_extern/slurm",
     {"job": "55", "step": "extern", "task": None, "unit": "node1_slurmstepd.scope"}),
    (f"/kubepods/burstable/pod{POD}/{CID}", {"pod": POD, "container": CID}),
    (f"/kubepods/pod{POD}", {"pod": POD, "container": None}),
    (f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{POD.replace('-', '_')}.slice/cri-containerd-{CID}.scope",
     {"pod": POD, "container": CID, "unit": f"cri-containerd-{CID}.scope"}),
    (f"/kubepods.slice/kubepods-pod{POD.replace('-', '_')}.slice/crio-{CID}.scope", {"pod": POD, "container": CID}),
    (f"/system.slice/docker-{CID}.scope", {"container": CID, "unit": f"docker-{CID}.scope", "pod": None}),
    (f"/docker/{CID}", {"container": CID, "unit": None}),
    (f"/machine.slice/libpod-{CID}.scope/container", {"container": CID, "unit": f"libpod-{CID}.scope"}),
    ("/system.slice/nginx.service", {"unit": "nginx.service", "job": None, "container": None}),
    ("/user.slice/user-1000.slice/session-3.scope", {"unit": "session-3.scope"}),
    ("/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-terminal.scope", {"unit": "app-gnome-terminal.scope"}),
    ("/", {"job": None, "unit": None, "container": None, "pod": None}),
    ("/slurmish/job_12", {"job": None}),  # not a Slurm layout
])
def test_parse_cgroup_path(path, expected):
    context = parse_cgroup_path(path)
    assert context.path == path
    for key, value in expected.items():
        assert getattr(context, key) == value, key


def test_table_learns_ids_from_a_directory_tree(tmp_path):
    job = tmp_path / "slurm" / "uid_0" / "job_7"
    (job / "step_0" / "task_1").mkdir(parents=True)
    table = CgroupTable(tmp_path)
    task_id = (job / "step_0" / "task_1").stat().st_ino
    assert table.lookup([task_id])[task_id].task == 1
    assert table.ids_where(lambda ctx: ctx.job == "7") == {job.stat().st_ino}
    later = job / "step_1"
    later.mkdir()  # appears after the first walk: found by the walk a miss triggers
    assert table.lookup([later.stat().st_ino])[later.stat().st_ino].step == "1"
    walks = table.walks
    assert table.lookup([123456789]) == {}
    assert table.lookup([123456789]) == {}  # an unknown id does not trigger a walk per batch
    assert table.walks == walks + 1
