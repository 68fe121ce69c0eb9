"""`serve`'s per-job recording without a kernel: which cgroups a recorded job lets out of the
kernel, over a directory tree laid out as Slurm's cgroups (the table walks it as the v2 mount)."""

from __future__ import annotations

import shutil

from ioobserve.context.cgroups import CgroupTable
from ioobserve.serve.jobs import EVERY_JOB, JobRecorder


class _Probes:
    """The kernel's emit set, as JobRecorder changes it."""

    def __init__(self):
        self.tables = self  # the probes' maps (probes.tables), which this stand-in keeps itself
        self.emitting: set[int] = set()

    def emit_cgroup(self, cgroup_id: int, on: bool) -> None:
        if on:
            self.emitting.add(cgroup_id)
        else:
            self.emitting.discard(cgroup_id)


def _job(mount, job: str):
    path = mount / "slurm" / "uid_0" / f"job_{job}"
    (path / "step_0").mkdir(parents=True)
    return path


def test_a_started_job_lets_out_its_top_cgroup_and_a_stopped_one_none(tmp_path):
    mount, probes = tmp_path / "cg", _Probes()
    first = _job(mount, "7")
    recorder = JobRecorder(probes, tmp_path / "traces", [], cgroups=CgroupTable(mount))
    recorder.start("7")
    assert probes.emitting == {first.stat().st_ino}  # the job's top, not its step: the kernel takes the subtree
    recorder.stop("7")
    assert probes.emitting == set()


def test_cgroups_of_finished_jobs_leave_the_kernel_set_under_a_rule_for_every_job(tmp_path):
    mount, probes = tmp_path / "cg", _Probes()
    table = CgroupTable(mount)
    recorder = JobRecorder(probes, tmp_path / "traces", [EVERY_JOB], cgroups=table)
    for number in range(50):  # jobs come and go for as long as the daemon runs
        path = _job(mount, str(number))
        recorder.discover()
        assert path.stat().st_ino in probes.emitting
        shutil.rmtree(path)
    recorder.discover()
    assert probes.emitting == set() and recorder._emitting == {}
    assert not any(ctx.job for ctx in table.by_id.values())  # the table forgot them too
