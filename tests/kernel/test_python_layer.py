"""The Python layer on real interpreters: every read a Python program makes carries the
Python stack it was made from, walked in the kernel. A DataLoader-like workload (a
Dataset's __getitem__ calling numpy.load) in 4 spawned and 4 forked workers, two threads
reading in different functions on Debian's python3.11 (runtime in the executable), on
pyenv's (runtime in libpython) and on the other CPythons the machine has, a process
that was already running when the recording started, and new interpreters it starts
(placed by the kernel itself, from their first import)."""

from __future__ import annotations

import glob
import os
import subprocess
from pathlib import Path

import polars as pl
import pytest

from ioobserve.data import schema as s
from ioobserve.trace.read.reader import load, own_records, records
from tests.conftest import PYTHON, ROOT
from tests.kernel.python_checks import why_unwalked
from tests.kernel.kernel_side import as_completed
from tests.kernel.recorder import Recorder, Workload, json_line, record_command, record_in_turn

WORKLOADS = ROOT / "tests" / "workloads"
DEBIAN_PYTHON = "/usr/bin/python3.11"
PYENV_PYTHONS = sorted(glob.glob("/root/.pyenv/versions/3.1[0-9].*/bin/python3.1[0-9]"))
PYENV_311 = next((p for p in PYENV_PYTHONS if "/3.11." in p), None)


def _stacks(traces: list[Path]) -> dict[int, list[dict]]:
    """Stack id -> frames (innermost first) from the traces' PS records."""
    table = records(traces, "PS").select(pl.col("args").struct.field("stack"), pl.col("args").struct.field("frames"))
    return {row["stack"]: row["frames"] for row in table.iter_rows(named=True)}


