"""A memfd laid out like a BPF ring buffer's mapping, for tests without a kernel map."""

from __future__ import annotations

import mmap
import os
import struct

from ioobserve.collect.capture import PAGE

SIZE = 4 * PAGE


def ring_record(payload: bytes, flags: int = 0) -> bytes:
    """A record as it lies in a ring: its 8-byte header, then the payload, 8-byte aligned."""
    record = struct.pack("<II", len(payload) | flags, 0) + payload
    return record + b"\0" * (-len(record) % 8)


def ring_blob(payloads: list[bytes]) -> bytes:
    """Records as RingReader.read_blob gives them."""
    return b"".join(ring_record(payload) for payload in payloads)


class FakeRing:
    """Consumer page, producer page, then the data area twice (as the kernel maps it)."""

    def __init__(self):
        self.fd = os.memfd_create("ring")
        os.ftruncate(self.fd, 2 * PAGE + 2 * SIZE)
        self.map = mmap.mmap(self.fd, 2 * PAGE + 2 * SIZE)
        self.producer = 0

    def put(self, payload: bytes, flags: int = 0) -> None:
        record = ring_record(payload, flags)
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

    def close(self) -> None:
        self.map.close()
        os.close(self.fd)
