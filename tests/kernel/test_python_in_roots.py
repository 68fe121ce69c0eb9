"""The Python layer for jobs in a root file system of their own, as containers and images
bring one: Debian's unstable suite with its own libc and CPython 3.13, 3.14, 3.15 and the
free-threaded 3.13t (ci/roots.sh), entered by chroot or by a new mount namespace and
pivot_root. Counts, bytes and frames against the workload's own record. A process of the
job's interpreter runs from before each recording (as a pod's long-lived processes do), so
the file is read at the start: how soon a file new to a recording is read depends on how
busy the cores are (the summary says how late), and these tests are about reading it right."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest

from ioobserve.data import schema as s
from ioobserve.trace.read.reader import load
from tests.conftest import ROOT
from tests.kernel.python_checks import check_imports, check_item_spans, check_shard_reads, reads_of, stacks_of
from tests.kernel.kernel_side import ran
from tests.kernel.recorder import Recorder, Workload, json_line, record_command
from tests.roots import INTERPRETERS, WAYS

WORKLOADS = ROOT / "tests" / "workloads"
NEW_INTERPRETERS = [*INTERPRETERS]
# Each kernel of the matrix runs two of them: a new interpreter by each way in.
IN_MATRIX = {("3.14", "chroot", "spawn"), ("3.15", "pivot", "spawn")}
CASES = [pytest.param(*case, marks=[pytest.mark.matrix] if case in IN_MATRIX else [])
         for case in [(python, way, "spawn") for python in INTERPRETERS for way in WAYS]
         + [(python, "chroot", "fork") for python in INTERPRETERS]]


def _summary(done: subprocess.CompletedProcess) -> str:
    return " ".join(done.stdout.split())


def _holding(command: list[str]) -> Workload:
    """A process running `command` (an interpreter that waits) before a recording starts, so
    that its interpreter file is read from the start (see the module's docstring)."""
    return Workload([*command, "-c", "print('READY', flush=True); input()"])


def _record_shards(side, job_root, python: str, way: str, method: str) -> dict:
    """shard_dataset.py by the root's `python`, entered `way`, its workers started by `method`."""
    inside, host = job_root.scratch()
    script = job_root.copy_in(WORKLOADS / "shard_dataset.py", host)
    holder = _holding(job_root.command("chroot", [INTERPRETERS[python]]))
    try:
        return ran(record_command(side.out / "trace", job_root.command(way, [INTERPRETERS[python], script,
                                                                             f"{inside}/data", method, "3"])))
    finally:
        holder.go()


@pytest.mark.kernel
@pytest.mark.parametrize(("python", "way", "method"), CASES)
def test_dataset_workers_in_a_root_of_their_own(job_root, kernel_side, python, way, method):
    """Every read of every worker is in the trace, with its bytes, and names
    ShardDataset.__getitem__ at its read line: the frames of the interpreter the root brings,
    read through the process's own root."""
    recorded = kernel_side(_record_shards, job_root, python, way, method)
    done = recorded.done()
    assert done.returncode == 0, done.stderr
    report = json_line(done.stdout, "workers")
    assert (report["version"], report["gil"]) == ([3, int(python[2:4])], not python.endswith("t")), report
    summary = _summary(done)
    assert f"{INTERPRETERS[python]} (CPython {python[:4]}." in summary, summary  # by its path inside its root
    traces = recorded.traces()
    workers = [int(pid) for pid in report["workers"]]
    files = [job_root.traced_path(path, way) for path in report["files"]]
    reads = reads_of(load(traces)).filter(pl.col(s.PID).is_in(workers) & pl.col(s.PATH).is_in(files))
    check_shard_reads(traces, reads, report, done.stdout + done.stderr)
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
    holder = _holding(job_root.command("chroot", [INTERPRETERS[python]]))
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


def _shard_run(job_root, way: str, python: str, root=None) -> tuple[list[str], str]:
    """The shard dataset (spawned workers) in the root by `python`: its command line, and the
    path inside of the directory it writes to."""
    inside, host = job_root.scratch()
    script = job_root.copy_in(WORKLOADS / "shard_dataset.py", host)
    command = [INTERPRETERS.get(python, python), script, f"{inside}/data", "spawn", "2"]
    if root is None:
        return job_root.command(way, command), inside
    return [str(job_root.launcher), way, str(root), *command], inside


def _worker_reads(traces, report: dict, files: list[str]) -> pl.DataFrame:
    workers = [int(pid) for pid in report["workers"]]
    return reads_of(load(traces)).filter(pl.col(s.PID).is_in(workers) & pl.col(s.PATH).is_in(files))


@pytest.fixture
def second_root(job_root, tmp_path):
    """The same root file system at a second place (a recursive bind mount): the same files."""
    second = tmp_path / "second-root"
    second.mkdir()
    subprocess.run(["mount", "--rbind", str(job_root.path), str(second)], check=True)
    yield second
    subprocess.run(["umount", "-R", "-l", str(second)], check=False)


@pytest.mark.kernel
def test_one_interpreter_file_in_two_roots_is_read_once(job_root, second_root, tmp_path):
    """3.14's interpreter file, in a chroot and in a container whose root is the same files
    elsewhere, at once: read and probed once (one file in the summary), and both jobs' reads
    have their frames."""
    first, first_dir = _shard_run(job_root, "chroot", "3.14")
    second, second_dir = _shard_run(job_root, "pivot", "3.14", second_root)
    both = ["/bin/sh", "-c", f"{subprocess.list2cmdline(first)} & {subprocess.list2cmdline(second)}; wait"]
    holder = _holding(job_root.command("chroot", [INTERPRETERS["3.14"]]))
    try:
        done = record_command(tmp_path / "trace", both)
    finally:
        holder.go()
    assert done.returncode == 0, done.stderr
    summary = _summary(done)
    assert summary.count("/usr/bin/python3.14 (CPython 3.14.") == 1, summary
    traces = sorted((tmp_path / "trace").glob("*.pfw.gz"))
    reports = [json_line(line, "workers") for line in done.stdout.splitlines() if '"workers"' in line]
    assert len(reports) == 2, done.stdout
    for report in reports:
        way = "chroot" if report["files"][0].startswith(first_dir) else "pivot"
        files = [job_root.traced_path(path, way) for path in report["files"]]
        reads = _worker_reads(traces, report, files)
        assert reads.height == sum(worker["reads"] for worker in report["workers"].values()), (way, reads)
        assert reads.get_column(s.PY_FUNCTION).to_list() == ["ShardDataset.__getitem__"] * reads.height, way


def _damage(interpreter: Path) -> None:
    """Write a thread-state offset far past its struct into the copy's _Py_DebugOffsets (the
    interpreter itself never reads them: it runs as before)."""
    from ioobserve.python.elf import ElfFile
    from ioobserve.python.layouts import DEBUG_POSITIONS

    elf = ElfFile(interpreter)
    field_at = elf.symbol("_PyRuntime") + DEBUG_POSITIONS[(3, 14)]["tstate_native_id"]
    (segment,) = [seg for seg in elf.segments if seg.vaddr <= field_at < seg.vaddr + seg.filesz]
    with open(interpreter, "r+b") as file:
        file.seek(segment.offset + field_at - segment.vaddr)
        file.write((1 << 40).to_bytes(8, "little"))


@pytest.mark.kernel
def test_a_damaged_interpreter_is_named_and_the_rest_recorded(job_root, tmp_path):
    """A copy of 3.14 whose _Py_DebugOffsets is damaged: each of its processes gets one line
    saying why its frames are not read, their reads are all recorded without frames, and a
    sound interpreter's job recorded at the same time keeps its frames."""
    inside, host = job_root.scratch()
    shutil.copy(job_root.path / "usr/bin/python3.14", host / "python3.14")
    _damage(host / "python3.14")
    damaged, damaged_dir = _shard_run(job_root, "chroot", f"{inside}/python3.14")
    sound, _ = _shard_run(job_root, "chroot", "3.14")
    both = ["/bin/sh", "-c", f"{subprocess.list2cmdline(damaged)} & {subprocess.list2cmdline(sound)}; wait"]
    holders = [_holding(job_root.command("chroot", [python])) for python in (f"{inside}/python3.14", INTERPRETERS["3.14"])]
    try:
        done = record_command(tmp_path / "trace", both)
    finally:
        for holder in holders:
            holder.go()
    assert done.returncode == 0, done.stderr
    reports = [json_line(line, "workers") for line in done.stdout.splitlines() if '"workers"' in line]
    by_damage = {report["files"][0].startswith(damaged_dir): report for report in reports}
    assert set(by_damage) == {True, False}, done.stdout
    why = f"{inside}/python3.14 (CPython 3.14.10) in {job_root.path}: Python 3.14: its _Py_DebugOffsets is damaged"
    refused = [line for line in done.stdout.splitlines() if line.startswith("no frames")]
    summary = _summary(done)
    for pid in [by_damage[True]["pid"], *map(int, by_damage[True]["workers"])]:
        assert f"pid {pid}: {why}" in summary, summary
    # Every line names the damaged file (its job has a multiprocessing helper too); none is
    # about the sound job's processes.
    assert len(re.findall(rf"pid \d+: {re.escape(why)}", summary)) == len(refused), refused
    for pid in [by_damage[False]["pid"], *map(int, by_damage[False]["workers"])]:
        assert f"pid {pid}:" not in summary, summary
    traces = sorted((tmp_path / "trace").glob("*.pfw.gz"))
    for damaged_run, report in by_damage.items():
        files = [job_root.traced_path(path, "chroot") for path in report["files"]]
        reads = _worker_reads(traces, report, files)
        assert reads.height == sum(worker["reads"] for worker in report["workers"].values()), damaged_run
        assert reads.get_column(s.PY_STACK).null_count() == (reads.height if damaged_run else 0), damaged_run



@pytest.mark.kernel
def test_doctor_names_each_running_interpreter_and_library_inside_its_root(job_root):
    """The files a job in the root maps, as `ioobserve doctor` lists them: its interpreter
    with its version and whether its frames are walked, and its libc, each by its path inside
    the root and the root; a damaged copy of the interpreter with why it is not walked."""
    from ioobserve.probes.attach.inventory import running_files

    inside, host = job_root.scratch()
    shutil.copy(job_root.path / "usr/bin/python3.14", host / "python3.14")
    _damage(host / "python3.14")
    holders = [_holding(job_root.command("chroot", [python])) for python in (INTERPRETERS["3.14"], f"{inside}/python3.14")]
    try:
        found = {(item.layer, item.shown): item for item in running_files([holder.pid for holder in holders])}
    finally:
        for holder in holders:
            holder.go()
    where = f" in {job_root.path}"
    assert found[("python", "/usr/bin/python3.14" + where)].status.startswith("CPython 3.14."), found
    assert "frames walked" in found[("python", "/usr/bin/python3.14" + where)].status
    damaged = found[("python", f"{inside}/python3.14" + where)]
    assert damaged.status.startswith("frames not walked: Python 3.14: its _Py_DebugOffsets is damaged"), damaged
    assert found[("libc", "/usr/lib/x86_64-linux-gnu/libc.so.6" + where)].processes == 2, found


@pytest.fixture
def host_view(tmp_path):
    """The host's whole tree again at another place (a recursive bind mount of /): a root for
    the recorder itself, as a container with the host's PID namespace gives it one."""
    view = tmp_path / "host-view"
    view.mkdir()
    subprocess.run(["mount", "--rbind", "/", str(view)], check=True)
    subprocess.run(["mount", "--make-rslave", str(view)], check=True)  # its unmount leaves the host's mounts
    yield view
    subprocess.run(["umount", "-R", "-l", str(view)], check=False)


@pytest.mark.kernel
def test_a_recorder_in_a_root_of_its_own_reads_a_jobs_interpreter(job_root, host_view, tmp_path):
    """ioobserve in its own mount namespace and root (the host's files, bound elsewhere), as in
    a privileged container with the host's PID namespace, recording a job in the unstable
    root: the job's interpreter is read through the job's own mapping, and each thread's
    reads name their function."""
    inside, host = job_root.scratch()
    script = job_root.copy_in(WORKLOADS / "python_threads.py", host)
    job = Workload(job_root.command("chroot", [INTERPRETERS["3.14"], script, f"{inside}/data", "--wait"]))
    recorder = Recorder(tmp_path / "trace", "--pid", str(job.pid), prefix=(str(job_root.launcher), "pivot", str(host_view)))
    report = json_line(job.go(), "threads")
    code, out, stderr = recorder.stop()
    assert code == 0, stderr
    assert "/usr/bin/python3.14 (CPython 3.14." in " ".join(out.split()), out
    frame = load(sorted((tmp_path / "trace").glob("*.pfw.gz"))).filter(pl.col(s.PID) == report["pid"])
    for name, function in (("alpha", "read_in_alpha"), ("beta", "read_in_beta")):
        reads = reads_of(frame).filter(pl.col(s.PATH) == job_root.traced_path(report["files"][name], "chroot"))
        assert reads.height == report["reads_each"], (name, reads)
        assert reads.select(s.PY_FUNCTION, s.PY_LINE).unique().rows() == [(function, report["lines"][name])], reads
