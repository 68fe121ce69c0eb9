"""The capture process streams every record from the rings to the recorder, in order,
and drains what is left when asked to stop."""

from __future__ import annotations

import numpy as np

from ioobserve import events as ev
from ioobserve.collect.capture import CaptureProcess, decode, encode
from tests.unit.fake_ring import SIZE, FakeRing


def _events(start: int, n: int) -> np.ndarray:
    batch = np.zeros(n, dtype=ev.EVENT)
    batch["ts_ns"] = np.arange(start, start + n)
    batch["op"] = ev.OP_CODES["read"]
    return batch


def test_message_round_trip():
    batch, aux = _events(0, 3), [b"abc", b"", b"0123456789"]
    raw = encode(batch, aux)
    got_events, got_aux = decode(raw[16 : 16 + batch.nbytes], raw[16 + batch.nbytes :])
    assert got_events.tobytes() == batch.tobytes() and got_aux == aux


def test_streams_everything_then_drains_on_stop():
    events_ring, aux_ring = FakeRing(), FakeRing()
    try:
        for record in _events(0, 100):  # 100 x 112 bytes fit the 16 KiB fake ring
            events_ring.put(record.tobytes())
        aux_ring.put(b"path-record")
        capture = CaptureProcess({"events": (events_ring.fd, SIZE), "aux": (aux_ring.fd, SIZE)}, 0.005, 1 << 20)
        capture.go()
        seen, aux_seen = [], []
        batches = capture.batches()
        while len(seen) < 100:
            batch, aux = next(batches)
            seen.extend(batch["ts_ns"].tolist())
            aux_seen.extend(aux)
        for record in _events(100, 40):  # arrives after the first drain, before the stop
            events_ring.put(record.tobytes())
        capture.stop()
        for batch, aux in batches:
            seen.extend(batch["ts_ns"].tolist())
            aux_seen.extend(aux)
        capture.close()
        assert seen == list(range(140))
        assert aux_seen == [b"path-record"]
    finally:
        events_ring.close()
        aux_ring.close()
