"""`top` driven by keys over a replayed trace (Textual's Pilot, each test in its own event
loop), and snapshots of its screens."""

from __future__ import annotations

import asyncio
import time

import pytest

from ioobserve.data import schema as s
from ioobserve.live.source import ReplaySource
from tests.unit.synthetic_traces import T0, Proc, io, write_trace
from ioobserve.tui.app import make_app
from ioobserve.tui.screens import HelpScreen

MAIN, WORKER = Proc(100, rank=0, job="7"), Proc(200, ppid=100, rank=0, worker=0, job="7")
OTHER = Proc(300, job="8")
MiB = 1 << 20


def _rows() -> list[dict]:
    """Within the first second: job 7's main process writes a lot, its worker reads often in
    small pieces; job 8's process reads one big file once (and again at 3 s)."""
    rows = [io(MAIN, 100, 1000 + i * 100, 1000 + i * 100 + 50, "write", "/d/out.bin", 3, i * MiB, MiB) for i in range(8)]
    rows += [io(WORKER, 200, 2000 + i * 10, 2000 + i * 10 + 5, "read", "/d/small.bin", 4, i * 4096, 4096) for i in range(400)]
    rows += [io(OTHER, 300, 9000, 19000, "read", "/d/big.bin", 5, 0, 4 * MiB)]
    rows += [io(OTHER, 300, 3_000_000, 3_010_000, "read", "/d/big.bin", 5, 0, 4 * MiB)]
    return rows


@pytest.fixture
def source(tmp_path, monkeypatch) -> ReplaySource:
    monkeypatch.setenv("TZ", "UTC")  # the title shows the cursor's local time: the same in every snapshot
    time.tzset()
    replay = ReplaySource.from_traces([write_trace(tmp_path, [MAIN, WORKER, OTHER], [_rows()])])
    replay.cursor_ns = T0 + 1_000_000_000  # the window holding every event
    return replay


CLIENT = "tcp:10.0.0.2:40000->10.0.0.9:443"


def _network_rows() -> list[dict]:
    """The first second again, with --layers tls's events: job 7's main process fetches an object
    over a connection to 10.0.0.9:443 (its reads, writes and an S3 GetObject); job 8's process
    answers DNS on a socket with no peer."""
    rows = _rows()
    rows += [io(MAIN, 100, 3000 + i * 100, 3000 + i * 100 + 60, "read", CLIENT, 6, size=64 * 1024, layer=s.LAYER_NET)
             for i in range(16)]
    rows += [io(MAIN, 100, 2990, 2995, "write", CLIENT, 6, size=300, layer=s.LAYER_NET)]
    rows += [io(MAIN, 100, 2990, 4600, "GetObject", "https://s3.local/b/shard-0.tar", 6, 0, MiB, layer=s.LAYER_HTTP,
                path2=CLIENT)]
    rows += [io(OTHER, 300, 5000 + i * 1000, 5000 + i * 1000 + 4, "recvfrom", "udp:0.0.0.0:5353", 7, size=40,
                layer=s.LAYER_NET) for i in range(5)]
    return rows


@pytest.fixture
def network_source(tmp_path, monkeypatch) -> ReplaySource:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    replay = ReplaySource.from_traces([write_trace(tmp_path, [MAIN, WORKER, OTHER], [_network_rows()])])
    replay.cursor_ns = T0 + 1_000_000_000
    return replay


def _column(app, table: str, index: int = 0) -> list[str]:
    grid = app.query_one(f"#{table}-table")
    return [str(grid.get_row_at(row)[index]) for row in range(grid.row_count)]


def _app(source: ReplaySource, theme: str = "dark"):
    """The app as the tests drive it: no refresh timer, so the screen depends only on the keys."""
    return make_app(source, theme, refresh_s=None)


