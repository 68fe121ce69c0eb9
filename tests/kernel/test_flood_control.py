"""Flood control (flood_allows in ebpf_probes/core.bpf.c, ioobserve/collect/throttles.py): a
job flooding `record` or `serve` from one cgroup is held to its events-a-second limit, its
held-back events counted in the kernel and the throttle marked in the trace; a job in another
cgroup, running at the same time, loses nothing."""

from __future__ import annotations

import json
import subprocess

import polars as pl
import pytest

import ioobserve
from ioobserve.data import schema as s
from ioobserve.trace.read.reader import load, own_records
from tests.kernel.recorder import IOOBSERVE, record_command
from tests.kernel import flood_jobs
from tests.kernel.flood_jobs import EXACT_JOB, EXACT_READS, FLOOD_CALLS, FLOOD_JOB, LIMIT
from tests.kernel.scratch_cgroups import scratch_cgroups
from tests.kernel.serve_support import Service, metric_value


@pytest.mark.kernel
def test_a_flooding_job_is_throttled_and_marked_beside_an_exact_one(root_required, tmp_path):
    with scratch_cgroups(*flood_jobs.steps().values()) as base:
        command, flood_file, exact_file = flood_jobs.both_jobs(base, tmp_path)
        done = record_command(tmp_path / "trace", command, "--all", "--flood-limit", str(LIMIT), "--layers", "syscall")
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


@pytest.mark.kernel
def test_serve_holds_a_flooding_jobs_trace_back_and_still_counts_its_every_call(root_required, tmp_path):
    """`serve` recording both jobs: the flood's job trace is throttled and marked, the exact
    job's trace has every read, and /metrics counts every call of both (the kernel's
    aggregates are not throttled) and the events held back, per job."""
    with scratch_cgroups(*flood_jobs.steps().values()) as base:
        service = Service(tmp_path, "--flood-limit", str(LIMIT), "--layers", "syscall")
        try:
            for job in (FLOOD_JOB, EXACT_JOB):
                service.job("start", job)
            command, flood_file, exact_file = flood_jobs.both_jobs(base, tmp_path)
            done = subprocess.run(command, capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stderr
            metrics = service.metrics()  # the jobs' processes are gone: the kernel's counts are final
        finally:
            service.stop()
    report = json.loads(done.stdout)
    traces = {job: sorted((service.traces / f"job-{job}").glob("*.pfw.gz")) for job in (FLOOD_JOB, EXACT_JOB)}

    exact = load(traces[EXACT_JOB]).with_columns(pl.col(s.OP).cast(pl.String)).filter(pl.col(s.OP) == "pread64")
    mine = exact.filter((pl.col(s.PID) == report["exact_pid"]) & (pl.col(s.PATH) == str(exact_file)))
    assert mine.height == EXACT_READS
    assert ioobserve.throttles(traces[EXACT_JOB]).height == 0

    marked = ioobserve.throttles(traces[FLOOD_JOB])
    held_back = int(marked.get_column("dropped").sum())
    assert held_back > 0 and set(marked.get_column("job").to_list()) == {FLOOD_JOB}, marked
    events = load(traces[FLOOD_JOB]).with_columns(pl.col(s.OP).cast(pl.String))
    flood = events.filter(pl.col(s.OP).is_in(["preadv", "preadv2"]) & (pl.col(s.PATH) == str(flood_file)))
    others = events.height - flood.height
    assert 0 < flood.height < FLOOD_CALLS and FLOOD_CALLS <= flood.height + held_back <= FLOOD_CALLS + others + 1000

    preadv = sum(metric_value(metrics, "ioobserve_calls_total", job=FLOOD_JOB, layer="syscall", op=op) for op in ("preadv", "preadv2"))
    assert preadv == FLOOD_CALLS  # every call aggregated, held back from the trace or not
    # the job's trace, never throttled, has each call the aggregates count (Python's own start's too)
    assert metric_value(metrics, "ioobserve_calls_total", job=EXACT_JOB, layer="syscall", op="pread64") == exact.height
    assert metric_value(metrics, "ioobserve_throttled_events_total", job=FLOOD_JOB) == held_back
    assert metric_value(metrics, "ioobserve_throttled_events_total", job=EXACT_JOB) == 0