def _reads(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.filter((pl.col(s.LAYER) == s.LAYER_SYSCALL) & pl.col(s.OP).is_in(["read", "pread64"]))


def _record_datasets(side) -> dict:
    """The dataset's workers started by spawn, then by fork, under one recorder."""
    return record_in_turn(side.out / "trace", side.scratch, {
        method: [PYTHON, str(WORKLOADS / "python_dataset.py"), str(side.scratch / f"data-{method}"), method, "4"]
        for method in ("spawn", "fork")})


@pytest.mark.kernel
@pytest.mark.matrix
@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_dataset_reads_name_getitem_and_numpy_load(root_required, kernel_side, method):
    """Every read of every worker names Dataset.__getitem__ at its numpy.load line, with
    numpy's loader beneath it."""
    recorded = kernel_side(_record_datasets, share=True)
    record, done = recorded.done("record"), as_completed(recorded["outputs"][method])
    assert record.returncode == 0 and done.returncode == 0, record.stderr + done.stderr
    report = json_line(done.stdout, "workers")
    traces = recorded.traces()
    reads = _reads(load(traces)).filter(pl.col(s.PID).is_in(report["workers"]) & pl.col(s.PATH).is_in(report["files"]))
    assert set(reads.get_column(s.PID).to_list()) == set(report["workers"])
    assert set(reads.get_column(s.PATH).to_list()) == set(report["files"])
    assert reads.get_column(s.PY_STACK).null_count() == 0, why_unwalked(traces, reads, record.stdout + record.stderr)
    stacks = _stacks(traces)
    for stack_id in reads.get_column(s.PY_STACK).unique().to_list():
        frames = stacks[stack_id]
        getitem = [i for i, f in enumerate(frames) if f["function"] == "NpyDataset.__getitem__"]
        assert getitem, frames
        where = frames[getitem[0]]
        assert (where["file"], where["line"]) == (report["file"], report["load_line"]), frames
        loader = frames[getitem[0] - 1]  # the frame __getitem__ called
        assert loader["function"] == "load" and "/numpy/" in loader["file"], frames
    _check_getitem_spans(traces, report)


def _check_getitem_spans(traces: list[Path], report: dict) -> None:
    """One NpyDataset.__getitem__ span per item, holding the reads of that item's file
    only, with a numpy `load` span inside it and the worker's `work` span above it."""
    frame = load(traces, pids=report["workers"])  # the spans were written as the recording went
    spans = frame.filter(pl.col(s.LAYER) == s.LAYER_PYTHON)
    getitems = spans.filter(pl.col(s.OP) == "NpyDataset.__getitem__")
    assert getitems.height == len(report["files"]), getitems
    # __getitem__ is called from the generator expression in work(): one call per worker
    # (a generator keeps its frame and its iterator argument across resumes).
    callers = spans.filter(pl.col(s.TS).is_in(getitems.get_column(s.PARENT_TS).implode()))
    assert callers.get_column(s.OP).unique().to_list() == ["work.<locals>.<genexpr>"], callers
    assert callers.height == len(report["workers"])
    works = spans.filter(pl.col(s.OP) == "work")
    assert set(callers.get_column(s.PARENT_TS)) == set(works.get_column(s.TS))
    loads = spans.filter(pl.col(s.OP) == "load")
    assert set(loads.get_column(s.PARENT_TS)) == set(getitems.get_column(s.TS))
    reads = _reads(frame).filter(pl.col(s.PATH).is_in(report["files"]))
    for span in getitems.iter_rows(named=True):
        inside = reads.filter((pl.col(s.TID) == span[s.TID]) & (pl.col(s.TS) >= span[s.TS])
                              & (pl.col(s.TS) + pl.col(s.DUR) <= span[s.TS] + span[s.DUR]))
        # how many reads numpy.load makes of a file (header, then data) is numpy's own affair
        assert inside.height > 0 and inside.get_column(s.PATH).n_unique() == 1, (span, inside)


def _run_with_interpreter_known(tmp_path: Path, python: str, command: list[str]) -> tuple[subprocess.CompletedProcess, list[Path]]:
    """Record `command` while another process of `python` runs, so that its interpreter file
    is known (and probed) from the start: an interpreter never seen before is read a few ms
    after its first process maps it (more under load), which a short workload may outrun.
    Only the command's own process tree is recorded: a system-wide recording also takes in
    whatever else the machine runs (tens of thousands of events a second while other kernel
    tests run), and under that load the niced recorder loses path and stack records on a full
    ring or drops the trace's tail at the stop deadline, the workload's reads among them.
    Returns the run (the workload's report and record's summary on its stdout) and the traces."""
    holder = Workload([python, "-c", "print('READY', flush=True); input()"])
    try:
        done = record_command(tmp_path / "trace", command)
    finally:
        holder.go()
    assert done.returncode == 0, done.stderr
    return done, sorted((tmp_path / "trace").glob("*.pfw.gz"))


def _check_threads(frame: pl.DataFrame, report: dict) -> None:
    """Each thread's reads of its file name its own function and line."""
    for name, function in (("alpha", "read_in_alpha"), ("beta", "read_in_beta")):
        reads = _reads(frame).filter(pl.col(s.PATH) == report["files"][name])
        assert reads.height == report["reads_each"], (name, reads)
        assert reads.get_column(s.TID).unique().to_list() == [report["threads"][name]]
        assert reads.select(s.PY_FUNCTION, s.PY_FILE, s.PY_LINE).unique().rows() == [
            (function, report["file"], report["lines"][name])], reads


@pytest.mark.kernel
@pytest.mark.parametrize("python", [DEBIAN_PYTHON, *PYENV_PYTHONS])
def test_two_threads_reading_in_different_functions(root_required, tmp_path, python):
    """Told apart by their native thread ids, on each CPython of the machine."""
    assert Path(python).exists(), f"{python} is missing"
    done, traces = _run_with_interpreter_known(tmp_path, python, [python, str(WORKLOADS / "python_threads.py"),
                                                                 str(tmp_path / "data")])
    report = json_line(done.stdout, "threads")
    frame = load(traces).filter(pl.col(s.PID) == report["pid"])
    _check_threads(frame, report)


@pytest.mark.kernel
def test_a_python_process_running_before_the_recording(root_required, tmp_path):
    """Found in /proc when the recording starts (pyenv's 3.11: the runtime in libpython)."""
    assert PYENV_311, "pyenv's Python 3.11 (with libpython) is missing"
    workload = Workload([PYENV_311, str(WORKLOADS / "python_threads.py"), str(tmp_path / "data"), "--wait"])
    recorder = Recorder(tmp_path / "trace", "--pid", str(workload.pid))
    out = workload.go()
    code, _, stderr = recorder.stop()
    assert code == 0, stderr
    report = json_line(out, "threads")
    frame = load(recorder.traces()).filter(pl.col(s.PID) == report["pid"])
    _check_threads(frame, report)


@pytest.mark.kernel
@pytest.mark.matrix  # the guests' root is an overlay: exec and mmap see its inode, maps (before 6.8) the layer's
@pytest.mark.parametrize("python", [DEBIAN_PYTHON, PYENV_311])
def test_new_interpreters_have_stacks_from_their_first_import(root_required, kernel_side, python):
    """A known interpreter exec'd anew (Debian's: the runtime in the executable) or mapping
    libpython (pyenv's) is placed by the kernel at exec or at the mapping, before user space
    hears of it: every .pyc file its startup imports read has a stack (recorded with
    --py-stacks all: by default calls inside an import are named by the import, not walked)."""
    assert python and Path(python).exists(), f"{python} is missing"
    recorded = kernel_side(_record_starts, share=True)
    assert recorded["code"] == 0, recorded["stderr"]
    children = json_line(recorded["workloads"][python], "children")["children"]
    traces = recorded.traces()
    reads = _reads(load(traces)).filter(pl.col(s.PID).is_in(children) & pl.col(s.PATH).cat.ends_with(".pyc"))
    assert set(reads.get_column(s.PID).to_list()) == set(children)
    assert reads.get_column(s.PY_STACK).null_count() == 0, why_unwalked(traces, reads, recorded["summary"] + recorded["stderr"])
    assert set(reads.get_column(s.PY_FUNCTION).to_list()) == {"FileLoader.get_data"}, reads


def _record_starts(side) -> dict:
    """python_starts.py (new interpreters, started by a process of each interpreter of the
    machine's kinds), the processes recorded by their pids (one recorder for both)."""
    workloads = {python: Workload([python, str(WORKLOADS / "python_starts.py")])
                 for python in (DEBIAN_PYTHON, PYENV_311) if python and Path(python).exists()}
    recorder = Recorder(side.out / "trace", "--py-stacks", "all", *(option for workload in workloads.values()
                                                                  for option in ("--pid", str(workload.pid))))
    outputs = {python: workload.go() for python, workload in workloads.items()}
    code, summary, stderr = recorder.stop()
    return {"code": code, "summary": summary, "stderr": stderr, "workloads": outputs}


@pytest.mark.kernel
def test_py_stacks_sampling_depth_and_off(root_required, tmp_path):
    """--py-stacks N walks one traced call in N per thread, --py-depth D at most D frames,
    --py-stacks off none at all."""
    command = [DEBIAN_PYTHON, str(WORKLOADS / "python_threads.py"), str(tmp_path / "data")]
    runs = {"sampled": ("--py-stacks", "4", "--py-depth", "2"), "off": ("--py-stacks", "off")}
    frames = {}
    for name, options in runs.items():
        done = record_command(tmp_path / name, command, *options)
        assert done.returncode == 0, done.stderr
        report = json_line(done.stdout, "threads")
        traces = sorted((tmp_path / name).glob("*.pfw.gz"))
        frames[name] = (_reads(load(traces)).filter(pl.col(s.PATH).is_in(list(report["files"].values()))), traces, done)
    sampled, traces, done = frames["sampled"]
    with_stack = sampled.get_column(s.PY_STACK).is_not_null().sum()
    # Every thread's traced calls (open, reads, close) count; one in 4 is walked.
    assert 0 < with_stack < sampled.height // 2, (with_stack, sampled.height)
    assert "one call in 4" in " ".join(done.stdout.split())
    depths = [len(frames) for frames in _stacks(traces).values()]
    assert max(depths) == 2 and min(depths) >= 1, depths
    off, _, done = frames["off"]
    assert off.height == sampled.height and off.get_column(s.PY_STACK).null_count() == off.height
    assert "python:" not in " ".join(done.stdout.split())


@pytest.mark.kernel
@pytest.mark.parametrize("python", [DEBIAN_PYTHON, PYENV_311])
def test_imports_with_their_duration_and_files(root_required, tmp_path, python):
    """An import that reads files is a PYTHON-layer event named by its module, with its
    duration; the reads of the module's file happen inside it, and by default (--py-stacks
    auto) carry no stack of their own, their import naming them, while a read outside any
    import has one; an import made while importing is its own event inside the outer one; an
    import of a loaded module is none."""
    assert python and Path(python).exists(), f"{python} is missing"
    done, traces = _run_with_interpreter_known(tmp_path, python, [python, str(WORKLOADS / "python_imports.py"),
                                                                 str(tmp_path / "mods")])
    assert "imports and open() probed (" in " ".join(done.stdout.split()), done.stdout
    report = json_line(done.stdout, "files")
    frame = load(traces).filter(pl.col(s.PID) == report["pid"])
    imports = frame.filter((pl.col(s.LAYER) == s.LAYER_PYTHON) & (pl.col(s.OP) == "import"))
    mine = {row[s.PY_MODULE]: row for row in imports.filter(pl.col(s.PY_MODULE).is_in(["outer", "inner"])).iter_rows(named=True)}
    assert sorted(imports.filter(pl.col(s.PY_MODULE).is_in(["outer", "inner"])).get_column(s.PY_MODULE)) == ["inner", "outer"]
    outer, inner = mine["outer"], mine["inner"]
    assert inner[s.PARENT_TS] == outer[s.TS]
    assert outer[s.TS] < inner[s.TS] and inner[s.TS] + inner[s.DUR] <= outer[s.TS] + outer[s.DUR]
    assert outer[s.RET] == inner[s.RET] == 1
    for name, event in mine.items():
        reads = _reads(frame).filter(pl.col(s.PATH) == report["files"][name])
        assert reads.height > 0, name  # how many reads an import makes of its source is the interpreter's choice
        assert reads.get_column(s.PARENT_TS).unique().to_list() == [event[s.TS]], (name, reads)
        assert reads.get_column(s.PY_STACK).null_count() == reads.height, (name, reads)  # not walked
        assert event[s.PATH].startswith(report["dir"]), event
    data = _reads(frame).filter(pl.col(s.PATH) == report["data"])
    assert data.height > 0 and data.get_column(s.PY_FUNCTION).to_list() == ["main"] * data.height, data


CACHED_IMPORTS = 100_000
CACHED_IMPORTS_WORKLOAD = f"""import json, os
for _ in range({CACHED_IMPORTS}):
    import os as again
print(json.dumps({{"pid": os.getpid(), "cached": {CACHED_IMPORTS}}}), flush=True)
"""


@pytest.mark.kernel
@pytest.mark.parametrize("python", [DEBIAN_PYTHON, *PYENV_PYTHONS])
def test_a_cached_import_is_no_event_and_no_trap(root_required, tmp_path, python):
    """Imports are probed where CPython loads a module, not at every import statement: 100,000
    imports of a loaded module run none of the interpreter's probes (the kernel's count of
    their programs' runs stays below half that: every other Python process on the node adds to
    it, a busy one a few thousand a second) and leave no event."""
    assert Path(python).exists(), f"{python} is missing"
    done = record_command(tmp_path / "trace", [python, "-c", CACHED_IMPORTS_WORKLOAD], "--probe-stats")
    assert done.returncode == 0, done.stderr
    summary = " ".join(done.stdout.split())
    assert "at every import statement" not in summary, summary
    # This kernel (6.6+) takes uprobe_multi links: a program the verifier refuses would fall back unseen.
    release = tuple(int(part) for part in os.uname().release.split(".")[:2])
    how = "uprobe_multi links" if release >= (6, 6) else "uprobes"
    assert f"imports and open() probed ({how}) in" in summary, summary
    report = json_line(done.stdout, "cached")
    traces = sorted((tmp_path / "trace").glob("*.pfw.gz"))
    (end,) = own_records(traces[0], "end")
    runs = sum(n for name, n in end["args"]["counters"].items()
               if name.startswith("probe_runs.") and ("call" in name or "py_import" in name))
    assert runs < CACHED_IMPORTS // 2, end["args"]["counters"]
    imports = load(traces).filter((pl.col(s.PID) == report["pid"]) & (pl.col(s.OP) == "import"))
    # At most the interpreter's own first load of os, at its start (site imports it; 3.11 on
    # has it frozen), seen where the exec gate probed the interpreter before it started.
    assert imports.filter(pl.col(s.PY_MODULE) == "os").height <= 1, imports


@pytest.mark.kernel
@pytest.mark.parametrize("python", [DEBIAN_PYTHON, PYENV_311])
def test_python_open_calls_with_their_syscalls(root_required, tmp_path, python):
    """Each open() is a PYTHON-layer `open` event named by its file, its openat inside it;
    one that raised has ret 0 and its failed openat inside it. Debian's stripped binary has
    no symbol for open()'s C function (found through the _io method table); pyenv's has."""
    assert python and Path(python).exists(), f"{python} is missing"
    done, traces = _run_with_interpreter_known(tmp_path, python, [python, str(WORKLOADS / "python_opens.py"),
                                                                 str(tmp_path / "files")])
    report = json_line(done.stdout, "missing")
    frame = load(traces).filter(pl.col(s.PID) == report["pid"])
    opens = frame.filter((pl.col(s.LAYER) == s.LAYER_PYTHON) & (pl.col(s.OP) == "open"))
    mine = opens.filter(pl.col(s.PATH) == report["file"])
    assert mine.get_column(s.RET).to_list() == [1, 1], opens
    openats = frame.filter((pl.col(s.LAYER) == s.LAYER_SYSCALL) & (pl.col(s.OP) == "openat"))
    for event in mine.iter_rows(named=True):
        inside = openats.filter(pl.col(s.PARENT_TS) == event[s.TS])
        assert inside.get_column(s.PATH).to_list() == [report["file"]], inside
    failed = openats.filter(pl.col(s.PATH) == report["missing"])
    assert failed.get_column(s.ERRNO).to_list() == [2]
    raised = opens.filter(pl.col(s.TS) == failed.item(0, s.PARENT_TS))
    assert raised.get_column(s.RET).to_list() == [0], opens


@pytest.mark.kernel
def test_a_stack_repeated_10000_times_is_written_once_with_a_span_per_call(root_required, tmp_path):
    """10,000 calls of one function from one line, each with its own arguments and one read:
    one PS record for their stack, 10,000 reads naming it, and a span per call."""
    data = tmp_path / "data.bin"
    done = record_command(tmp_path / "trace", [PYTHON, str(WORKLOADS / "python_repeat.py"), str(data), "10000"])
    assert done.returncode == 0, done.stderr
    report = json_line(done.stdout, "calls")
    traces = sorted((tmp_path / "trace").glob("*.pfw.gz"))
    frame = load(traces, pids=[report["pid"]])
    reads = frame.filter((pl.col(s.OP) == "pread64") & (pl.col(s.PATH) == str(data)))
    assert reads.height == report["calls"]
    assert (reads.get_column(s.PY_FUNCTION).unique().to_list(), reads.get_column(s.PY_LINE).unique().to_list()) == (
        ["read_one"], [report["line"]])
    (stack_id,) = reads.get_column(s.PY_STACK).unique().to_list()
    described = records(traces, "PS").filter(pl.col("args").struct.field("stack") == stack_id)
    assert described.height == len(traces)  # once per trace file
    # Each read's parent is its own call's span: 10,000 distinct read_one spans, the innermost frame.
    calls = frame.filter((pl.col(s.LAYER) == s.LAYER_PYTHON) & pl.col(s.TS).is_in(reads.get_column(s.PARENT_TS).implode()))
    assert calls.height == reads.get_column(s.PARENT_TS).n_unique() == report["calls"]
    assert calls.select(s.OP, s.PY_FRAME, s.PY_LINE).unique().rows() == [("read_one", 0, report["line"])]
