"""`record` and `serve` when the trace's disk fails for real (a tmpfs that fills, a FUSE file
system that is slow or hangs): the traced command runs untouched and keeps its exit status,
one warning line says what the trace misses, every event is on disk or counted, memory stays
bounded behind a slow disk, and a stop ends by its deadline behind a hung one."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import polars as pl
import pytest

from ioobserve.data import schema as s
from ioobserve.trace.members import build_index, read_index
from ioobserve.trace.read.reader import load, own_records
from tests.conftest import ROOT
from tests.kernel import programs
from tests.kernel.faulty_mounts import faulty_fs, small_tmpfs
from tests.kernel.recorder import IOOBSERVE, Recorder, wait_finished
from tests.waiting import wait_until

FLOOD = str(ROOT / "tests" / "workloads" / "flood.py")
STATUS = 3
WORKING_SET_MIB = 768  # what the recorder holds beyond its backlog: docs/recording.md, "When the disk fails, is slow, or hangs"
OUTPUT = bytes(range(256)) * 4096  # 1 MiB the command writes to its own file
# Writes OUTPUT, then reads it back in 64-byte preads N times, prints N and exits with STATUS.
COMMAND = f"""
import os, sys
n, out = int(sys.argv[1]), sys.argv[2]
with open(out, "wb") as handle:
    handle.write(bytes(range(256)) * 4096)
fd = os.open(out, os.O_RDONLY)
for i in range(n):
    os.pread(fd, 64, (i * 64) % (1 << 20))
