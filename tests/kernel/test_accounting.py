"""The kernel's own accounting (taskstats, through pyroute2) set beside what was traced, for
processes whose read and write counts are known."""

from __future__ import annotations

import json
import sys

import polars as pl
import pytest

from ioobserve import accounting
from ioobserve.collect.accounting import CALL_SLACK, ROUNDING
from ioobserve.data import schema as s
from ioobserve.trace.read.reader import load
from tests.conftest import ROOT
from tests.kernel.recorder import record_command

WORKLOAD = ROOT / "tests" / "workloads" / "accounting_workload.py"
SCRIPT = f"""
import subprocess, sys
for args in (["files", {{path!r}}, "3000", "2000"], ["proc", "3000"]):
    sys.stdout.write(subprocess.run([sys.executable, {str(WORKLOAD)!r}, *args], capture_output=True, text=True, check=True).stdout)
"""


@pytest.mark.kernel
def test_traced_counts_agree_with_the_kernels_accounting(root_required, tmp_path):
    script = SCRIPT.format(path=str(tmp_path / "data.bin"))
    done = record_command(tmp_path / "trace", [sys.executable, "-c", script])
    assert done.returncode == 0, done.stderr
    files, proc = (json.loads(line) for line in done.stdout.splitlines() if line.startswith('{"pid"'))
    traces = sorted((tmp_path / "trace").glob("*.pfw.gz"))
    ts = {row["pid"]: row for row in accounting(traces).iter_rows(named=True)}
    assert {files["pid"], proc["pid"]} <= set(ts), "every exited process of the command has a TS record"

    mine = ts[files["pid"]]
    on_file = load(traces).filter((pl.col(s.PID) == files["pid"]) & (pl.col(s.PATH) == str(tmp_path / "data.bin")))
    assert (on_file.filter(pl.col(s.OP) == "pread64").height, on_file.filter(pl.col(s.OP) == "pwrite64").height) == (
        files["reads"], files["writes"])
    # besides, Python's start-up reads its modules (how many reads depends on the interpreter);
    # it writes to no other file (its report goes to a pipe, which is not traced)
    assert mine["traced_reads"] > files["reads"] and mine["traced_writes"] == files["writes"]
    for kernel, traced in (("read_syscalls", "traced_reads"), ("write_syscalls", "traced_writes")):
        # The kernel rounds down to 1024 and adds a few reads of its own at exec.
        assert mine[traced] - ROUNDING < mine[kernel] <= mine[traced] + CALL_SLACK, (kernel, mine)
    assert mine["agrees"] is True

    reader = ts[proc["pid"]]  # its /proc reads are not traced: the cross-check must say so
    assert reader["read_syscalls"] >= proc["reads"] - ROUNDING + 1 > reader["traced_reads"] + CALL_SLACK
    assert reader["agrees"] is False
    assert "differ from kernel accounting" in done.stdout and "1 differ" in done.stdout