def _shows_cursor(app) -> bool:
    """The screen shows the snapshot at the replay's cursor and no snapshot is being taken."""
    return (app.snapshot is not None and app.snapshot.end_ns == app.source.cursor_ns
            and not any(worker.is_running for worker in app.workers))


async def _settled(pilot, deadline_s: float = 30.0) -> None:
    """Wait until the app shows what its replay's cursor says (see _shows_cursor)."""
    deadline = time.monotonic() + deadline_s
    while not _shows_cursor(pilot.app):
        if time.monotonic() > deadline:
            raise AssertionError(f"the app never showed the snapshot at the replay's cursor within {deadline_s:g} s")
        await pilot.pause()


def test_processes_sorted_three_ways(source):
    asyncio.run(_processes_sorted_three_ways(source))


async def _processes_sorted_three_ways(source):
    app = _app(source)
    async with app.run_test(size=(120, 32)) as pilot:
        await _settled(pilot)
        assert _column(app, "processes") == ["100", "300", "200"]  # bandwidth: 8 MiB, 4 MiB, 1.6 MiB
        await pilot.press("s")
        assert _column(app, "processes") == ["200", "100", "300"]  # IOPS: 400, 8, 1
        await pilot.press("s")
        assert _column(app, "processes") == ["300", "100", "200"]  # latency: 10 ms, 50 µs, 5 µs
        assert "sort: latency" in str(app.query_one("#title").render())


def test_filter_as_you_type_and_escape(source):
    asyncio.run(_filter_as_you_type_and_escape(source))


async def _filter_as_you_type_and_escape(source):
    app = _app(source)
    async with app.run_test(size=(120, 32)) as pilot:
        await _settled(pilot)
        await pilot.press("3", "slash", *"small")
        assert _column(app, "files") == ["/d/small.bin"]
        await pilot.press("escape")
        assert sorted(_column(app, "files")) == ["/d/big.bin", "/d/out.bin", "/d/small.bin"]


def test_drill_down_job_process_file_and_back(source):
    asyncio.run(_drill_down_job_process_file_and_back(source))


async def _drill_down_job_process_file_and_back(source):
    app = _app(source)
    async with app.run_test(size=(120, 32)) as pilot:
        await _settled(pilot)
        await pilot.press("1")
        assert _column(app, "jobs") == ["7", "8"]
        app.query_one("#jobs-table").focus()
        await pilot.press("enter")  # job 7
        assert app.query_one("#tabs").active == "processes" and sorted(_column(app, "processes")) == ["100", "200"]
        app.query_one("#processes-table").focus()
        await pilot.press("down", "enter")  # its second-busiest process: the worker
        assert app.query_one("#tabs").active == "files" and _column(app, "files") == ["/d/small.bin"]
        assert "job 7 › pid 200" in str(app.query_one("#title").render())
        app.query_one("#files-table").focus()
        await pilot.press("enter")
        assert app.query_one("#tabs").active == "events" and set(_column(app, "events", 4)) == {"/d/small.bin"}
        await pilot.press("escape", "escape")  # the path filter, then the process
        assert sorted(_column(app, "processes")) == ["100", "200"]
        await pilot.press("escape")  # out of the job: back to the jobs
        assert app.query_one("#tabs").active == "jobs" and "view: all" in str(app.query_one("#title").render())
        await pilot.press("2")
        assert sorted(_column(app, "processes")) == ["100", "200", "300"]


def test_pause_replay_cursor_and_help(source):
    asyncio.run(_pause_replay_cursor_and_help(source))


async def _pause_replay_cursor_and_help(source):
    app = _app(source)
    async with app.run_test(size=(120, 32)) as pilot:
        await _settled(pilot)
        await pilot.press("p")
        assert "PAUSED" in str(app.query_one("#title").render())
        before = source.cursor_ns
        await pilot.press("right")
        await _settled(pilot)
        assert source.cursor_ns == before + 1_000_000_000  # [1 s, 2 s): nothing happened
        assert _column(app, "processes", 4) == ["0 B/s"] * 3 and _column(app, "processes", 8)[0] != "0 B"
        assert app.focused is not None  # the table, which has home and end of its own
        await pilot.press("end")
        await _settled(pilot)
        assert source.cursor_ns == source.last_ns
        await pilot.press("home")
        await _settled(pilot)
        assert source.cursor_ns == source.first_ns
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


