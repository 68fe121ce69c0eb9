"""Lineage from a real recording, the application unchanged: a job prepares dataset shards,
trains on them writing a checkpoint after each step, and resumes from the last checkpoint.
Each process's data used and generated, the Python function that touched it, and what each
checkpoint may derive from are what the workload itself did."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.kernel.kernel_side import ran
from tests.kernel.recorder import IOOBSERVE, json_line, record_command

WORKLOAD = str(ROOT / "tests" / "workloads" / "checkpoint_workload.py")


def _record_job(side) -> dict:
    work = side.scratch / "job"
    work.mkdir()
    return ran(record_command(side.out / "trace", [sys.executable, WORKLOAD, str(work)]))


def _per_file(rows: list[dict], pid: int, column: str) -> dict[str, int]:
    found: dict[str, int] = {}
    for row in rows:
        if row["pid"] == pid and row[column]:
            found[row["path"]] = found.get(row["path"], 0) + row[column]
    return found


@pytest.mark.kernel
def test_each_process_used_and_generated_what_the_job_did(root_required, kernel_side):
    recorded = kernel_side(_record_job)
    done = recorded.done()
    assert done.returncode == 0, done.stderr
    job = json_line(done.stdout, "LINEAGE")["LINEAGE"]
    shown = subprocess.run([IOOBSERVE, "analyze", "--json", *map(str, recorded.traces())], capture_output=True, text=True,
                           timeout=600)
    assert shown.returncode == 0, shown.stderr
    result = json.loads(shown.stdout)
    rows = result["lineage"]
    for role in ("prepare", "train", "resume"):
        pid = job[role]["pid"]
        assert _per_file(rows, pid, "bytes_read") == job[role]["read"], role
        assert _per_file(rows, pid, "bytes_written") == job[role]["written"], role
    train = job["train"]["pid"]
    functions = {(row["path"], row["py_function"]) for row in rows if row["pid"] == train}
    assert functions == ({(path, "load_shard") for path in job["train"]["read"]}
                         | {(path, "save_checkpoint") for path in job["train"]["written"]})
    links = {}
    for link in result["derived"]:
        assert link["pid"] == train, link  # only the trainer read data before writing some
        links.setdefault(link["target"], set()).add(link["source"])
    assert links == {checkpoint: set(shards) for checkpoint, shards in job["train"]["before"].items()}
    screen = subprocess.run([IOOBSERVE, "analyze", "--lineage", *map(str, recorded.traces())], capture_output=True,
                            text=True, timeout=600, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert screen.returncode == 0, screen.stderr
    last = max(job["train"]["written"])
    assert any(last.rsplit("/", 1)[1] in line and "used and generated" in line for line in screen.stdout.splitlines()), \
        screen.stdout
