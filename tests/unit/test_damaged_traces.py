"""Damaged traces: every intact gzip member still loads, and the damage is reported."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import zlib

import pytest

from ioobserve.trace.members import build_index, write_index, gzip_member
from ioobserve.trace.read.reader import TraceError, load


def _member(first: int, n: int = 10) -> bytes:
    lines = [
        {"id": i, "name": "read", "cat": "SYSCALL", "type": 12, "pid": 1, "tid": 1, "ts": i, "dur": 0, "ph": 1,
         "args": {"ret": 4096, "ts_ns": 1000 * i, "dur_ns": 5, "flags": 0}}
        for i in range(first, first + n)
    ]
    return gzip_member("".join(json.dumps(line) + "\n" for line in lines).encode())


def test_a_truncated_last_member_loses_only_itself(tmp_path):
    members = [_member(0), _member(10), _member(20)]
    path = tmp_path / "t.pfw.gz"
    data = b"".join(members)
    path.write_bytes(data[: len(data) - len(members[2]) // 2])  # killed mid-write
    damage = []
    frame = load(path, damage=damage)
    assert frame.height == 20
    assert len(damage) == 1 and damage[0].truncated_tail and damage[0].members_lost == 0
    assert "incomplete" in damage[0].describe()


def test_a_corrupt_middle_member_is_skipped(tmp_path):
    members = [_member(0), bytearray(_member(10)), _member(20)]
    members[1][12:40] = b"\xff" * 28  # garbage inside the deflate stream
    path = tmp_path / "t.pfw.gz"
    path.write_bytes(b"".join(bytes(m) for m in members))
    damage = []
    frame = load(path, damage=damage)
    assert sorted(frame["ts"].to_list()) == [1000 * i for i in list(range(10)) + list(range(20, 30))]
    assert damage[0].members_lost == 1 and not damage[0].truncated_tail


def test_an_intact_trace_reports_nothing(tmp_path):
    path = tmp_path / "t.pfw.gz"
    path.write_bytes(_member(0) + _member(10))
    damage = []
    assert load(path, damage=damage).height == 20 and damage == []


def test_not_a_trace_is_one_clear_error(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello\n")
    with pytest.raises(TraceError, match="not a gzip trace"):
        load(path)


def test_no_traces_is_one_clear_error():
    import ioobserve

    for call in (ioobserve.load, ioobserve.scan):
        with pytest.raises(TraceError, match="no traces were given"):
            call([])


def _bomb(text_bytes: int) -> bytes:
    """A gzip member of about text_bytes / 1000 bytes that inflates to `text_bytes` of newlines."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"\n" * (1 << 20)
    return b"".join([*(packer.compress(chunk) for _ in range(text_bytes >> 20)), packer.flush()])


# The peak from VmHWM: getrusage's ru_maxrss survives exec, so a child of a big pytest would
# report its parent's peak.
BOMB_LOAD = """
import re, sys
from ioobserve.trace.read.reader import load
damage = []
frame = load(sys.argv[1], damage=damage)
peak_kib = int(re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1))
print(frame.height, peak_kib >> 10, "|".join(damage[0].notes))
"""


@pytest.mark.parametrize("indexed", [False, True])
def test_a_compression_bomb_is_skipped_before_it_is_inflated(tmp_path, indexed):
    """1 MB of deflate that would inflate to 1 GiB: the members around it load, it is named as
    skipped, and the reader's peak memory stays far below what it would have taken."""
    bomb = _bomb(1 << 30)
    path = tmp_path / "t.pfw.gz"
    path.write_bytes(_member(0) + bomb + _member(10))
    if indexed:  # an index that lists the bomb as an ordinary member (a damaged or forged index)
        (first, last), _ = build_index(path)
        bomb_entry = dataclasses.replace(first, offset=first.size, size=len(bomb))
        write_index(path, [first, bomb_entry, dataclasses.replace(last, offset=first.size + len(bomb))])
    loaded = subprocess.run([sys.executable, "-c", BOMB_LOAD, str(path)], capture_output=True, text=True, check=True)
    events, peak_mib, notes = loaded.stdout.split(" ", 2)
    assert int(events) == 20
    assert int(peak_mib) < 400  # the bomb alone would take 1024 MiB
    assert f"member at byte {len(_member(0)):,}" in notes and "64 MiB" in notes
