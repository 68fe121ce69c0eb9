"""Lineage from a real recording, the application unchanged: a job prepares dataset shards,
trains on them writing a checkpoint after each step (and an empty marker at the end: made,
not written), and resumes from the last checkpoint.
Each process's data used and generated, the Python function that touched it, and what each
checkpoint may derive from are what the workload itself did."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.kernel.kernel_side import ran
from tests.kernel.recorder import IOOBSERVE, json_line, record_command, wait_finished

WORKLOAD = str(ROOT / "tests" / "workloads" / "checkpoint_workload.py")


def _record_job(side) -> dict:
    work = side.scratch / "job"
    work.mkdir()
    return ran(record_command(side.out / "trace", [sys.executable, WORKLOAD, str(work)]))


def _per_file(rows: list[dict], pid: int, column: str) -> dict[str, int]:
    """A process's bytes per file read (column bytes_read) or generated (bytes_written)."""
    found: dict[str, int] = {}
    for row in rows:
        if row["pid"] == pid and (row["generated"] if column == "bytes_written" else row[column]):
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
                         | {(path, "mark_done" if path.endswith("DONE") else "save_checkpoint")
                            for path in job["train"]["written"]})
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


@pytest.mark.kernel
def test_the_finisher_writes_the_lineage_into_the_trace_as_dftracers_provenance(root_required, tmp_path):
    """Each data file an entity; per process and Python function, what it used and generated;
    each checkpoint derived from the shards read before it: as the workload did them."""
    from ioobserve.analysis.provenance import ACTIVITY, ENTITY, RELATION, entity_id, trace_provenance
    from ioobserve.trace.members import read_index

    work = tmp_path / "job"
    work.mkdir()
    done = record_command(tmp_path / "trace", [sys.executable, WORKLOAD, str(work)])
    assert done.returncode == 0, done.stderr
    job = json_line(done.stdout, "LINEAGE")["LINEAGE"]
    wait_finished(tmp_path / "trace")
    (trace,) = (tmp_path / "trace").glob("*.pfw.gz")
    assert read_index(trace) is not None  # the appended member has its entry
    records = trace_provenance(trace)
    touched = {path for role in job.values() for path in (*role["read"], *role["written"])}
    assert {r["args"]["uri"]: r["args"]["id"] for r in records[ENTITY]} == {path: entity_id("file", path) for path in touched}
    ids = {r["args"]["id"]: r["args"]["uri"] for r in records[ENTITY]}
    did = {(r["pid"], r["args"]["function"]): ({ids[i] for i in r["args"]["relations"]["used"]},
                                               {ids[i] for i in r["args"]["relations"]["generated"]})
           for r in records[ACTIVITY]}
    train, resume = job["train"], job["resume"]
    assert did[(train["pid"], "load_shard")] == (set(train["read"]), set())
    assert did[(train["pid"], "save_checkpoint")] == (set(), {path for path in train["written"] if path.endswith(".pt")})
    assert did[(train["pid"], "mark_done")] == (set(), {path for path in train["written"] if path.endswith("DONE")})
    assert did[(resume["pid"], "load_checkpoint")] == (set(resume["read"]), set())
    assert {(ids[r["args"]["subject"]], ids[r["args"]["object"]]) for r in records[RELATION]} == {
        (checkpoint, shard) for checkpoint, shards in train["before"].items() for shard in shards}
    assert {r["args"]["relation"] for r in records[RELATION]} == {16}  # DFTracer's derived_from
