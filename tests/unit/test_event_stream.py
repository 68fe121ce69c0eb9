"""The event socket's stream without a kernel: `ok streaming` is the first line and comes only
after the emit switch is on, batches follow it, and `top --attach` waits for it (or says what
the daemon answered instead)."""

from __future__ import annotations

import json
import socket
import threading
from collections import Counter

import pytest

from ioobserve.data.model import Process
from ioobserve.live import window_totals as ag
from ioobserve.live.attach import AttachedSource, AttachError
from ioobserve.serve.stream import EventStream, bind_socket
from tests.batches import Batches
from tests.unit.synthetic_traces import Proc, frame, io
from tests.waiting import wait_until

A = Proc(10, job="1")
BATCH = Batches()(frame([io(A, 10, 0, 5, "read", "/f", 3, 0, 100), io(A, 10, 10, 12, "write", "/g", 4, 0, 7)]))


@pytest.fixture
def stream(tmp_path):
    """A started EventStream on a socket in tmp_path; .switch records on_streaming's calls."""
    switch: list[bool] = []
    events = EventStream(bind_socket(tmp_path / "events.sock", None), lambda verb, job: "", switch.append)
    events.switch, events.path = switch, tmp_path / "events.sock"
    events.start()
    yield events
    events.stop()


def test_a_stream_is_answered_once_the_switch_is_on_then_gets_batches(stream):
    with socket.socket(socket.AF_UNIX) as client:
        client.settimeout(30)  # no answer fails the test rather than hanging it
        client.connect(str(stream.path))
        client.sendall(b"stream\n")
        lines = client.makefile("rb")
        assert lines.readline() == b"ok streaming\n"
        assert stream.switch == [True] and stream.streaming == 1  # both before the answer was sent
        stream.processes([Process(10, 1, "reader")])
        stream.events(*BATCH)
        batch = json.loads(lines.readline())
    assert (batch["seq"], batch["lost"]) == (1, 0)
    # Named from the batch's tables and the processes the collector announced.
    assert [(e["pid"], e["ppid"], e["comm"], e["op"], e["path"], e["job"], e["bytes"]) for e in batch["events"]] == [
        (10, 1, "reader", "read", "/f", "1", 100), (10, 1, "reader", "write", "/g", "1", 7)]


def test_attach_returns_once_streamed_to_and_reads_the_batches(stream):
    source = AttachedSource(stream.path)
    try:
        assert stream.switch == [True]  # events flow as soon as the source exists
        source.start()
        stream.events(*BATCH)
        got: Counter = Counter()

        def arrived() -> bool:
            got.update(source.snapshot().totals)  # each snapshot holds what came since the last
            return got[ag.OPS] >= 2

        wait_until(arrived, lambda: f"the batch's 2 calls in the attached source's totals ({got})")
        assert (got[ag.OPS], got[ag.READ_BYTES], got[ag.WRITE_BYTES], source.outcome.error) == (2, 100, 7, None)
    finally:
        source.stop()


def test_attach_says_what_the_daemon_answered_instead(tmp_path):
    path = tmp_path / "other.sock"
    server = bind_socket(path, None)

    def answer() -> None:
        conn, _ = server.accept()
        with conn:
            conn.makefile("rb").readline()
            conn.sendall(b"error: expected 'stream', 'start JOB' or 'stop JOB'\n")

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        with pytest.raises(AttachError, match="the daemon answered \"error: expected"):
            AttachedSource(path)
    finally:
        thread.join(timeout=30)
        server.close()
