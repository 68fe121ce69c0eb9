"""Partials combine exactly: a trace analysed one member at a time gives the numbers of one
pass, and Dask tasks give the numbers of the local loop."""

from __future__ import annotations

import random

import pytest

from ioobserve.analysis import results as r
from ioobserve.analysis.engine import analyze_partial
from ioobserve.analysis.trace_partial import ChunkPlan, trace_partial
from tests.unit.synthetic_traces import Proc, io, write_trace

MAIN, WORKER_0, WORKER_1 = Proc(10, rank=0), Proc(11, ppid=10, rank=0, worker=0), Proc(12, ppid=10, rank=0, worker=1)
THREADS = [(MAIN, 10), (MAIN, 15), (WORKER_0, 11), (WORKER_1, 12)]
BATCHES, PER_BATCH = 12, 400
# Where chunk seams may shift a figure a little (see ioobserve.analysis.partial): busy time
# of a group whose threads overlap across a seam.
SEAM_SENSITIVE: set[str] = set()  # none: every figure is exact across seams


def _workload(seed: int = 7, threads=THREADS, files: int = 1) -> list[list[dict]]:
    """Batches of events in time order: each thread reads its file mostly in order (now and
    then jumping back), stats and opens, writes; threads overlap one another."""
    rng = random.Random(seed)
    clock = {tid: rng.uniform(0, 5) for _, tid in threads}
    offsets = {tid: 0 for _, tid in threads}
    events = []
    for _ in range(BATCHES * PER_BATCH):
        proc, tid = rng.choice(threads)
        start = clock[tid] + rng.uniform(0.5, 20)
        end = start + rng.uniform(0.5, 10)
        clock[tid] = end
        path = f"/data/{tid}-{rng.randrange(files)}.bin" if files > 1 else f"/data/{tid}.bin"
        choice = rng.random()
        if choice < 0.7:
            offsets[tid] = 0 if rng.random() < 0.05 else offsets[tid]
            size = rng.choice([4096, 65536, 1 << 20])
            events.append(io(proc, tid, start, end, "read", path, 3, offsets[tid], size))
            offsets[tid] += size
        elif choice < 0.8:
            events.append(io(proc, tid, start, end, "newfstatat", path))
        elif choice < 0.9:
            events.append(io(proc, tid, start, end, "openat", path, ret=3))
        else:
            events.append(io(proc, tid, start, end, "write", f"/out/{tid}.log", 4, rng.randrange(0, 1 << 20), 100))
    events.sort(key=lambda e: e["ts"])
    return [events[i:i + PER_BATCH] for i in range(0, len(events), PER_BATCH)]


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return write_trace(tmp_path_factory.mktemp("partials"), [MAIN, WORKER_0, WORKER_1], _workload())


def _tables(analysis: r.Analysis) -> dict:
    return r.as_dict(analysis)


def test_one_member_at_a_time_gives_the_numbers_of_one_pass(trace):
    whole = _tables(r.results(trace_partial(trace)))
    pieces = _tables(r.results(trace_partial(trace, plan=ChunkPlan(rows=PER_BATCH))))  # 12 chunks
    assert whole["overview"]["calls"] == BATCHES * PER_BATCH
    differing = {name for name in whole if whole[name] != pieces[name]}
    assert differing <= SEAM_SENSITIVE, differing
    for name in differing:  # within 1%: a handful of events lie at the 11 seams
        for a, b in zip(whole[name], pieces[name], strict=True):
            for key, value in a.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool) and value:
                    assert b[key] == pytest.approx(value, rel=0.01), (name, key)


def test_many_jobs_and_files_in_chunks_with_runs_on_disk_give_the_numbers_of_one_pass(tmp_path, monkeypatch):
    """Jobs 7 and 8 and processes outside any job, 40 files, intervals crossing the 11 seams;
    the chunked analysis's intervals written to files and merged in small blocks."""
    from ioobserve.analysis import spilled_runs as runs

    procs = [Proc(20, rank=0), Proc(21, ppid=20, rank=0, worker=0), Proc(30, rank=0, job="8"), Proc(40, job=None)]
    threads = [(procs[0], 20), (procs[0], 25), (procs[1], 21), (procs[2], 30), (procs[3], 40)]
    trace = write_trace(tmp_path, procs, _workload(seed=11, threads=threads, files=8))
    whole = _tables(r.results(trace_partial(trace)))
    monkeypatch.setattr(runs, "SPILL_ROWS", 500)
    monkeypatch.setattr(runs, "MERGE_BYTES", 256 * runs.ROW.itemsize)
    monkeypatch.setattr(runs, "MIN_BLOCK_ROWS", 64)
    pieces = _tables(r.results(trace_partial(trace, plan=ChunkPlan(rows=PER_BATCH))))
    assert sorted(row["job"] or "" for row in whole["jobs"]) == ["", "7", "8"]
    assert len(whole["overlap"]) == 3 and len(whole["files"]) == 40 + 5
    differing = {name for name in whole if whole[name] != pieces[name]}
    assert differing <= SEAM_SENSITIVE, differing


