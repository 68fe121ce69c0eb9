"""The insights kernel workloads cannot easily show (workers of a rank, unaligned writes), on
written traces; and the silence of a clean one."""

from __future__ import annotations

from ioobserve.analysis.engine import analyze_partial
from ioobserve.analysis.insights import insights
from ioobserve.analysis.results import results
from ioobserve.data.model import Mount
from tests.unit.synthetic_traces import Proc, io, write_trace

MiB = 1 << 20
MAIN = Proc(10, rank=0)
WORKERS = [Proc(11 + i, ppid=10, rank=0, worker=i) for i in range(3)]


def _codes(tmp_path, procs, rows) -> dict[str, str]:
    found = insights(results(analyze_partial([write_trace(tmp_path, procs, [rows])])))
    return {insight.code: insight.detail for insight in found}


def test_imbalance_and_a_file_every_worker_reads(tmp_path):
    rows = []
    for worker in WORKERS:
        rows.append(io(worker, worker.pid, 0, 1000, "read", "/d/index.bin", 3, 0, 2 * MiB))
        busy_ms = 30 if worker.worker == 0 else 2  # worker 0 does 15 times the others' I/O
        rows.append(io(worker, worker.pid, 2000, 2000 + busy_ms * 1000, "read", f"/d/shard{worker.worker}.bin", 4, 0, 4 * MiB))
    codes = _codes(tmp_path, [MAIN, *WORKERS], rows)
    assert set(codes) == {"imbalance", "read-by-every-worker"}, codes
    assert "3 worker processes" in codes["read-by-every-worker"]


def test_unaligned_writes(tmp_path):
    rows = [io(MAIN, 10, i * 10, i * 10 + 5, "write", "/d/out.bin", 3, i * 4000, 4000) for i in range(1500)]
    codes = _codes(tmp_path, [MAIN], rows)
    assert set(codes) == {"tiny-writes", "small-io"}, codes
    assert "not aligned to 4 KiB" in codes["tiny-writes"]


def test_a_clean_trace_raises_nothing(tmp_path):
    rows = [io(MAIN, 10, i * 100, i * 100 + 50, "read", "/d/big.bin", 3, i * 4 * MiB, 4 * MiB) for i in range(64)]
    rows += [io(MAIN, 10, 10_000, 10_010, "openat", "/d/big.bin", ret=3), io(MAIN, 10, 10_020, 10_021, "close", "/d/big.bin")]
    assert _codes(tmp_path, [MAIN], rows) == {}


def test_imports_from_a_shared_file_system(tmp_path):
    lustre, local = Mount(100, "/lus", "lustre", 0, 100), Mount(200, "/", "ext4", 0, 200)
    rows = []
    for i in range(60):  # an environment on Lustre: each module stat'ed, opened, read
        for root, dev in (("/lus/env", 100), ("/usr/lib", 200)):
            path = f"{root}/lib/python3.11/site-packages/pkg/mod{i}.cpython-311.pyc"
            rows += [io(MAIN, 10, i * 10, i * 10 + 1, "newfstatat", path, dev=dev),
                     io(MAIN, 10, i * 10 + 2, i * 10 + 3, "openat", path, ret=3, dev=dev),
                     io(MAIN, 10, i * 10 + 4, i * 10 + 5, "read", path, 3, 0, 2048, dev=dev)]
    found = insights(results(analyze_partial([write_trace(tmp_path, [MAIN], [rows], mounts=[lustre, local])])))
    shared = [insight for insight in found if insight.code == "shared-fs-imports"]
    assert len(shared) == 1 and "60 code files" in shared[0].detail, found
    assert shared[0].evidence == ["/lus (lustre): 60 files, 180 calls"]
    only_local = insights(results(analyze_partial([write_trace(tmp_path, [MAIN], [rows], name="l.pfw.gz", mounts=[local])])))
    assert "shared-fs-imports" not in {insight.code for insight in only_local}
