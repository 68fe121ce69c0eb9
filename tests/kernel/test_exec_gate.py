"""The exec gate (ioobserve/probes/attach/exec_gate.py): a short job in a root whose libc and
interpreter no process maps when the recording starts, with no holder process, is recorded
exact from its first call; and the hold is one its parent's waitpid() and SIGCHLD handler
cannot see. Without the gate the stdio job below loses all 1000 of its fwrite calls (its libc
is probed ~20 ms after its first mapping, when it is done)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys

import polars as pl
import pytest

from ioobserve.data import schema as s
from ioobserve.trace.read.reader import load
from tests.conftest import ROOT
from tests.kernel.kernel_side import ran
from tests.kernel.library_checks import check_stdio_workload
from tests.kernel.python_checks import check_imports, check_shard_reads, reads_of
from tests.kernel.recorder import IOOBSERVE, STOP, json_line, record_command
from tests.roots import INTERPRETERS, WAYS
from tests.waiting import wait_until

WORKLOADS = ROOT / "tests" / "workloads"
PYTHON = INTERPRETERS["3.15"]


def _summary(done: subprocess.CompletedProcess) -> str:
    return " ".join(done.stdout.split())


def _held(done: subprocess.CompletedProcess) -> None:
    """The summary says the gate held an exec, and let none run on before its probes."""
    summary = _summary(done)
    assert "exec gate held" in summary and "ran on at the" not in summary, summary


def _line(stdout: str, key: str) -> dict:
    return next(json.loads(line) for line in stdout.splitlines() if line.startswith(f'{{"{key}"'))


def _record_stdio(side, job_root, way: str) -> dict:
    """tests/workloads/stdio_workload.c under wait_watch.c, both new to the root, recorded."""
    inside, host = job_root.scratch()
    for name in ("stdio_workload", "wait_watch"):
        subprocess.run(["cc", "-O2", "-o", str(host / name), str(WORKLOADS / f"{name}.c")], check=True)
    data = f"{inside}/records.txt"
    command = job_root.command(way, [f"{inside}/wait_watch", f"{inside}/stdio_workload", data])
    done = record_command(side.out / "trace", command, "--layers", "libc", "--precision", "ns")
    return ran(done) | {"data": job_root.traced_path(data, way)}


@pytest.mark.kernel
@pytest.mark.parametrize("way", [pytest.param("chroot", marks=pytest.mark.matrix), "pivot"])
def test_stdio_calls_of_a_short_job_in_a_new_root(job_root, kernel_side, way):
    """1000 fwrite calls through the root's libc, by a program done in a few ms, each in the
    trace; its parent (tests/workloads/wait_watch.c) sees only its exit: no stop, no continue."""
    recorded = kernel_side(_record_stdio, job_root, way)
    done = recorded.done()
    assert done.returncode == 0, done.stderr
    _held(done)
    watched = _line(done.stdout, "waited")
    assert watched["waited"] == ["exited 0"], watched
    assert watched["sigchld"]["stopped"] == watched["sigchld"]["continued"] == watched["sigcont_seen"] == 0, watched
    report = _line(done.stdout, "pid")
    frame = load(recorded.traces()).filter((pl.col(s.PID) == report["pid"]) & (pl.col(s.PATH) == recorded["data"]))
    check_stdio_workload(frame, report)


@pytest.mark.kernel
@pytest.mark.parametrize("way", WAYS)
def test_python_in_a_new_root_from_its_first_call(job_root, tmp_path, way):
    """A fresh CPython 3.15 of the root reading a dataset, no process of it running before:
    its imports (module loads, each holding its reads) and every read of the dataset, with
    the frame that made it, from the first."""
    inside, host = job_root.scratch()
    imports = job_root.copy_in(WORKLOADS / "python_imports.py", host)
    dataset = job_root.copy_in(WORKLOADS / "shard_dataset.py", host)
    (host / "both.sh").write_text(f"{PYTHON} {imports} {inside}/mods && exec {PYTHON} {dataset} {inside}/data spawn 2\n")
    done = record_command(tmp_path / "trace", job_root.command(way, ["/bin/sh", f"{inside}/both.sh"]))
    assert done.returncode == 0, done.stderr
    _held(done)
    traces = sorted((tmp_path / "trace").glob("*.pfw.gz"))
    events = load(traces)
    modules = json_line(done.stdout, "dir")
    check_imports(events.filter(pl.col(s.PID) == modules["pid"]), modules, lambda path: job_root.traced_path(path, way))
    report = json_line(done.stdout, "workers")
    files = [job_root.traced_path(path, way) for path in report["files"]]
    reads = reads_of(events).filter(pl.col(s.PATH).is_in(files))
    check_shard_reads(traces, reads, report, done.stdout + done.stderr)


@pytest.mark.kernel
def test_a_stopped_recorder_holds_no_exec(tmp_path):
    """Ctrl-Z (SIGTSTP) stops the recorder with its gate open: a program nobody exec'd
    before runs at once meanwhile; once continued, the recording goes on and ends cleanly."""
    fresh = tmp_path / "fresh_true"
    shutil.copy("/bin/true", fresh)  # an inode no ignore mark covers
    # The command is `cat`: it ends when the test closes the recorder's stdin, which it shares.
    recorder = subprocess.Popen([IOOBSERVE, "record", "-o", str(tmp_path / "trace"), *STOP, "--layers", "libc", "--", "cat"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                process_group=0)  # a group of its own, its parent outside: SIGTSTP stops it
    try:
        while "recording to" not in (line := recorder.stderr.readline()):
            assert line, "the recorder ended before it recorded"
        recorder.send_signal(signal.SIGTSTP)
        wait_until(lambda: _state(recorder.pid) == "T", what="the recorder to stop")
        assert subprocess.run([str(fresh)], timeout=30).returncode == 0
        recorder.send_signal(signal.SIGCONT)
        wait_until(lambda: _state(recorder.pid) != "T", what="the recorder to go on")
    finally:
        recorder.send_signal(signal.SIGCONT)
        out, err = recorder.communicate(input="", timeout=120)
    assert recorder.returncode == 0, err
    summary = " ".join(out.split())
    assert "stopped: command exited" in summary and "exec gate" in summary, summary


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0]


# In a process of its own: a gate whose preparing takes a second, and execs of fresh files by
# this same process (subprocess: a vfork, which holds the GIL until the child's exec, which
# the gate holds). Each exec goes on at the bound, and the report says each ran on.
BOUNDED = """
import json, shutil, subprocess, sys, tempfile, time
from ioobserve.probes.attach.exec_gate import ExecGate
gate = ExecGate(lambda pid, files: time.sleep(1) or True, bound_s=0.2)
assert gate.start() is None
took = []
for i in range(3):
    fresh = tempfile.mktemp()
    shutil.copy("/bin/true", fresh)
    start = time.monotonic()
    subprocess.run([fresh], check=True)
    took.append(time.monotonic() - start)
from tests.waiting import wait_until
# the slow side reads the keeper's answers once it is done preparing
wait_until(lambda: gate.report.held >= 3, "three held execs answered")
gate.stop()
print(json.dumps({"took": took, "ran_on": len(gate.report.ran_on), "held": gate.report.held,
                  "longest": gate.report.longest_s}))
"""


@pytest.mark.kernel
def test_an_exec_waits_the_bound_at_most_whatever_the_recorder_does(root_required):
    """Held by a gate whose recorder side is slow and whose own process vforks (its GIL held
    until the child's exec): each file exec'd goes on at 0.2 s (the program, then its ELF
    interpreter: two per exec here, the slow side never done with either), each reported."""
    done = subprocess.run([sys.executable, "-c", BOUNDED], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert all(0.15 < took < 1.0 for took in report["took"]), report
    assert report["ran_on"] == report["held"] >= 3 and 0.15 < report["longest"] < 0.5, report
