"""Fixtures for the compatibility tests: the peer tools' venv and a trace our writer made.

The peers come from .venv-peers (ci/peers.sh, run by `make test`): dftracer-utils 0.0.14,
dftracer 2.2.0, pyarrow and DuckDB. In CI they must be there; elsewhere the tests skip.
"""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pytest

from ioobserve.data import events as ev
from ioobserve.data import schema as s
from ioobserve.data.model import Frame, Stack
from ioobserve.data.model import Process
from ioobserve.python.spans import LEVELS_SCHEMA, PY_SAME, SpanBuilder
from ioobserve.trace.write.writer import TraceWriter
from tests.batches import Batches

PEERS = Path(__file__).resolve().parents[2] / ".venv-peers"


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
        pl.lit("/system.slice/w.service").alias(s.CGROUP_PATH), pl.lit(None, pl.String).alias(s.JOB),
        pl.lit(None, pl.String).alias(s.STEP), pl.lit(None, pl.Int32).alias(s.TASK), pl.lit("w.service").alias(s.UNIT),
        pl.lit(None, pl.String).alias(s.CONTAINER), pl.lit(None, pl.String).alias(s.POD),
        *(pl.lit(None, pl.String).alias(k) for k in (s.NAMESPACE, s.POD_NAME, s.CONTAINER_NAME)), pl.lit("root").alias(s.USER),
        *(pl.lit(None, dtype).alias(name) for name, dtype in s.PROCESS_CONTEXT_SCHEMA.items()),
        pl.lit(None, pl.UInt64).alias(s.PARENT_TS),
        # pid 100 reads from Python: stack 1, whose innermost frame is Loader.read
        pl.when(pl.col(s.PID) == 100).then(pl.lit(1, pl.UInt32)).alias(s.PY_STACK),
        pl.when(pl.col(s.PID) == 100).then(pl.lit(0, pl.UInt16)).alias(s.PY_FRAME),
        pl.when(pl.col(s.PID) == 100).then(pl.lit("Loader.read")).alias(s.PY_FUNCTION),
        pl.when(pl.col(s.PID) == 100).then(pl.lit("/w/loader.py")).alias(s.PY_FILE),
        pl.when(pl.col(s.PID) == 100).then(pl.lit(12, pl.Int32)).alias(s.PY_LINE),
        pl.lit(None, pl.String).alias(s.PY_MODULE), pl.lit(None, pl.String).alias(s.REQUEST_ID), pl.lit(None, pl.UInt16).alias(s.STATUS),
    ).select(list(s.EVENT_SCHEMA))


PY_STACKS = {1: Stack((Frame("Loader.read", "/w/loader.py", 12), Frame("<module>", "/w/main.py", 3)), False)}
LEVELS = pl.DataFrame([(1, 0, 2, "<module>", "/w/main.py", 3), (1, 1, 2, "Loader.read", "/w/loader.py", 12)],
                      schema=LEVELS_SCHEMA, orient="row")


def _as_recorded(frame: pl.DataFrame, spans: SpanBuilder) -> pl.DataFrame:
    """The frame with its Python spans, as the recorder makes them: pid 100's reads are all
    in one call of Loader.read (each shares both frames with the one before)."""
    same = pl.when(pl.col(s.PID) == 100).then(pl.lit(2, pl.UInt32)).alias(PY_SAME)
    events, ended = spans.add(frame.with_columns(same), LEVELS)
    return _with_context_columns(pl.concat([events, ended], how="diagonal_relaxed"))


def _with_context_columns(frame: pl.DataFrame) -> pl.DataFrame:
    missing = [pl.lit(None, dtype).alias(name) for name, dtype in s.EVENT_SCHEMA.items() if name not in frame.columns]
    return frame.with_columns(missing).select(list(s.EVENT_SCHEMA)).cast(s.EVENT_SCHEMA)


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("ours")
    writer = TraceWriter(directory, "t.pfw.gz", {"command": ["w"]})
    writer.processes([Process(pid=p, ppid=1, comm="w", exe="/bin/w", cmdline=("w",)) for p in (100, 101, 102)])
    spans, batches = SpanBuilder(), Batches()
    writer.events(*batches(_as_recorded(_frame(3000), spans), PY_STACKS))
    writer.lost(1_700_000_000_000_000_000, {"read": 2})
    writer.events(*batches(_as_recorded(_frame(500), spans)))
    writer.events(*batches(_with_context_columns(spans.close())))
    writer.close()
    return writer.path


