"""`top` over a live capture: a workload started by the test shows up with its bytes, and the
parallel --record trace has every one of its calls."""

from __future__ import annotations

import asyncio
import sys

import polars as pl
import pytest

from ioobserve import schema as s
from ioobserve.cli.top import _live
from ioobserve.probes.capabilities import vfs_available
from ioobserve.trace.reader import load
from tests.conftest import ROOT
from tests.kernel.recorder import Workload, json_line

PATTERNS = str(ROOT / "tests" / "workloads" / "io_patterns.py")
MiB = 1 << 20


@pytest.mark.kernel
def test_live_top_shows_a_workload_and_records_all_of_it(root_required, tmp_path):
    from tui.app import make_app

    (tmp_path / "work").mkdir()
    workload = Workload([sys.executable, PATTERNS, "clean", str(tmp_path / "work")])
    # vfs: a layer this VM lacks (no kprobes, no fentry) is shown as unavailable; real nodes have it
    source = _live([workload.pid], None, None, None, None, None, "vfs", tmp_path / "trace")
    app = make_app(source)

    async def drive() -> dict:
        async with app.run_test(size=(120, 32)) as pilot:
            assert await asyncio.to_thread(source.ready.wait, 90) and source.error is None, source.error
            report = json_line(await asyncio.to_thread(workload.go), "mode")
            for _ in range(50):  # the next refreshes show it
                await pilot.pause(0.2)
                table = app.query_one("#processes-table")
                rows = [table.get_row_at(i) for i in range(table.row_count)]
                mine = [row for row in rows if row[0] == str(report["pid"])]
                if mine and mine[0][8] == "64.0 MiB":
                    break
            assert mine and (mine[0][8], mine[0][9]) == ("64.0 MiB", "64.0 MiB"), rows  # read, written since the start
            title = str(app.query_one("#title").render())
            if vfs_available()[0] is None:
                assert "vfs: unavailable" in title, title
            else:
                assert "vfs" not in source.unavailable and "unavailable" not in title
            await pilot.press("q")
        return report

    report = asyncio.run(drive())
    assert source.error is None and source.writer is not None
    trace = load(sorted((tmp_path / "trace").glob("*.pfw.gz")))
    calls = trace.filter((pl.col(s.PID) == report["pid"]) & (pl.col(s.LAYER) == s.LAYER_SYSCALL)
                         & pl.col(s.OP).is_in(["read", "write"]) & pl.col(s.PATH).str.starts_with(str(tmp_path / "work")))
    assert calls.height == report["calls"]  # nothing lost while the UI ran
    assert calls.get_column(s.BYTES).sum() == 128 * MiB