os.close(fd)
print(n, flush=True)
sys.exit({STATUS})
"""


def _summary_number(stdout: str, row: str) -> int:
    """A number from the summary printed at the end ('events   12,345 (...)')."""
    found = re.search(rf"^{row}\s+([\d,]+)", stdout, re.M)
    assert found, f"no {row!r} row in the summary:\n{stdout}"
    return int(found.group(1).replace(",", ""))


def _run_recorder(*args: str) -> tuple[subprocess.Popen, set[int]]:
    """`ioobserve record ARGS` started, once its probes are attached; with their ids."""
    proc = subprocess.Popen([IOOBSERVE, "record", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    head = ""
    while "recording to" not in head:
        line = proc.stderr.readline()
        assert line, f"the recorder did not start: {head}{proc.stderr.read()}"
        head += line
    return proc, programs.held_by(proc.pid)


def _probes_gone(ids: set[int]) -> None:
    """None of these BPF programs is loaded any more (freed after an RCU grace period)."""
    assert ids, "the recorder held its probes while it ran"
    wait_until(lambda: not ids & programs.loaded().keys(), "the recorder's probes were unloaded")


@pytest.mark.kernel
def test_a_disk_that_fills_leaves_the_command_and_its_status_alone(root_required, tmp_path):
    calls = 400_000
    out = tmp_path / "command-output.bin"
    with small_tmpfs("2m") as disk:
        proc, ids = _run_recorder("-o", str(disk), "--stop-timeout", "300",  # the deadline is not what this tests
                                  "--", sys.executable, "-c", COMMAND, str(calls), str(out))
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == STATUS, stderr  # the command's own status, not the recorder's
        assert out.read_bytes() == OUTPUT and stdout.splitlines()[0] == str(calls)  # its work and output intact
        assert "Traceback" not in stderr, stderr
        warnings = [line for line in stderr.splitlines() if line.startswith("ioobserve: warning:")]
        assert "No space left on device (ENOSPC)" in warnings[0] and str(disk) in warnings[0], stderr
        final = re.fullmatch(r"ioobserve: warning: the trace misses ([\d,]+) events \(cannot write .*No space left "
                             r"on device \(ENOSPC\)\); it kept ([\d,]+) events in (\d+) files? \(.*\)", warnings[-1])
        assert final, warnings
        unwritten, kept = (int(final.group(i).replace(",", "")) for i in (1, 2))
        _probes_gone(ids)
        parts = sorted(disk.glob("*.pfw.gz"))
        wait_finished(disk)  # they may fail on the full disk: the parts stay as written
        damage = []
        trace = load(parts, damage=damage)
        assert not any(damage) and all(read_index(p) == build_index(p)[0] for p in parts)
        assert trace.height == kept > 0 and unwritten > 0
        assert kept + unwritten == _summary_number(stdout, "events")  # every event captured: on disk or counted
        assert _summary_number(stdout, "not written") == unwritten
        preads = trace.filter((pl.col(s.OP) == "pread64") & (pl.col(s.PATH) == str(out))).height
        assert 0 < preads < calls


def _rss_kib(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    found = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
    return int(found.group(1)) if found else 0


def _recorder_rss_kib(pid: int) -> int:
    """The recorder's resident memory: its own and its capture process's (not the traced command's)."""
    children = Path(f"/proc/{pid}/task/{pid}/children")
    kids = [int(k) for k in children.read_text().split()] if children.exists() else []
    ours = [k for k in kids if "ioobserve" in Path(f"/proc/{k}/cmdline").read_bytes().decode(errors="replace")]
    return _rss_kib(pid) + sum(_rss_kib(k) for k in ours)


def _sample_rss(proc: subprocess.Popen, samples: list[int]) -> None:
    """The recorder's memory, ten times a second until it exits."""
    while True:
        samples.append(_recorder_rss_kib(proc.pid))
        try:
            proc.wait(0.1)
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.mark.kernel
def test_a_slow_disk_bounds_memory_and_counts_the_loss(root_required, tmp_path):
    issued = 2_000_000
    backlog_mb = 16
    with faulty_fs("--write-delay-ms", "200") as disk:
        proc, _ = _run_recorder("-o", str(disk.point), "--backlog-mb", str(backlog_mb), "--stop-timeout", "300",
                                "--", sys.executable, FLOOD, str(issued), str(tmp_path / "f"))
        start_kib = _recorder_rss_kib(proc.pid)
        peak = [start_kib]
        sampler = threading.Thread(target=_sample_rss, args=(proc, peak), daemon=True)
        sampler.start()
        stdout, stderr = proc.communicate(timeout=900)
        sampler.join()
        assert proc.returncode == 0, stderr
        traces = sorted(disk.point.glob("*.pfw.gz"))
        received = load(traces).filter(pl.col(s.OP).is_in(["preadv", "preadv2"])).height
        (end,) = own_records(traces[-1], "end")
    lost = end["args"]["lost"].get("preadv", 0) + end["args"]["lost"].get("preadv2", 0)
    assert lost > 0, "the disk was slow enough for the backlog to fill"
    assert received + lost == issued  # nothing lost silently: dropped in the kernel and counted, or on disk
    assert "unwritten" not in end["args"]["lost"]
    # Memory: the backlog and the bounded hand-offs behind it (ioobserve.collect.collector, trace.writer:
    # WORKING_SET_MIB), whatever the number of events; 2 M events are a quarter of a GB as records alone.
    growth_mib = (max(peak) - start_kib) / 1024
    assert growth_mib < backlog_mb + WORKING_SET_MIB, f"the recorder grew by {growth_mib:.0f} MiB behind a slow disk"


@pytest.mark.kernel
def test_a_hung_disk_does_not_keep_a_stop_past_its_deadline(root_required, tmp_path):
    stop_timeout = 2.0
    with faulty_fs("--hang-after-bytes", str(64 << 10)) as disk:
        recorder = Recorder(disk.point, "--stop-timeout", str(stop_timeout))
        ids = programs.held_by(recorder.proc.pid)
        subprocess.run([sys.executable, FLOOD, "200000", str(tmp_path / "f")], check=True, capture_output=True)
        wait_until(lambda: _hung(recorder.proc.pid), "the writer stuck in the hung disk")
        started = time.monotonic()
        recorder.proc.send_signal(signal.SIGTERM)
        out, err = recorder.proc.communicate(timeout=120)
        took = time.monotonic() - started
        # The deadline bounds the flush; detaching, the summary and exiting come after it (a few
        # seconds on a loaded 2-core machine). Without the deadline this stop never ends.
        assert took < stop_timeout + 20, f"the stop took {took:.1f} s (deadline {stop_timeout:g} s)"
        assert recorder.proc.returncode == 3, err  # system-wide: the trace is incomplete
        assert "Traceback" not in err, err
        assert re.search(r"ioobserve: warning: the trace misses [\d,]+ events \(.*the stop deadline passed\)", err), err
        _probes_gone(ids)


def _hung(pid: int) -> bool:
    """A process of the recorder's (its disk process) waits in the kernel for the FUSE server:
    the hung write."""
    for member in _descendants(pid):
        for task in Path(f"/proc/{member}/task").glob("*"):
            try:
                if (task / "wchan").read_text() == "request_wait_answer":
                    return True
            except OSError:
                continue
    return False


def _descendants(pid: int) -> list[int]:
    """pid and every process below it."""
    found, todo = [], [pid]
    while todo:
        found.append(todo.pop())
        for children in Path(f"/proc/{found[-1]}/task").glob("*/children"):
            try:
                todo += [int(child) for child in children.read_text().split()]
            except OSError:
                continue
    return found
