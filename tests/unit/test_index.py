"""The member index: written with the trace, equal to one rebuilt from it, stale when the
trace grows past it."""

from __future__ import annotations

import stat

from ioobserve.trace.members import build_index, index_path, read_index, write_index
from ioobserve.trace.write.writer import TraceWriter
from tests.batches import Batches
from tests.sample_trace import sample_frame


def _trace(tmp_path):
    writer = TraceWriter(tmp_path, "t.pfw.gz", {"command": ["x"]}, precision="ns")
    writer.events(*Batches()(sample_frame()))
    writer.close()
    return writer.path


def test_the_writer_index_matches_a_rebuilt_one(tmp_path):
    trace = _trace(tmp_path)
    written = read_index(trace)
    rebuilt, damage = build_index(trace)
    assert written == rebuilt and not damage
    assert sum(e.events for e in written) == sample_frame().height
    assert written[-1].offset + written[-1].size == trace.stat().st_size
    events = [e for e in written if e.events]  # a member per shape of line
    assert sorted({pid for e in events for pid in e.pids}) == [10, 12, 13]
    assert min(e.ts_min for e in events) == 1_700_000_000_000_001_234
    assert stat.S_IMODE(index_path(trace).stat().st_mode) == 0o600


def test_missing_or_stale_index_reads_as_none(tmp_path):
    trace = _trace(tmp_path)
    entries = read_index(trace)
    with open(trace, "ab") as handle:  # the trace grew after its index was written
        handle.write(b"\x1f\x8b\x08")
    assert read_index(trace) is None
    index_path(trace).unlink()
    assert read_index(trace) is None
    trace.write_bytes(trace.read_bytes()[:-3])
    write_index(trace, entries)
    assert read_index(trace) == entries


def test_load_without_or_with_a_stale_index_still_loads_everything(tmp_path):
    import ioobserve

    trace = _trace(tmp_path)
    expected = ioobserve.load(trace)
    index_path(trace).write_text('{"offset":0,"size":5,"raw":1,"lines":1,"events":0,"ts_min":null,"ts_max":null}\n')
    damage = []
    assert ioobserve.load(trace, damage=damage).equals(expected)
    assert "stale" in damage[0].notes[0] and "ioobserve index" in damage[0].notes[0] and not damage[0]
    index_path(trace).unlink()
    damage = []
    assert ioobserve.load(trace, damage=damage).equals(expected) and damage == []


def test_selection_skips_members_by_pid_and_time(tmp_path):
    import ioobserve

    trace = _trace(tmp_path)
    assert ioobserve.load(trace, pids=[12]).get_column("pid").to_list() == [12]
    assert ioobserve.load(trace, pids=[999]).height == 0
    assert ioobserve.load(trace, start_ns=1_700_000_000_000_002_000).height == 4
    assert ioobserve.load(trace, end_ns=1_700_000_000_000_002_000).height == 1
    assert ioobserve.load(trace, path_prefix="/data/b").height == 1  # the rename's target


def test_a_reader_holding_less_of_a_growing_trace_uses_the_entries_it_holds(tmp_path):
    trace = _trace(tmp_path)
    entries = read_index(trace)
    held = entries[-2].offset + entries[-2].size  # the trace as mapped before its last member came
    assert read_index(trace, held) == entries[:-1]
    assert read_index(trace, held - 1) is None  # not at a member's end: stale
    assert read_index(trace, trace.stat().st_size) == entries
