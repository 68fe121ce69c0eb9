"""Every summary metric of `analyze` on a small written trace whose answers are worked out by
hand below (times in µs after T0; one job, rank 0: process A with two threads, its worker B)."""

from __future__ import annotations

import polars as pl
import pytest

from ioobserve.analysis import results as r
from ioobserve.analysis.engine import analyze_partial
from ioobserve.analysis.trace_partial import Filters
from ioobserve.data import schema as s
from tests.unit.synthetic_traces import T0, US, Proc, io, write_trace

A = Proc(100, rank=0)
B = Proc(200, ppid=100, rank=0, worker=0)
ROWS = [
    io(A, 100, 0, 10, "read", "/d/a", 3, 0, 4096),  # first access of its fd at 0: consecutive
    io(A, 101, 5, 20, "read", "/d/b", 4, 0, 4096),  # the other thread, overlapping the first read
    io(A, 100, 30, 40, "read", "/d/a", 3, 4096, 4096),  # where the last one ended: consecutive
    io(A, 100, 50, 55, "read", "/d/a", 3, 0, 100),  # backwards: random; re-reads 100 bytes; unaligned size
    io(A, 100, 58, 59, "newfstatat", "/d/c"),
    io(A, 100, 60, 62, "openat", "/d/c", ret=5),  # right after a stat of the same path
    io(A, 100, 70, 80, "write", "/d/c", 5, 0, 10),
    io(B, 200, 25, 45, "read", "/d/a", 3, 8192, 2 << 20),  # first access of B's fd, beyond 0: sequential only
    io(B, 200, 90, 100, "pread64", "/d/a", 3, 0, 1024),  # backwards: random, re-read, unaligned
]
READ = 3 * 4096 + 100 + (2 << 20) + 1024


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return write_trace(tmp_path_factory.mktemp("metrics"), [A, B], [ROWS])


@pytest.fixture(scope="module")
def analysis(trace):
    return r.results(analyze_partial([trace]))


def test_totals_and_metadata_share(analysis):
    o = analysis.overview
    assert (o[r.CALLS], o[r.BYTES_READ], o[r.BYTES_WRITTEN]) == (9, READ, 10)
    assert o[r.TIME_NS] == 83 * US  # 10+15+10+5+1+2+10+20+10
    assert o[r.META_NS] == 3 * US and o["metadata_share"] == 3 / 83
    assert (o["read_calls"], o["write_calls"], o["processes"], o["files"]) == (6, 1, 2, 3)


def test_busy_time_is_the_union_and_bandwidth_is_bytes_over_it(analysis):
    o = analysis.overview
    # [0,20) [25,45) [50,55) [58,59) [60,62) [70,80) [90,100)
    assert o[r.IO_BUSY_NS] == 68 * US
    assert o[r.DATA_BUSY_NS] == 65 * US  # without the stat and the open
    assert o[r.BYTES_PER_S] == pytest.approx((READ + 10) / 65e-6)
    job = analysis.jobs.row(0, named=True)
    assert (job[s.JOB], job[r.IO_BUSY_NS], job[r.DATA_BUSY_NS]) == ("7", 68 * US, 65 * US)


def test_unoverlapped_io_is_io_no_thread_computed_beside(analysis):
    # compute = gaps between a thread's I/O: t100 [10,30) [40,50) [55,58) [59,60) [62,70); t200 [45,90)
    # I/O outside their union [10,30) + [40,90): [0,10) [30,40) [90,100)
    assert analysis.overview[r.UNOVERLAPPED_NS] == 30 * US
    assert analysis.overview[r.COMPUTE_NS] == 70 * US
    row = analysis.overlap.row(0, named=True)
    assert (row[s.LAYER], row[s.JOB], row[r.IO_BUSY_NS], row[r.UNOVERLAPPED_NS]) == (s.LAYER_SYSCALL, "7", 68 * US, 30 * US)


def test_per_process_busy_time_and_lifetime(analysis):
    rows = {row[s.PID]: row for row in analysis.processes.iter_rows(named=True)}
    assert rows[100][r.IO_BUSY_NS] == 48 * US  # its two threads' union
    assert rows[100][r.WALL_NS] == 80 * US and rows[100][r.IO_SHARE] == 48 / 80
    assert (rows[200][r.IO_BUSY_NS], rows[200][r.WALL_NS], rows[200][s.PPID], rows[200][s.WORKER]) == (30 * US, 75 * US, 100, 0)
    assert analysis.spawns.select("workers", "slots", "epochs").row(0) == (1, 1, 1)


def test_ranks_and_workers(analysis):
    rank = analysis.ranks.row(0, named=True)
    assert (rank[s.RANK], rank[r.CALLS], rank[r.IO_BUSY_NS]) == (0, 9, 68 * US)
    worker = analysis.workers.row(0, named=True)
    assert (worker[s.WORKER], worker[r.CALLS], worker[r.DATA_BUSY_NS], worker[r.BYTES_READ]) == (0, 2, 30 * US, (2 << 20) + 1024)


