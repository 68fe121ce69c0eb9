"""The capture process streams every record from the rings to the recorder, in order,
and drains what is left when asked to stop."""

from __future__ import annotations

import os

import numpy as np

from ioobserve import _core
from ioobserve.collect import capture as capture_module
from ioobserve.collect.backlog import BacklogLimits
from ioobserve.collect.capture import HEADER, CaptureProcess, decode, encode, ring_dtype
from ioobserve.collect.priority import DRAIN_BOOST, drain_priority
from ioobserve.data import events as ev
from tests.unit.fake_ring import SIZE, FakeRing, ring_blob


def _events(start: int, n: int) -> np.ndarray:
    batch = np.zeros(n, dtype=ev.EVENT)
    batch["ts_ns"] = np.arange(start, start + n)
    batch["op"] = ev.OP_CODES["read"]
    return batch


def test_message_round_trip():
    batch, aux = _events(0, 3), ring_blob([b"abc", b"", b"0123456789"])
    in_ring = np.zeros(3, ring_dtype(ev.EVENT))  # as the records lie in the ring, after their headers
    for name in ev.EVENT.names:
        in_ring[name] = batch[name]
    raw = b"".join(encode(in_ring.tobytes(), aux))
    got_events, got_aux = decode(raw[HEADER.size : HEADER.size + in_ring.nbytes], raw[HEADER.size + in_ring.nbytes :])
    assert got_events.tobytes() == in_ring.tobytes() and got_aux == aux
    assert _core.aux_split(got_aux) == ([b"abc", b"", b"0123456789"], b"", None)
    assert all((got_events[name] == batch[name]).all() for name in ev.EVENT.names)


def test_streams_everything_then_drains_on_stop():
    events_ring, aux_ring = FakeRing(), FakeRing()
    try:
        for record in _events(0, 100):  # 100 x 112 bytes fit the 16 KiB fake ring
            events_ring.put(record.tobytes())
        aux_ring.put(b"path-record")
        capture = CaptureProcess({"events": (events_ring.fd, SIZE), "aux": (aux_ring.fd, SIZE)}, 0.005, BacklogLimits(1 << 20))
        capture.go()
        seen, aux_seen = [], []
        batches = capture.batches()
        while len(seen) < 100:
            batch, aux = next(batches)
            seen.extend(batch["ts_ns"].tolist())
            aux_seen.extend(_core.aux_split(aux)[0])
        for record in _events(100, 40):  # arrives after the first drain, before the stop
            events_ring.put(record.tobytes())
        capture.stop()
        for batch, aux in batches:
            seen.extend(batch["ts_ns"].tolist())
            aux_seen.extend(_core.aux_split(aux)[0])
        capture.close()
        assert seen == list(range(140))
        assert aux_seen == [b"path-record"]
    finally:
        events_ring.close()
        aux_ring.close()


def test_the_rings_are_drained_in_chunks_in_order(monkeypatch):
    """The kernel gets ring space back chunk by chunk (DRAIN_RECORDS), and nothing is lost
    or reordered between chunks."""
    monkeypatch.setattr(capture_module, "DRAIN_RECORDS", 7)  # read by the forked child
    events_ring, aux_ring = FakeRing(), FakeRing()
    try:
        for record in _events(0, 100):
            events_ring.put(record.tobytes())
        capture = CaptureProcess({"events": (events_ring.fd, SIZE), "aux": (aux_ring.fd, SIZE)}, 0.005, BacklogLimits(1 << 20))
        capture.go()
        capture.stop()
        sizes, seen = [], []
        for batch, _ in capture.batches():
            sizes.append(len(batch))
            seen.extend(batch["ts_ns"].tolist())
        capture.close()
        assert seen == list(range(100))
        assert max(sizes) == 7
    finally:
        events_ring.close()
        aux_ring.close()


def test_the_drain_runs_above_the_jobs_priority():
    """In a child started niced, as the capture process is: DRAIN_BOOST above the original
    priority (root); without the privilege it stays as it was."""
    original = os.getpriority(os.PRIO_PROCESS, 0)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.setpriority(os.PRIO_PROCESS, 0, original + 5)  # the recorder runs niced, and starts it from there
        drain_priority(original)
        os.write(write, str(os.getpriority(os.PRIO_PROCESS, 0)).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    got = int(os.read(read, 16))
    os.close(read)
    os.close(write)
    assert got == (max(original - DRAIN_BOOST, -20) if os.geteuid() == 0 else min(original + 5, 19))
