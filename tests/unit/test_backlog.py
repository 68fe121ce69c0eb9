"""The capture process's backlog keeps the stream's bytes in order whether they wait in
memory, in the spill file, or in memory behind a spill file that a full disk refused; the
spill file gives its space back as it is read; and it is made only on a local disk."""

from __future__ import annotations

import os

import pytest

from ioobserve.collect.backlog import Backlog, SpillFile, on_local_disk, open_spill, spill_directory

PIECE = 1000


def _pieces(n: int) -> list[bytes]:
    return [bytes([i % 251]) * PIECE for i in range(n)]


def _drain(backlog: Backlog) -> bytes:
    """Everything the backlog holds, through a pipe as the recorder would read it."""
    read, write = os.pipe()
    os.set_blocking(write, False)
    got = bytearray()
    try:
        while backlog:
            backlog.write_to(write)
            got += os.read(read, 1 << 20)
    finally:
        os.close(read)
        os.close(write)
    return bytes(got)


@pytest.fixture
def spill(tmp_path):
    directory = spill_directory([str(tmp_path), "/var/tmp"])
    assert directory, "a local disk for the spill file: the machines this runs on have one"
    spill = SpillFile(open_spill(directory))
    yield spill
    os.close(spill.fd)


def test_beyond_its_memory_part_the_backlog_spills_and_keeps_the_order(spill):
    backlog = Backlog(memory_bytes=5 * PIECE, spill=spill)
    pieces = _pieces(50)
    for piece in pieces:
        backlog.add(piece)
    assert backlog.size == 50 * PIECE and spill.size == 45 * PIECE  # five in memory, the rest in the file
    assert _drain(backlog) == b"".join(pieces)
    assert spill.peak == 45 * PIECE and spill.size == 0
    assert os.fstat(spill.fd).st_size == 0  # emptied once all read: it holds no disk space


def test_pieces_added_while_it_drains_come_after_the_spilled_ones(spill):
    backlog = Backlog(memory_bytes=2 * PIECE, spill=spill)
    first, later = _pieces(10), [b"x" * PIECE, b"y" * PIECE]
    for piece in first:
        backlog.add(piece)
    read, write = os.pipe()
    os.set_blocking(write, False)
    backlog.write_to(write)  # the pipe takes all: the spill is read back to the head
    for piece in later:  # in memory now, but after what the file still held
        backlog.add(piece)
    os.set_blocking(write, True)
    os.close(write)
    got = os.read(read, 1 << 20)
    os.close(read)
    assert got == b"".join(first) and _drain(backlog) == b"".join(later)


def test_the_space_read_back_is_given_back_before_the_file_is_empty(spill):
    for _ in range(64):
        spill.append(b"z" * (64 * 1024))
    spill.take(32 * 64 * 1024)  # half read
    allocated = os.fstat(spill.fd).st_blocks * 512
    assert allocated <= 33 * 64 * 1024, allocated  # the read half's blocks were punched out


def test_a_full_disk_keeps_the_rest_in_memory_in_order():
    full = os.open("/dev/full", os.O_RDWR)  # every write: ENOSPC
    try:
        backlog = Backlog(memory_bytes=2 * PIECE, spill=SpillFile(full))
        pieces = _pieces(20)
        for piece in pieces:
            backlog.add(piece)
        assert backlog.size == 20 * PIECE and backlog.spilled_peak == 0
        assert _drain(backlog) == b"".join(pieces)
    finally:
        os.close(full)


def test_without_a_spill_file_everything_waits_in_memory():
    backlog = Backlog(memory_bytes=PIECE, spill=None)
    pieces = _pieces(10)
    for piece in pieces:
        backlog.add(piece)
    assert backlog.size == 10 * PIECE and _drain(backlog) == b"".join(pieces)


def test_it_spills_only_to_a_local_disk(tmp_path):
    assert not on_local_disk("/proc") and not on_local_disk("/dev/shm")  # procfs, tmpfs
    assert spill_directory(["/proc", "/dev/shm"]) is None
    assert not on_local_disk(str(tmp_path / "missing"))
    local = spill_directory(["/dev/shm", str(tmp_path), "/var/tmp"])
    assert local in (str(tmp_path), "/var/tmp") and on_local_disk(local)
