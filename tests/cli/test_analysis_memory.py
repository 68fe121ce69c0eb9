"""`analyze --memory` holds: on traces of 1 M and 8 M events of sparse I/O (so that their busy
intervals go to disk), the analysis stays near the bound whatever the trace's size, building
the copy on the first run stays under a fixed ceiling (it holds a member's events at a time),
and the numbers are those of an analysis with memory to spare."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import polars as pl

from ioobserve.data import schema as s
from ioobserve.data.model import Process
from ioobserve.trace.write.writer import TraceWriter
from tests.batches import Batches
from tests.unit.synthetic_traces import Proc, frame, io, private_dir

IOOBSERVE = str(Path(sys.executable).with_name("ioobserve"))
PROCS = [Proc(100 + i, rank=i % 2, job=("7", "8")[i % 2]) for i in range(6)]
BASE_EVENTS = 40_000
BOUND_MB = 300
SLACK = 1.2  # the bound is an aim: chunk sizes follow from it
BUILD_CEILING_MB = 600  # building the copy: a member's events (tens of thousands) in flight, whatever the trace


def _base() -> pl.DataFrame:
    """Each process reads its own files now and then (gaps between calls: an interval each)."""
    rng = random.Random(5)
    clock = {proc.pid: 0.0 for proc in PROCS}
    rows = []
    for _ in range(BASE_EVENTS):
        proc = rng.choice(PROCS)
        start = clock[proc.pid] + rng.uniform(5, 50)
        clock[proc.pid] = start + rng.uniform(1, 5)
        rows.append(io(proc, proc.pid, start, clock[proc.pid], "read", f"/data/{proc.pid}/{rng.randrange(50)}", 3,
                       rng.randrange(1 << 20) * 4096, 4096))
    return frame(rows)


def _big_trace(directory: Path, base: pl.DataFrame, copies: int) -> Path:
    """Copies of the base, each after the last (as bench/trace_io.py repeats a recording)."""
    span = int(base[s.TS].max() - base[s.TS].min()) + 1_000_000
    writer = TraceWriter(directory, f"big-{copies}.pfw.gz", {"command": ["synthetic"]})
    writer.processes([Process(pid=p.pid, ppid=1, comm="python3", exe="/usr/bin/python3", cmdline=("python3",))
                      for p in PROCS])
    batches = Batches()
    for copy in range(copies):
        shifted = base.with_columns(pl.col(s.TS) + copy * span)
        for offset in range(0, shifted.height, 1 << 16):
            writer.events(*batches(shifted.slice(offset, 1 << 16)))
    writer.close()
    return writer.path


def _peak_run(*args: str, env: dict | None = None) -> tuple[float, subprocess.CompletedProcess]:
    """Run ioobserve alone under a wrapper: its peak RSS in MiB, and how it ended."""
    wrapper = ("import resource, subprocess, sys, json; r = subprocess.run(sys.argv[1:], capture_output=True, text=True);"
               "print(json.dumps({'mb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 'rc': r.returncode,"
               "'out': r.stdout, 'err': r.stderr}))")
    done = subprocess.run([sys.executable, "-c", wrapper, IOOBSERVE, *args], capture_output=True, text=True, check=True,
                          timeout=900, env=env)
    found = json.loads(done.stdout)
    return found["mb"], subprocess.CompletedProcess(args, found["rc"], found["out"], found["err"])


def test_analyze_stays_near_its_memory_bound_whatever_the_trace_size(tmp_path):
    base, directory = _base(), private_dir(tmp_path)
    scratch = tmp_path / "tmp"  # where the runs go: nothing is left there after
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch)}
    peaks = {}
    for copies in (25, 200):  # 1 M and 8 M events
        trace = _big_trace(directory, base, copies)
        cold_mb, cold = _peak_run("analyze", "--json", "--memory", str(BOUND_MB), str(trace), env=env)  # builds the copy
        warm_mb, warm = _peak_run("analyze", "--json", "--memory", str(BOUND_MB), str(trace), env=env)
        assert cold.returncode == 0 and warm.returncode == 0, cold.stderr + warm.stderr
        assert json.loads(warm.stdout) == json.loads(cold.stdout)
        assert json.loads(warm.stdout)["overview"]["calls"] == BASE_EVENTS * copies
        assert cold_mb <= BUILD_CEILING_MB, f"{copies}: the first run's peak {cold_mb:.0f} MiB"
        assert warm_mb <= BOUND_MB * SLACK, f"{copies}: peak {warm_mb:.0f} MiB for --memory {BOUND_MB}"
        peaks[copies] = warm_mb
        assert not list(scratch.iterdir()), "the runs on disk are removed"
    loaded_mb = base.estimated_size() * 200 / 2**20  # the big trace as `load` holds it (Categorical labels)
    assert loaded_mb > 2.5 * BOUND_MB, f"the big trace must be many times the bound: {loaded_mb:.0f} MiB"
    assert peaks[200] <= peaks[25] * 1.15, f"peak grew with the trace: {peaks}"
    _, spare = _peak_run("analyze", "--json", "--memory", "4000", str(trace))  # one chunk per reducer
    assert json.loads(spare.stdout) == json.loads(warm.stdout)
