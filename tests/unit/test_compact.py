"""Finishing a closed trace: recompressed into fewer, larger members that say the same, with
an index equal to one rebuilt from the file; left alone when it changed meanwhile or has a
damaged member; finished in the background with its copy (recompressed first only when the
writer hurried), the mark gone when done."""

from __future__ import annotations

import os
import stat

import pytest

from ioobserve.analysis.provenance import ENTITY, provenance_records
from ioobserve.trace.members import build_index, index_path, inflate_member, read_index
from ioobserve.trace.read.columnar import valid_copy
from ioobserve.trace.read.reader import load, own_records
from ioobserve.trace.write import compact as compact_module
from ioobserve.trace.write.compact import compact
from ioobserve.trace.write.finish import finish_later, mark_path
from tests.unit.synthetic_traces import Proc, io, private_dir, write_trace
from tests.waiting import wait_until

PROCS = [Proc(10, rank=0), Proc(11, ppid=10, rank=0, worker=0)]


def _batches(count: int = 40, per: int = 30) -> list[list[dict]]:
    rows = [io(PROCS[i % 2], 10 + i % 2, i * 10, i * 10 + 4, ("read", "openat", "newfstatat")[i % 3], f"/d/{i % 7}", 3,
               i * 512, 512, ret=None if i % 3 == 0 else 3 if i % 3 == 1 else 0) for i in range(count * per)]
    return [rows[i:i + per] for i in range(0, len(rows), per)]


@pytest.fixture
def trace(tmp_path):
    return write_trace(private_dir(tmp_path), PROCS, _batches())


def test_compacting_merges_members_and_keeps_every_line(trace, tmp_path):
    before = (load(trace), read_index(trace), trace.stat().st_size, own_records(trace, "end"))
    assert compact(trace)
    entries = read_index(trace)
    assert len(entries) < len(before[1]) // 10, "fewer, larger members"
    assert trace.stat().st_size < before[2]
    assert entries == build_index(trace)[0], "the index says what a rebuilt one says"
    assert sum(e.events for e in entries) == sum(e.events for e in before[1]) == 1200
    assert load(trace).equals(before[0])
    assert own_records(trace, "end") == before[3]
    for made in (trace, index_path(trace)):
        assert stat.S_IMODE(made.stat().st_mode) == 0o600
    assert [p.name for p in trace.parent.iterdir() if p.name.startswith(".ioo-")] == [], "no temp file left"


def test_groups_are_cut_only_at_seams_in_time(trace, monkeypatch):
    monkeypatch.setattr(compact_module, "GROUP_BYTES", 1)  # cut wherever a seam allows
    assert compact(trace)
    events = [e for e in read_index(trace) if e.events]
    assert len(events) > 1
    for earlier, later in zip(events, events[1:]):
        assert later.ts_min >= earlier.ts_max or later.offset - earlier.offset == earlier.size


def test_a_trace_that_changed_or_is_damaged_is_left_as_it_is(trace, monkeypatch):
    original = trace.read_bytes()
    real_write = compact_module._write

    def write_then_touch(path, data, entries):
        written = real_write(path, data, entries)
        mtime = trace.stat().st_mtime_ns
        os.utime(trace, ns=(mtime, mtime + 1))  # as a writer appending meanwhile would
        return written

    monkeypatch.setattr(compact_module, "_write", write_then_touch)
    assert not compact(trace)
    assert trace.read_bytes() == original
    monkeypatch.undo()
    damaged = bytearray(original)
    entry = read_index(trace)[3]
    damaged[entry.offset + entry.size // 2] ^= 0xFF
    trace.write_bytes(bytes(damaged))
    assert not compact(trace)
    assert trace.read_bytes() == bytes(damaged)
    assert [p.name for p in trace.parent.iterdir() if p.name.startswith(".ioo-")] == []


@pytest.mark.parametrize("recompress", [True, False])
def test_the_background_finisher_copies_recompresses_if_asked_then_removes_its_mark(trace, recompress):
    expected, original = load(trace), trace.read_bytes()
    for made in trace.parent.glob("*.parquet*"):
        made.unlink()
    assert finish_later(trace, recompress=recompress) is not None
    assert mark_path(trace).exists()
    # The finisher removes its mark last; it runs niced, so a loaded machine makes it slow.
    wait_until(lambda: not mark_path(trace).exists(), "the finisher done with the trace", timeout=600)
    if recompress:
        assert trace.stat().st_size < len(original)
    else:  # left as written, but for its lineage appended as provenance records (one member)
        grown = trace.read_bytes()
        assert grown.startswith(original), "a trace written at the usual level is left as written"
        assert provenance_records(inflate_member(grown[len(original):]))[ENTITY]
    assert valid_copy(trace) is not None  # the copy holds every event still
    assert load(trace).equals(expected)


def test_a_reader_waits_for_the_finisher_and_reads_its_copy(trace, monkeypatch):
    """The first read after a recording does not build the copy a second time beside the finisher."""
    from ioobserve.trace.read import reader

    expected = load(trace)
    for made in trace.parent.glob("*.parquet*"):
        made.unlink()
    assert finish_later(trace) is not None
    monkeypatch.setattr(reader, "build_copy", lambda *args, **kwargs: pytest.fail("the reader built a copy of its own"))
    assert load(trace).equals(expected)
    assert not mark_path(trace).exists(), "the finisher was done when the reader went on"
    assert valid_copy(trace) is not None
