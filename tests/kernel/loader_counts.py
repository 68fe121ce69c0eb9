"""The DataLoader-like workload (tests/workloads/loader.py) the ground-truth tests record: its
arguments, and its calls per process as it counts them itself and as a trace holds them."""

from __future__ import annotations

import polars as pl

from ioobserve.data import schema as s
from tests.conftest import ROOT

LOADER = str(ROOT / "tests" / "workloads" / "loader.py")
OPS = ("openat", "read", "close", "newfstatat", "rename", "unlink")  # the calls it counts
ARGS = ["--files", "12", "--size", str(256 * 1024), "--workers", "4", "--threads", "2", "--short", "3"]


def trace_counts(frame: pl.DataFrame, pid: int) -> dict:
    """A process's counted calls on the dataset's files in a trace, and the bytes it read of each."""
    mine = frame.filter((pl.col(s.PID) == pid) & pl.col(s.PATH).cast(pl.String).str.contains("/sample-"))
    counts = {op: mine.filter(pl.col(s.OP) == op).height for op in OPS}
    reads = mine.filter(pl.col(s.OP) == "read").group_by(s.PATH).agg(pl.col(s.BYTES).sum())
    counts["files"] = dict(reads.iter_rows())
    return counts


def expected_counts(report: dict) -> dict:
    """The same, as the workload's report counted them for the process."""
    return {op: report["counts"][op] for op in OPS} | {"files": report["counts"]["files"]}
