"""The live aggregates behind `top`: windows, totals since the start, the bound on processes
kept, and a replay's snapshots against sums worked out from the events directly."""

from __future__ import annotations

import random

import polars as pl

from ioobserve.data import schema as s
from ioobserve.live import source as source_module
from ioobserve.live import window_totals as ag
from ioobserve.live.source import ReplaySource
from ioobserve.live.window_totals import WindowAggregator
from tests.unit.synthetic_traces import T0, Proc, frame, io

A, B = Proc(10, job="1"), Proc(20, job="2")
NS = 1_000_000_000


def test_windows_sum_their_own_batches_and_totals_run_on():
    aggregator = WindowAggregator(T0)
    aggregator.add(frame([io(A, 10, 0, 5, "read", "/f", 3, 0, 100), io(B, 20, 1, 2, "write", "/g", 3, 0, 7)]))
    aggregator.add(frame([io(A, 10, 10, 30, "read", "/f", 3, 100, 50), io(A, 10, 40, 41, "stat", "/f")]))
    aggregator.lost(3)
    first = aggregator.take(T0 + NS)
    assert first.totals == {ag.OPS: 4, ag.METADATA_OPS: 1, ag.READ_BYTES: 150, ag.WRITE_BYTES: 7,
                            ag.TIME_NS: 5_000 + 1_000 + 20_000 + 1_000, "lost": 3}
    a = first.processes.filter(pl.col(s.PID) == 10).row(0, named=True)
    assert (a[ag.OPS], a[ag.READ_BYTES], a[ag.MAX_NS], a[ag.LAST_NS], a["total_read_bytes"]) == (3, 150, 20_000, T0 + 40_000, 150)
    assert first.files.filter(pl.col(s.PATH) == "/f").get_column(ag.OPS).to_list() == [3]
    assert first.events.height == 4 and first.history["lost"] == [3.0]

    aggregator.add(frame([io(B, 20, NS // 1000 + 5, NS // 1000 + 6, "write", "/g", 3, 7, 9)]))
    second = aggregator.take(T0 + 2 * NS)
    assert second.totals[ag.OPS] == 1 and second.totals["lost"] == 0
    by_pid = {row[s.PID]: row for row in second.processes.iter_rows(named=True)}
    assert (by_pid[10][ag.OPS], by_pid[10][f"total_{ag.OPS}"]) == (0, 3)  # quiet in this window, still listed
    assert (by_pid[20][ag.WRITE_BYTES], by_pid[20]["total_write_bytes"]) == (9, 16)
    assert second.history["write_bps"] == [7.0, 9.0]


def test_the_stream_keeps_the_most_recent_rows():
    aggregator = WindowAggregator(T0)
    for batch in range(4):
        aggregator.add(frame([io(A, 10, batch * 1000 + i, batch * 1000 + i + 1, "read", "/f", 3, 0, 1) for i in range(200)]))
    events = aggregator.take(T0 + NS).events
    assert events.height == ag.STREAM_ROWS
    assert events.get_column(s.TS).max() == T0 + (3 * 1000 + 199) * 1000


def test_processes_kept_are_bounded_by_the_most_recently_seen(monkeypatch):
    monkeypatch.setattr(ag, "MAX_PROCESSES", 3)
    aggregator = WindowAggregator(T0)
    for pid in range(1, 6):  # pid 5 seen last
        aggregator.add(frame([io(Proc(pid), pid, pid * 10, pid * 10 + 1, "read", "/f", 3, 0, 1)]))
        aggregator.take(T0 + pid * NS)
    assert sorted(aggregator.take(T0 + 9 * NS).processes.get_column(s.PID).to_list()) == [3, 4, 5]


def test_replay_snapshots_match_sums_from_the_events():
    rng = random.Random(7)
    procs = [Proc(pid, job=str(pid % 3)) for pid in range(100, 110)]
    rows = []
    for _ in range(3000):
        proc, start = rng.choice(procs), rng.uniform(0, 9.5e6)  # µs: over 9.5 s
        rows.append(io(proc, proc.pid, start, start + rng.uniform(1, 500), rng.choice(["read", "write", "stat"]), "/f", 3, 0,
                       rng.randrange(1, 1 << 16)))
    events = frame(rows)
    replay = ReplaySource(events)
    for cursor in [T0 + 1, T0 + NS, T0 + 1_234_567_891, T0 + 5 * NS, T0 + 9_999_999_999]:
        replay.cursor_ns = cursor
        snap = replay.snapshot()
        before = events.filter(pl.col(s.TS) < cursor)
        window = before.filter(pl.col(s.TS) >= max(T0, cursor - NS))
        assert snap.totals[ag.OPS] == window.height
        assert snap.totals[ag.READ_BYTES] == window.filter(pl.col(s.OP) == "read").get_column(s.BYTES).sum()
        expected = before.group_by(s.PID).agg(pl.len().alias(f"total_{ag.OPS}"), pl.col(s.BYTES).filter(pl.col(s.OP) == "write")
                                              .sum().alias("total_write_bytes"))
        got = snap.processes.select(s.PID, f"total_{ag.OPS}", "total_write_bytes")
        assert got.sort(s.PID).equals(expected.sort(s.PID).cast(got.schema)), cursor
        assert sum(snap.history["iops"]) == before.filter(pl.col(s.TS) >= max(T0, cursor - ag.HISTORY * NS)).height


def test_replay_history_is_whole_seconds_of_calls_up_to_the_cursor(monkeypatch):
    monkeypatch.setattr(source_module, "HISTORY", 3)
    rng = random.Random(8)
    rows = [io(Proc(100), 100, start, start + 1, "read", "/f", 3, 0, 1) for start in sorted(rng.uniform(0, 9.5e6) for _ in range(2000))]
    events = frame(rows)
    replay = ReplaySource(events)
    for k in (1, 2, 5, 9):
        replay.cursor_ns = replay.first_ns + k * NS
        seconds = [events.filter(pl.col(s.TS).is_between(replay.first_ns + at * NS, replay.first_ns + (at + 1) * NS, closed="left")).height
                   for at in range(max(0, k - 3), k)]
        assert replay.snapshot().history["iops"] == seconds, k


def test_the_network_tab_sums_bytes_per_peer_and_requests_on_connections_to_it():
    from ioobserve.tui.views import View, network_rows

    client = "tcp:10.0.0.2:40000->10.0.0.9:443"
    events = frame([
        io(A, 10, 0, 5, "read", client, 4, size=1000, layer=s.LAYER_NET),
        io(A, 10, 6, 8, "write", client, 4, size=300, layer=s.LAYER_NET),
        io(B, 20, 1, 2, "read", "udp:0.0.0.0:5353", 5, size=40, layer=s.LAYER_NET),
        io(A, 10, 0, 9, "GetObject", "https://s3.local/b/k", 4, size=1000, layer=s.LAYER_HTTP),
        io(A, 10, 10, 12, "GetObject", "https://s3.local/b/k", 4, size=1000, layer=s.LAYER_HTTP),
        io(A, 10, 13, 14, "HeadObject", "https://s3.local/b/k", 4, layer=s.LAYER_HTTP),
        io(A, 10, 0, 5, "read", "/f", 3, 0, 100),  # a file: not the network's
    ]).with_columns(pl.when(pl.col(s.LAYER) == s.LAYER_HTTP).then(pl.lit(client)).alias(s.PATH2))
    aggregator = WindowAggregator(T0)
    aggregator.add(events)
    snap = aggregator.take(T0 + NS)
    rows = {(row[ag.PEER], row[ag.REQUEST_OP]): row for row in snap.network.iter_rows(named=True)}
    net = rows["10.0.0.9:443", None]  # the socket calls, under no request operation
    assert (net[ag.RECEIVED], net[ag.SENT], net[ag.NET_CALLS], net[ag.REQUESTS]) == (1000, 300, 2, 0)
    gets = rows["10.0.0.9:443", "GetObject"]
    assert (gets[ag.NET_CALLS], gets[ag.REQUESTS], gets[ag.REQUEST_NS]) == (0, 2, 11000)
    assert rows["10.0.0.9:443", "HeadObject"][ag.REQUESTS] == 1
    assert rows["udp:0.0.0.0:5353", None][ag.RECEIVED] == 40  # not connected: its own end
    shown = network_rows(snap, View())
    assert [row[0] for row in shown] == ["10.0.0.9:443", "udp:0.0.0.0:5353"]
    assert shown[0][1] == "1" and shown[0][5] == "3" and shown[0][6] != "-"  # one process; 3 requests a second, their mean latency
    assert shown[0][7] == "GetObject 2, HeadObject 1" and shown[1][7] == "-"
    assert network_rows(snap, View(text="5353"))[0][0] == "udp:0.0.0.0:5353"
