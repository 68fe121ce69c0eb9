"""The ring-buffer batch reader, over a memfd laid out like a BPF ring buffer mapping."""

from __future__ import annotations

import numpy as np
import pytest

from ioobserve import _core
from ioobserve.collect.capture import BUSY, DISCARD, RING_HEADER, RingReader

from tests.unit.fake_ring import SIZE, FakeRing, ring_record

RECORD = np.dtype([("a", "<u8"), ("b", "<u4"), ("c", "<u4")])  # 16 bytes -> stride 24


def payload(i: int) -> bytes:
    return np.array([(i, i * 2, i * 3)], dtype=RECORD).tobytes()


@pytest.fixture
def ring():
    fake = FakeRing()
    reader = RingReader(fake.fd, SIZE)
    yield fake, reader
    reader.close()
    fake.close()


def test_reads_a_batch_and_advances_the_consumer(ring):
    fake, reader = ring
    for i in range(100):
        fake.put(payload(i))
    batch = reader.read_fixed(RECORD)
    assert batch["a"].tolist() == list(range(100))
    assert batch["c"].tolist() == [3 * i for i in range(100)]
    assert reader.pending_bytes() == 0
    assert reader.read_fixed(RECORD).size == 0


def test_stops_at_a_record_still_being_written(ring):
    fake, reader = ring
    fake.put(payload(1))
    fake.put(payload(2), BUSY)
    fake.put(payload(3))
    assert reader.read_fixed(RECORD)["a"].tolist() == [1]
    assert reader.pending_bytes() == 2 * (RECORD.itemsize + RING_HEADER)


def test_skips_discarded_records(ring):
    fake, reader = ring
    fake.put(payload(1))
    fake.put(payload(2), DISCARD)
    fake.put(payload(3))
    assert reader.read_fixed(RECORD)["a"].tolist() == [1, 3]


def test_a_batch_that_wraps_around_the_end(ring):
    fake, reader = ring
    stride = RECORD.itemsize + RING_HEADER
    fake.set_consumer(SIZE - 2 * stride - 8)  # two records fit before the end, the third wraps
    for i in range(5):
        fake.put(payload(i))
    assert reader.read_fixed(RECORD)["a"].tolist() == list(range(5))


def test_variable_records(ring):
    fake, reader = ring
    fake.put(b"abc")
    fake.put(b"dropped", DISCARD)
    fake.put(b"0123456789")
    fake.put(b"not yet", BUSY)
    blob = reader.read_blob()
    assert blob == ring_record(b"abc") + ring_record(b"dropped", DISCARD) + ring_record(b"0123456789")
    assert _core.aux_split(blob) == ([b"abc", b"0123456789"], b"", None)
    assert reader.pending_bytes() == len(ring_record(b"not yet"))