def test_too_small_a_terminal_says_so(source):
    asyncio.run(_too_small_a_terminal_says_so(source))


async def _too_small_a_terminal_says_so(source):
    app = _app(source)
    async with app.run_test(size=(50, 12)) as pilot:
        await _settled(pilot)
        assert app.query_one("#too-small").display and not app.query_one("#tabs").display
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert not app.query_one("#too-small").display and app.query_one("#tabs").display
        await pilot.resize_terminal(59, 24)
        await pilot.pause()
        assert app.query_one("#too-small").display
        await pilot.press("q")  # keys still work
        assert app.return_code == 0 and not app.is_running


def test_main_screen_snapshot(source, snap_compare):
    assert snap_compare(_app(source), terminal_size=(100, 30), run_before=_settled)


async def _help_shown(pilot) -> None:
    await _settled(pilot)
    await pilot.press("question_mark")
    deadline = time.monotonic() + 30
    while not isinstance(pilot.app.screen, HelpScreen):
        assert time.monotonic() < deadline, "the help screen never opened"
        await pilot.pause()


def test_help_snapshot(source, snap_compare):
    assert snap_compare(_app(source), terminal_size=(100, 30), run_before=_help_shown)


def test_light_theme_at_80x24_snapshot(source, snap_compare):
    assert snap_compare(_app(source, theme="light"), terminal_size=(80, 24), run_before=_settled)


def test_the_mouse_switches_tabs_and_drills_down(source):
    asyncio.run(_the_mouse_switches_tabs_and_drills_down(source))


async def _the_mouse_switches_tabs_and_drills_down(source):
    app = _app(source)
    async with app.run_test(size=(120, 32)) as pilot:
        await _settled(pilot)
        assert await pilot.click("#tabs Tab#--content-tab-jobs")
        assert app.query_one("#tabs").active == "jobs"
        assert await pilot.click("#jobs-table", offset=(2, 2), times=2)  # the second row: job 8
        assert app.query_one("#tabs").active == "processes" and _column(app, "processes") == ["300"]


def test_the_network_tab_shows_peers_and_follows_the_focused_process(network_source):
    asyncio.run(_the_network_tab_shows_peers_and_follows_the_focused_process(network_source))


async def _the_network_tab_shows_peers_and_follows_the_focused_process(source):
    app = _app(source)
    async with app.run_test(size=(120, 32)) as pilot:
        await _settled(pilot)
        await pilot.press("6")
        assert app.query_one("#tabs").active == "network"
        assert _column(app, "network") == ["10.0.0.9:443", "udp:0.0.0.0:5353"]  # most bytes first
        fetched = app.query_one("#network-table").get_row_at(0)
        assert [str(cell) for cell in fetched[1:]] == ["1", "1.0 MiB/s", "300 B/s", "17", "1.0", "1.6 ms", "GetObject 1.0"]
        await pilot.press("2")
        app.query_one("#processes-table").focus()
        await pilot.press(*["down"] * _column(app, "processes").index("300"), "enter")  # job 8's: its files
        await pilot.press("6")  # and its peers
        assert _column(app, "network") == ["udp:0.0.0.0:5353"]
        assert [str(cell) for cell in app.query_one("#network-table").get_row_at(0)[2:5]] == ["200 B/s", "0 B/s", "5.0"]


async def _network_shown(pilot) -> None:
    await _settled(pilot)
    await pilot.press("6")


def test_network_tab_snapshot(network_source, snap_compare):
    assert snap_compare(_app(network_source), terminal_size=(100, 30), run_before=_network_shown)
