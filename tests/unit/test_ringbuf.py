"""The ring-buffer batch reader, over a memfd laid out like a BPF ring buffer mapping."""

from __future__ import annotations

import mmap
import os
import struct

import numpy as np
import pytest

from ioobserve.collect.ringbuf import BUSY, DISCARD, HEADER, PAGE, RingReader

RECORD = np.dtype([("a", "<u8"), ("b", "<u4"), ("c", "<u4")])  # 16 bytes -> stride 24
SIZE = 4 * PAGE


class FakeRing:
    """Consumer page, producer page, then the data area twice (as the kernel maps it)."""

    def __init__(self):
        self.fd = os.memfd_create("ring")
        os.ftruncate(self.fd, 2 * PAGE + 2 * SIZE)
        self.map = mmap.mmap(self.fd, 2 * PAGE + 2 * SIZE)
        self.producer = 0

    def put(self, payload: bytes, flags: int = 0) -> None:
        record = struct.pack("<II", len(payload) | flags, 0) + payload
        record += b"\0" * (-len(record) % 8)
        for copy in (0, SIZE):  # mirror the double mapping
            start = 2 * PAGE + copy + (self.producer % SIZE)
            end = start + len(record)
            limit = 2 * PAGE + 2 * SIZE
            self.map[start : min(end, limit)] = record[: min(end, limit) - start]
            if end > limit:  # wrapped past the second copy: continues at the first
                self.map[2 * PAGE : 2 * PAGE + end - limit] = record[limit - start :]
        self.producer += len(record)
        self.map[PAGE : PAGE + 8] = struct.pack("<Q", self.producer)

    def set_consumer(self, pos: int) -> None:
        self.map[0:8] = struct.pack("<Q", pos)
        self.producer = pos
        self.map[PAGE : PAGE + 8] = struct.pack("<Q", pos)


def payload(i: int) -> bytes:
    return np.array([(i, i * 2, i * 3)], dtype=RECORD).tobytes()


@pytest.fixture
def ring():
    fake = FakeRing()
    reader = RingReader(fake.fd, SIZE)
    yield fake, reader
    reader.close()
    fake.map.close()
    os.close(fake.fd)


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
    assert reader.pending_bytes() == 2 * (RECORD.itemsize + HEADER)


def test_skips_discarded_records(ring):
    fake, reader = ring
    fake.put(payload(1))
    fake.put(payload(2), DISCARD)
    fake.put(payload(3))
    assert reader.read_fixed(RECORD)["a"].tolist() == [1, 3]


def test_a_batch_that_wraps_around_the_end(ring):
    fake, reader = ring
    stride = RECORD.itemsize + HEADER
    fake.set_consumer(SIZE - 2 * stride - 8)  # two records fit before the end, the third wraps
    for i in range(5):
        fake.put(payload(i))
    assert reader.read_fixed(RECORD)["a"].tolist() == list(range(5))


def test_variable_records(ring):
    fake, reader = ring
    fake.put(b"abc")
    fake.put(b"dropped", DISCARD)
    fake.put(b"0123456789")
    assert reader.read_records() == [b"abc", b"0123456789"]
    assert reader.pending_bytes() == 0
