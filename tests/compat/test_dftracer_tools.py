"""DFTracer's own tools read our traces, and we read traces DFTracer wrote.

The tools come from .venv-peers (ci/peers.sh, run by `make test`): dftracer-utils 0.0.14 and
dftracer 2.2.0. In CI they must be there; elsewhere the tests skip without them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import ioobserve
from ioobserve import events as ev
from ioobserve import schema as s
from ioobserve.context.processes import Process
from ioobserve.trace.writer import TraceWriter

PEERS = Path(__file__).resolve().parents[2] / ".venv-peers"
WORKLOAD = Path(__file__).with_name("known_io.py")


@pytest.fixture(scope="module")
def peers() -> Path:
    if not (PEERS / "bin" / "dftracer_validate").exists():
        if os.environ.get("CI"):
            pytest.fail(f"{PEERS} is missing: `make test` runs ci/peers.sh to create it")
        pytest.skip(f"{PEERS} is missing (run ci/peers.sh)")
    return PEERS


def _frame(n: int) -> pl.DataFrame:
    """n events over a few ops and files, including a rename and a failed call."""
    ops = ["openat", "read", "read", "pread64", "write", "close", "newfstatat"]
    rows = []
    for i in range(n):
        op = ops[i % len(ops)]
        rows.append((1_700_000_000_000_000_000 + 1_337 * i, 2_001 + i, 100 + i % 3, 100 + i % 3, op,
                     f"/data/file-{i % 5}.bin", None, 3, 4096, 4096, 0 if op != "pread64" else 8192,
                     ev.F_FILE, 2049, 1000 + i % 5))
    rows.append((1_700_000_000_100_000_000, 900, 100, 100, "rename", "/data/a", "/data/b", -1, 0, 0, -1, ev.F_NAME, 0, 0))
    rows.append((1_700_000_000_100_001_000, 500, 101, 101, "openat", "/data/missing", None, -1, -2, 0, -1, ev.F_NAME, 0, 0))
    frame = pl.DataFrame(rows, orient="row", schema={
        s.TS: pl.UInt64, s.DUR: pl.UInt64, s.PID: pl.UInt32, s.TID: pl.UInt32, s.OP: pl.String, s.PATH: pl.String,
        s.PATH2: pl.String, s.FD: pl.Int32, s.RET: pl.Int64, s.BYTES_REQ: pl.UInt64, s.OFFSET: pl.Int64,
        s.FLAGS: pl.UInt16, s.DEV: pl.UInt64, s.INO: pl.UInt64,
    })
    return frame.with_columns(
        pl.lit(1, pl.UInt32).alias(s.PPID), pl.lit(0, pl.UInt32).alias(s.UID), pl.lit("w").alias(s.COMM),
        pl.lit(s.LAYER_SYSCALL).alias(s.LAYER), pl.lit(7, pl.UInt64).alias(s.CGROUP), pl.lit(0, pl.UInt64).alias(s.ARG),
        pl.when(pl.col(s.RET) < 0).then(-pl.col(s.RET)).otherwise(0).cast(pl.Int32).alias(s.ERRNO),
        pl.lit(0, pl.UInt64).alias(s.BYTES), pl.lit(True).alias(s.COUNTED),
    )


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("ours")
    writer = TraceWriter(directory, "t.pfw.gz", {"command": ["w"]})
    writer.processes([Process(pid=p, ppid=1, comm="w", exe="/bin/w", cmdline=("w",)) for p in (100, 101, 102)])
    writer.events(_frame(3000))
    writer.lost(1_700_000_000_000_000_000, {"read": 2})
    writer.events(_frame(500))
    writer.close()
    return writer.path


def _tool(peers: Path, name: str, *args: str) -> str:
    done = subprocess.run([str(peers / "bin" / name), *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _own_records(trace: Path) -> int:
    """Our own ph=1 records (start, end, lost): DFTracer's tools count them as events too."""
    return sum(1 for line in subprocess.run(["zcat", str(trace)], capture_output=True, text=True).stdout.splitlines()
               if '"cat":"dftracer"' in line and '"ph":1' in line)


def test_dftracer_validate_passes(peers, trace):
    out = _tool(peers, "dftracer_validate", "--files", str(trace))
    assert "1 passed, 0 failed" in out


def test_event_count_matches_our_load(peers, trace, tmp_path):
    out = _tool(peers, "dftracer_event_count", "-d", str(trace.parent), "--index-dir", str(tmp_path))
    loaded = ioobserve.load(trace)
    assert loaded.height == 3504  # 3000 + 500 events, each batch with its rename and failed open
    assert int(out.split()[-1]) == loaded.height + _own_records(trace)


def test_view_group_by_name_matches_our_load(peers, trace, tmp_path):
    out = _tool(peers, "dftracer_view", "--files", str(trace), "--index-dir", str(tmp_path), "--group-by", "name",
                "--log-level", "off")
    theirs = {row["name"]: row["count"] for row in map(json.loads, filter(None, out.splitlines()))}
    ours = dict(ioobserve.load(trace).group_by(s.OP).len().iter_rows())
    for name in ("start", "end", "lost"):  # our own records, not I/O
        theirs.pop(name, None)
    assert theirs == ours


def test_we_load_a_trace_dftracer_wrote(peers, tmp_path):
    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir()
    out.mkdir()
    preload = sorted(peers.glob("lib/python3*/site-packages/dftracer/lib64/libdftracer_preload.so"))
    assert preload, "dftracer's preload library is missing from .venv-peers"
    env = dict(os.environ, DFTRACER_ENABLE="1", DFTRACER_INIT="PRELOAD", DFTRACER_INC_METADATA="1",
               DFTRACER_DATA_DIR=str(data), DFTRACER_LOG_FILE=str(out / "trace"), LD_PRELOAD=str(preload[0]))
    done = subprocess.run(["/usr/bin/python3", str(WORKLOAD), str(data)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    expected = json.loads(done.stdout.splitlines()[-1])
    frame = ioobserve.load(sorted(out.glob("*.pfw.gz")))
    mine = frame.filter(pl.col(s.PATH).str.starts_with(str(data)))
    reads = mine.filter(pl.col(s.OP) == "read")
    writes = mine.filter(pl.col(s.OP) == "write")
    assert reads.height == expected["reads"] and writes.height == expected["writes"]
    assert reads[s.BYTES].sum() == expected["bytes_read"] and writes[s.BYTES].sum() == expected["bytes_written"]
    assert set(mine[s.PATH].unique()) >= set(expected["files"])
    assert (mine[s.TS] % 1000 == 0).all() and mine[s.TS].min() > 1_600_000_000 * 10**9  # µs epoch, as ns
    assert mine[s.LAYER].unique().to_list() == ["POSIX"]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