def test_access_sizes_in_darshan_buckets(analysis):
    sizes = analysis.sizes.select(pl.col("kind").cast(pl.String), pl.col("bucket").cast(pl.String), "count").rows()
    assert sizes == [("read", "0-100", 1), ("read", "100-1K", 1), ("read", "1K-10K", 3), ("read", "1M-4M", 1),
                     ("write", "0-100", 1)]


def test_access_patterns_per_descriptor(analysis):
    rows = {row[0]: row[1:] for row in analysis.patterns.with_columns(pl.col("kind").cast(pl.String)).rows()}
    assert rows["read"] == (3, 4, 2, 2)  # consecutive, sequential, random, unaligned
    assert rows["write"] == (1, 1, 0, 1)


def test_files_shared_and_reread(analysis):
    files = {row[s.PATH]: row for row in analysis.files.iter_rows(named=True)}
    assert files["/d/a"][r.PROCESSES] == 2 and files["/d/b"][r.PROCESSES] == 1
    # /d/a: [0, 8192) and [8192, 8192 + 2 MiB) read, 100 + 1024 bytes of them again
    assert (files["/d/a"][r.UNIQUE_BYTES_READ], files["/d/a"][r.REREAD_BYTES]) == (8192 + (2 << 20), 1124)
    assert analysis.opens.select("opens", "opens_after_stat").row(0) == (1, 1)


def test_filters_keep_a_process_tree_a_path_prefix_and_a_time_range(trace):
    only_b = r.results(analyze_partial([trace], Filters(pids=(200,)))).overview
    assert (only_b[r.CALLS], only_b[r.IO_BUSY_NS]) == (2, 30 * US)
    a_and_b = r.results(analyze_partial([trace], Filters(pids=(100,)))).overview
    assert a_and_b[r.CALLS] == 9  # B descends from A
    under_b = r.results(analyze_partial([trace], Filters(path_prefixes=("/d/b",)))).overview
    assert (under_b[r.CALLS], under_b[r.BYTES_READ]) == (1, 4096)


    window = r.results(analyze_partial([trace], Filters(start_ns=T0 + 50 * US, end_ns=T0 + 90 * US))).overview
    assert window[r.CALLS] == 4  # the events starting at 50, 58, 60, 70
    assert r.results(analyze_partial([trace], Filters(jobs=("8",)))).overview[r.CALLS] == 0
    assert r.results(analyze_partial([trace], Filters(jobs=("7",)))).overview[r.CALLS] == 9


def test_python_layer_overlap_from_the_calls_stacked_io_ran_in(tmp_path):
    """Python calls are the trace's innermost PYTHON spans (frame 0 of their stack; outer ones
    hold them and do not count): t100: [0,30) (two reads), [40,50), [60,70); t101: [0,5),
    [45,80). Busy [0,30) [40,80) = 70; compute (gaps between a thread's calls) [30,40)
    [50,60) [5,45) = [5,45) [50,60); uncovered: [0,5) [45,50) [60,80) = 30."""
    from ioobserve.data.model import Frame, Stack

    stacks = {1: Stack((Frame("Dataset.__getitem__", "/w/data.py", 42), Frame("<module>", "/w/train.py", 7)), False)}

    def call(tid: int, start: int, end: int) -> dict:
        return io(A, tid, start, end, "Dataset.__getitem__", stack=1, layer="PYTHON", py_frame=0)

    rows = [io(A, 100, 0, 10, "read", "/d/a", 3, 0, 4096, stack=1), io(A, 100, 20, 30, "read", "/d/a", 3, 4096, 4096, stack=1),
            io(A, 100, 40, 50, "read", "/d/a", 3, 8192, 4096, stack=1), io(A, 100, 60, 70, "read", "/d/a", 3, 0, 4096, stack=1),
            io(A, 101, 0, 5, "read", "/d/b", 4, 0, 4096, stack=1), io(A, 101, 45, 60, "read", "/d/b", 4, 4096, 4096, stack=1),
            io(A, 101, 70, 80, "read", "/d/b", 4, 8192, 4096, stack=1),
            call(100, 0, 30), call(100, 40, 50), call(100, 60, 70), call(101, 0, 5), call(101, 45, 80),
            io(A, 100, 0, 70, "<module>", stack=1, layer="PYTHON", py_frame=1)]
    overview = r.results(analyze_partial([write_trace(tmp_path, [A], [rows], stacks=stacks)])).overview
    assert (overview["python_io_busy_ns"], overview["python_compute_ns"], overview["python_unoverlapped_ns"]) == (
        70 * US, 50 * US, 30 * US)
