"""The Python layer for jobs in a root file system of their own, as containers and images
bring one: Debian's unstable suite with its own libc and CPython 3.13, 3.14, 3.15 and the
free-threaded 3.13t (ci/roots.sh), entered by chroot or by a new mount namespace and
pivot_root. Counts, bytes and frames against the workload's own record."""

from __future__ import annotations

import subprocess

import polars as pl
import pytest

from ioobserve import schema as s
from ioobserve.trace.reader import load
from tests.conftest import ROOT
from tests.kernel.python_checks import check_imports, check_item_spans, reads_of, stacks_of
from tests.kernel.recorder import Workload, json_line, record_command
from tests.roots import INTERPRETERS, WAYS

WORKLOADS = ROOT / "tests" / "workloads"
NEW_INTERPRETERS = [*INTERPRETERS]
CASES = [(python, way, "spawn") for python in INTERPRETERS for way in WAYS] + [
    (python, "chroot", "fork") for python in INTERPRETERS]


def _summary(done: subprocess.CompletedProcess) -> str:
    return " ".join(done.stdout.split())


@pytest.mark.kernel
@pytest.mark.parametrize(("python", "way", "method"), CASES)
def test_dataset_workers_in_a_root_of_their_own(job_root, tmp_path, python, way, method):
    """Every read of every worker is in the trace, with its bytes, and names
    ShardDataset.__getitem__ at its read line: the frames of the interpreter the root brings,
    read through the process's own root."""
    inside, host = job_root.scratch()
    script = job_root.copy_in(WORKLOADS / "shard_dataset.py", host)
    done = record_command(tmp_path / "trace", job_root.command(way, [INTERPRETERS[python], script, f"{inside}/data",
                                                                     method, "3"]))
    assert done.returncode == 0, done.stderr
    report = json_line(done.stdout, "workers")
    assert (report["version"], report["gil"]) == ([3, int(python[2:4])], not python.endswith("t")), report
    summary = _summary(done)
    assert f"{INTERPRETERS[python]} (CPython {python[:4]}." in summary, summary  # by its path inside its root
    traces = sorted((tmp_path / "trace").glob("*.pfw.gz"))
    workers = [int(pid) for pid in report["workers"]]
    files = [job_root.traced_path(path, way) for path in report["files"]]
    reads = reads_of(load(traces)).filter(pl.col(s.PID).is_in(workers) & pl.col(s.PATH).is_in(files))
    for pid, counted in report["workers"].items():
        mine = reads.filter(pl.col(s.PID) == int(pid))
        assert (mine.height, mine.get_column(s.BYTES).sum()) == (counted["reads"], counted["bytes"]), pid
    assert reads.get_column(s.PY_STACK).null_count() == 0, reads.filter(pl.col(s.PY_STACK).is_null())
    assert reads.select(s.PY_FUNCTION, s.PY_FILE, s.PY_LINE).unique().rows() == [
        ("ShardDataset.__getitem__", report["file"], report["read_line"])]
    stacks = stacks_of(traces)
    for stack_id in reads.get_column(s.PY_STACK).unique().to_list():
        callers = [frame["function"] for frame in stacks[stack_id]]
        assert callers[:2] == ["ShardDataset.__getitem__", "work"] or "work" in callers, callers
    check_item_spans(traces, workers, files, "ShardDataset.__getitem__")


@pytest.mark.kernel
@pytest.mark.parametrize("python", NEW_INTERPRETERS)
def test_imports_in_a_root_of_its_own(job_root, tmp_path, python):
    """Imports are probed in the root's own interpreter: the module loads of
    tests/workloads/python_imports.py, nested, each holding its reads."""
    inside, host = job_root.scratch()
    script = job_root.copy_in(WORKLOADS / "python_imports.py", host)
    # An interpreter file first mapped during a recording is probed a moment after: one
    # running before it starts is probed from the start (a pod's long-lived processes).
    holder = Workload(job_root.command("chroot", [INTERPRETERS[python], "-c", "print('READY', flush=True); input()"]))
    try:
        done = record_command(tmp_path / "trace", job_root.command("chroot", [INTERPRETERS[python], script,
                                                                               f"{inside}/mods"]))
    finally:
        holder.go()
    assert done.returncode == 0, done.stderr
    assert "at every import statement" not in _summary(done), _summary(done)
    report = json_line(done.stdout, "files")
    frame = load(sorted((tmp_path / "trace").glob("*.pfw.gz"))).filter(pl.col(s.PID) == report["pid"])
    check_imports(frame, report, lambda path: job_root.traced_path(path, "chroot"))
