"""Flood control (flood_allows in ebpf_probes/emit.bpf.c, ioobserve/collect/throttles.py): a
job flooding the recorder from one cgroup is held to its events-a-second limit, its held-back
events counted in the kernel and the throttle marked in the trace; a job in another cgroup,
running at the same time, loses nothing."""

from __future__ import annotations

import json
import os
import subprocess

import polars as pl
import pytest

import ioobserve
from ioobserve import schema as s
from ioobserve.trace.reader import load, own_records
from tests.kernel.recorder import IOOBSERVE, record_command
from tests.kernel.scratch_cgroups import scratch_cgroups

FLOOD_JOB, EXACT_JOB = "9001", "9002"
STEP = "system.slice/node1_slurmstepd.scope/job_{job}/step_0/user/task_0"
LIMIT = 20_000  # events a second
FLOOD_CALLS = 200_000
# preadv calls as fast as Python makes them, once it has said it starts through a FIFO.
FLOOD = f"""
import os, sys
path, ready = sys.argv[1], sys.argv[2]
with open(path, "wb") as out:
    out.write(b"x" * 4096)
fd = os.open(path, os.O_RDONLY)
buf = bytearray(64)
with open(ready, "w") as fifo:
    fifo.write("go")
for _ in range({FLOOD_CALLS}):
    os.preadv(fd, [buf], 0)
"""
# Waits for the flood to be under way, then makes EXACT_READS reads of its own.
EXACT_READS = 3000
EXACT = f"""
import json, os, sys
ready, path = sys.argv[1], sys.argv[2]
with open(ready) as fifo:
    fifo.read()
with open(path, "wb") as out:
    out.write(b"y" * 4096)
fd = os.open(path, os.O_RDONLY)
for _ in range({EXACT_READS}):
    os.pread(fd, 64, 0)
os.close(fd)
print(json.dumps({{"exact_pid": os.getpid(), "reads": {EXACT_READS}}}), flush=True)
"""


@pytest.mark.kernel
def test_a_flooding_job_is_throttled_and_marked_beside_an_exact_one(root_required, tmp_path):
    steps = {job: STEP.format(job=job) for job in (FLOOD_JOB, EXACT_JOB)}
    with scratch_cgroups(*steps.values()) as base:
        flood_file, exact_file, ready = tmp_path / "flood.dat", tmp_path / "exact.dat", tmp_path / "ready"
        os.mkfifo(ready)
        # Each workload's shell moves itself into its job's cgroup, then execs Python.
        flood = f"echo $$ > {base / steps[FLOOD_JOB]}/cgroup.procs && exec python3 -c \"$0\" {flood_file} {ready}"
        exact = f"echo $$ > {base / steps[EXACT_JOB]}/cgroup.procs && exec python3 -c \"$0\" {ready} {exact_file}"
        script = f"sh -c '{flood}' \"$1\" & sh -c '{exact}' \"$2\"; wait"
        done = record_command(tmp_path / "trace", ["sh", "-c", script, "sh", FLOOD, EXACT], "--all",
                              "--flood-limit", str(LIMIT), "--layers", "syscall")
    assert done.returncode == 0, done.stderr
    traces = sorted((tmp_path / "trace").glob("*.pfw.gz"))
    events = load(traces).with_columns(pl.col(s.OP).cast(pl.String))
    report = json.loads(next(line for line in done.stdout.splitlines() if line.startswith('{"exact_pid"')))

    # The exact job: every read, though the other job flooded the same recording meanwhile.
    exact = events.filter((pl.col(s.PID) == report["exact_pid"]) & (pl.col(s.OP) == "pread64")
                          & (pl.col(s.PATH) == str(exact_file)))
    assert exact.height == EXACT_READS, events.filter(pl.col(s.PID) == report["exact_pid"]).group_by(s.OP, s.PATH).len()
    assert set(exact.get_column(s.JOB).unique().to_list()) == {EXACT_JOB}

    # The flood: held to the limit, the rest counted, and its throttle marked with that count.
    marked = ioobserve.throttles(traces)
    assert set(marked.get_column("job").to_list()) == {FLOOD_JOB}, marked
    held_back = int(marked.get_column("dropped").sum())
    flood = events.filter((pl.col(s.JOB) == FLOOD_JOB) & pl.col(s.OP).is_in(["preadv", "preadv2"]) & (pl.col(s.PATH) == str(flood_file)))
    assert 0 < flood.height < FLOOD_CALLS and held_back > 0
    # Every preadv is in the trace or among the held back (which may hold a few of its other calls too).
    others = events.filter(pl.col(s.JOB) == FLOOD_JOB).height - flood.height
    assert FLOOD_CALLS <= flood.height + held_back <= FLOOD_CALLS + others + 1000
    for row in marked.iter_rows(named=True):
        assert row["limit"] == LIMIT and row["end_ns"] >= row["start_ns"]
        # no more than the limit a second got out while it lasted (a second's first events may
        # be counted in the one before: some slack)
        inside = flood.filter(pl.col(s.TS) * 1000 >= row["start_ns"]).filter(pl.col(s.TS) * 1000 <= row["end_ns"]).height
        assert inside <= (row["end_ns"] - row["start_ns"]) / 1e9 * LIMIT * 1.2 + 2 * LIMIT
    end = own_records(traces[-1], "end")[-1]["args"]
    assert end["lost"].get("throttled") == held_back  # the kernel's two counts of it agree

    summary = " ".join(done.stdout.split())
    assert f"throttled job {FLOOD_JOB}" in summary and f"{held_back:,} events held back" in summary, summary
    analyzed = subprocess.run([IOOBSERVE, "analyze", *map(str, traces)], capture_output=True, text=True, timeout=300)
    assert analyzed.returncode == 0, analyzed.stderr
    assert f"Flood control held back {held_back:,} events" in " ".join(analyzed.stdout.split()), analyzed.stdout
