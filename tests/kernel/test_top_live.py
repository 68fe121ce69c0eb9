"""`top` over a live capture: a workload started by the test shows up with its bytes, and the
parallel --record trace has every one of its calls, also when the terminal hangs up."""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import threading

import polars as pl
import pytest

from ioobserve.cli.top import _live
from ioobserve.data import schema as s
from ioobserve.probes.capabilities import vfs_available
from ioobserve.trace.read.reader import load, own_records
from tests.conftest import ROOT
from tests.kernel.recorder import IOOBSERVE, Workload, json_line
from tests.waiting import wait_until, wait_until_async

PATTERNS = str(ROOT / "tests" / "workloads" / "io_patterns.py")
MiB = 1 << 20


@pytest.mark.kernel
def test_live_top_shows_a_workload_and_records_all_of_it(root_required, tmp_path):
    from ioobserve.tui.app import make_app

    (tmp_path / "work").mkdir()
    workload = Workload([sys.executable, PATTERNS, "clean", str(tmp_path / "work")])
    # vfs: a layer this VM lacks (no kprobes, no fentry) is shown as unavailable; real nodes have it
    source = _live([workload.pid], None, None, None, None, None, "vfs", tmp_path / "trace")
    app = make_app(source)

    async def drive() -> dict:
        async with app.run_test(size=(120, 32)) as pilot:
            await wait_until_async(lambda: source.ready.is_set() or source.outcome.error, "the live source's probes attached",
                                   timeout=90, pause=pilot.pause)
            assert source.outcome.error is None, source.outcome.error
            report = json_line(await asyncio.to_thread(workload.go), "mode")

            def mine() -> list:
                table = app.query_one("#processes-table")
                return [row for row in (table.get_row_at(i) for i in range(table.row_count)) if row[0] == str(report["pid"])]

            # read and written since the start: the next refreshes show all of it
            await wait_until_async(lambda: [(row[8], row[9]) for row in mine()] == [("64.0 MiB", "64.0 MiB")],
                                   lambda: f"the workload's row shows 64.0 MiB read and written (its row: {mine()})",
                                   pause=pilot.pause)
            title = str(app.query_one("#title").render())
            if vfs_available()[0] is None:
                assert "vfs: unavailable" in title, title
            else:
                assert "vfs" not in source.unavailable and "unavailable" not in title
            await pilot.press("q")
        return report

    report = asyncio.run(drive())
    (path,) = sorted((tmp_path / "trace").glob("*.pfw.gz"))
    assert source.outcome.error is None and source.outcome.writer.path == path
    trace = load([path])
    calls = trace.filter((pl.col(s.PID) == report["pid"]) & (pl.col(s.LAYER) == s.LAYER_SYSCALL)
                         & pl.col(s.OP).is_in(["read", "write"]) & pl.col(s.PATH).cat.starts_with(str(tmp_path / "work")))
    assert calls.height == report["calls"]  # nothing lost while the UI ran
    assert calls.get_column(s.BYTES).sum() == 128 * MiB


class _Terminal:
    """`ioobserve top ...` in a pseudo-terminal of 100x30, its screen output drained as it comes."""

    def __init__(self, *args: str):
        controller, terminal = pty.openpty()
        fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        self.proc = subprocess.Popen([IOOBSERVE, "top", *args], stdin=terminal, stdout=terminal, stderr=terminal,
                                     start_new_session=True, env={**os.environ, "TERM": "xterm-256color"})
        os.close(terminal)
        self.controller, self.output = controller, bytearray()
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.controller, 65536)
            except OSError:  # the last holder of the terminal closed it
                return
            if not chunk:
                return
            self.output += chunk

    def wait_for(self, text: bytes, what: str, timeout: float = 30) -> None:
        """Wait until the screen shows text (the test fails saying what never happened, or that top ended)."""
        wait_until(lambda: text in self.output or self.proc.poll() is not None,
                   lambda: f"{what} (screen so far: {bytes(self.output[-2000:])!r})", timeout)
        assert text in self.output, f"top exited ({self.proc.returncode}) before {what}: {bytes(self.output[-2000:])!r}"


@pytest.mark.kernel
@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGTERM])
def test_a_hangup_or_sigterm_closes_the_record_trace(root_required, tmp_path, signum):
    (tmp_path / "work").mkdir()
    workload = Workload([sys.executable, PATTERNS, "clean", str(tmp_path / "work")])
    screen = _Terminal("--pid", str(workload.pid), "--record", str(tmp_path / "trace"))
    try:
        screen.wait_for(b" live ", "top says it is live", timeout=90)
        report = json_line(workload.go(), "mode")
        # on screen; some of it may still be in the collector's and writer's queues
        screen.wait_for(b"64.0 MiB", "the workload's 64 MiB on screen")
        screen.proc.send_signal(signum)  # as the SSH session closing (SIGHUP) or a kill would
        assert screen.proc.wait(timeout=120) == 0
    finally:
        if screen.proc.poll() is None:
            screen.proc.kill()
        os.close(screen.controller)
    (trace,) = sorted((tmp_path / "trace").glob("*.pfw.gz"))
    (end,) = own_records(trace, "end")  # closed, not cut off
    calls = load([trace]).filter((pl.col(s.PID) == report["pid"]) & (pl.col(s.LAYER) == s.LAYER_SYSCALL)
                                 & pl.col(s.OP).is_in(["read", "write"]))
    assert calls.height == report["calls"] and end["args"]["lost_total"] == 0