def test_dask_tasks_give_the_numbers_of_the_local_loop(trace, tmp_path):
    other = write_trace(tmp_path, [MAIN, WORKER_0], _workload(seed=8)[:3], name="node2.pfw.gz")
    local = _tables(r.results(analyze_partial([trace, other])))
    distributed = _tables(r.results(analyze_partial([trace, other], scheduler="local")))
    assert local == distributed
    assert local["overview"]["calls"] == (BATCHES + 3) * PER_BATCH


def test_the_workers_tree_of_combines_gives_the_numbers_of_the_local_loop(tmp_path, monkeypatch):
    """Nine traces: three hosts, each host's recording in three parts, jobs 7 and 8 on every
    host, read in chunks of PER_BATCH events: the Dask workers' combines (nine partials, then
    three, then one) give what the local loop gives."""
    import socket

    from ioobserve.analysis import distributed, engine

    def small_chunks(memory_mb=None):
        return ChunkPlan(rows=PER_BATCH)

    monkeypatch.setattr(engine, "chunk_plan", small_chunks)
    monkeypatch.setattr(distributed, "chunk_plan", small_chunks)  # the local cluster's workers are this process's threads
    traces = []
    for seed, host in enumerate(("n1", "n2", "n3")):
        monkeypatch.setattr(socket, "gethostname", lambda host=host: host)
        procs = [Proc(20, rank=seed), Proc(21, ppid=20, rank=seed, worker=0), Proc(30, rank=seed, job="8")]
        batches = _workload(seed=20 + seed, threads=[(procs[0], 20), (procs[1], 21), (procs[2], 30)], files=3)
        for part in range(3):
            traces.append(write_trace(tmp_path, procs, batches[part * 4:(part + 1) * 4], name=f"{host}-{part}.pfw.gz"))
    local = _tables(r.results(analyze_partial(traces)))
    tree = _tables(r.results(analyze_partial(traces, scheduler="local")))
    assert local["hosts"] == ["n1", "n2", "n3"] and local["overview"]["calls"] == 3 * BATCHES * PER_BATCH
    assert sorted(row["job"] for row in local["jobs"]) == ["7", "8"]
    assert local == tree


def test_nodes_keep_their_processes_and_a_job_spans_them(tmp_path, monkeypatch):
    """Two nodes' traces, the same pid on each: two processes, two ranks, one job whose busy
    time is the union across the nodes (times in µs: node1 [0,10) [20,30), node2 [5,15) [40,50))."""
    import socket

    from tests.unit.synthetic_traces import US

    traces = []
    for host, rank, spans in (("node1", 0, [(0, 10), (20, 30)]), ("node2", 1, [(5, 15), (40, 50)])):
        monkeypatch.setattr(socket, "gethostname", lambda host=host: host)
        proc = Proc(100, rank=rank)
        rows = [io(proc, 100, start, end, "read", "/shared/data.bin", 3, start * 4096, 4096) for start, end in spans]
        traces.append(write_trace(tmp_path, [proc], [rows], name=f"{host}.pfw.gz"))
    analysis = r.results(analyze_partial(traces))
    assert analysis.hosts == ["node1", "node2"]
    assert sorted(analysis.processes.select("host", "pid").rows()) == [("node1", 100), ("node2", 100)]
    assert sorted(analysis.ranks.get_column("rank").to_list()) == [0, 1]
    assert analysis.overview[r.IO_BUSY_NS] == 35 * US  # [0,15) [20,30) [40,50)
    # compute: node1 [10,20), node2 [15,40); I/O outside both: [0,10) and [40,50)
    assert analysis.overview[r.UNOVERLAPPED_NS] == 20 * US
    shared = analysis.files.row(0, named=True)
    assert (shared["path"], shared[r.PROCESSES]) == ("/shared/data.bin", 2)
