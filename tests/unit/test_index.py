"""The member index: written with the trace, equal to one rebuilt from it, stale when the
trace grows past it."""

from __future__ import annotations

import stat

from ioobserve.trace.index import build_index, index_path, read_index, write_index
from ioobserve.trace.writer import TraceWriter
from tests.unit.test_trace_roundtrip import _frame


def _trace(tmp_path):
    writer = TraceWriter(tmp_path, "t.pfw.gz", {"command": ["x"]})
    writer.events(_frame())
    writer.close()
    return writer.path


def test_the_writer_index_matches_a_rebuilt_one(tmp_path):
    trace = _trace(tmp_path)
    written = read_index(trace)
    rebuilt, damage = build_index(trace)
    assert written == rebuilt and not damage
    assert sum(e.events for e in written) == 3
    assert written[-1].offset + written[-1].size == trace.stat().st_size
    events = [e for e in written if e.events]
    assert events[0].pids == [10, 12] and events[0].ts_min == 1_700_000_000_000_001_234
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
