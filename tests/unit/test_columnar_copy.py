"""The Parquet copy beside a trace: written private on first read, read after; a copy that
no longer matches its trace (stale, corrupt, of another version) is never trusted and is
rebuilt; `scan` returns what load-then-filter does."""

from __future__ import annotations

import json
import os
import stat

import polars as pl
import pytest

from ioobserve.data import schema as s
from ioobserve.trace.members import index_path
from ioobserve.trace.read import columnar
from ioobserve.trace.read.columnar import copy_path, key_path, valid_copy
from ioobserve.trace.read.reader import load, scan
from tests.batches import Batches
from tests.unit.synthetic_traces import T0, US, Proc, io, private_dir, write_trace
from tests.waiting import wait_until

PROCS = [Proc(10, rank=0), Proc(11, ppid=10, rank=0, worker=0), Proc(12, ppid=10, job=None)]


def _batches(start: int = 0, count: int = 6, per: int = 50) -> list[list[dict]]:
    rows = []
    for i in range(start, start + count * per):
        proc = PROCS[i % 3]
        path = f"/data/{proc.pid}/{i % 4}.bin" if i % 5 else f"/scratch/{i % 2}.log"
        rows.append(io(proc, proc.pid, i * 10, i * 10 + 3, "read" if i % 3 else "write", path, 3, i * 4096, 4096))
    return [rows[i:i + per] for i in range(0, len(rows), per)]


@pytest.fixture
def trace(tmp_path):
    return write_trace(private_dir(tmp_path), PROCS, _batches())


def _from_members(trace, tmp_path) -> pl.DataFrame:
    """The trace's events read where no copy is kept (a directory others may write)."""
    elsewhere = tmp_path / "shared"
    elsewhere.mkdir()
    os.chmod(elsewhere, 0o777)
    for source in (trace, index_path(trace)):
        (elsewhere / source.name).write_bytes(source.read_bytes())
    frame = load(elsewhere / trace.name)
    assert not copy_path(elsewhere / trace.name).exists(), "no copy where other users may write"
    return frame


def test_the_first_read_writes_a_private_copy_that_later_reads_use(trace, tmp_path):
    first = load(trace)
    assert first.height == 300 and first.get_column(s.TS).is_sorted()
    for made in (copy_path(trace), key_path(trace)):
        assert stat.S_IMODE(made.stat().st_mode) == 0o600
    assert valid_copy(trace) is not None
    built = copy_path(trace).stat().st_mtime_ns
    assert load(trace).equals(first)
    assert copy_path(trace).stat().st_mtime_ns == built, "a matching copy is read, not rebuilt"
    assert first.equals(_from_members(trace, tmp_path)), "the copy holds what the members say"


def test_a_copy_of_an_older_state_of_the_trace_is_rebuilt(trace, tmp_path):
    load(trace)
    newer = write_trace(tmp_path, PROCS, _batches(start=1000, count=3), name="newer.pfw.gz")
    os.replace(newer, trace)
    os.replace(index_path(newer), index_path(trace))
    assert valid_copy(trace) is None
    frame = load(trace)
    assert frame.height == 150 and frame.get_column(s.TS).min() == T0 + 10_000 * US
    assert valid_copy(trace) is not None


@pytest.mark.parametrize("spoil", ["flip a byte", "truncate", "key of another version", "key unreadable"])
def test_a_corrupt_copy_is_never_trusted(trace, tmp_path, spoil):
    expected = load(trace)
    copy, key = copy_path(trace), key_path(trace)
    data = bytearray(copy.read_bytes())
    if spoil == "flip a byte":  # the footer still reads: only the checksum tells
        data[len(data) // 3] ^= 0xFF
        copy.write_bytes(bytes(data))
    elif spoil == "truncate":
        copy.write_bytes(bytes(data[: len(data) // 2]))
    elif spoil == "key of another version":
        key.write_text(json.dumps({**json.loads(key.read_text()), "version": columnar.VERSION + "x"}))
    else:
        key.write_text("{not json")
    assert valid_copy(trace) is None
    assert load(trace).equals(expected)
    assert valid_copy(trace) is not None, "rebuilt"


def test_a_copy_planted_through_a_symlink_is_not_read(trace, tmp_path):
    expected = load(trace)
    planted = tmp_path / "planted.parquet"
    planted.write_bytes(copy_path(trace).read_bytes())
    copy_path(trace).unlink()
    copy_path(trace).symlink_to(planted)
    assert valid_copy(trace) is None
    assert load(trace).equals(expected)
    assert not copy_path(trace).is_symlink(), "replaced by a real copy"


QUERIES = [
    ({"pids": [11]}, pl.col(s.PID) == 11),
    ({"start_ns": T0 + 500 * US, "end_ns": T0 + 1500 * US},
     (pl.col(s.TS) >= T0 + 500 * US) & (pl.col(s.TS) < T0 + 1500 * US)),
    ({"path_prefix": "/scratch/"}, pl.col(s.PATH).cat.starts_with("/scratch/")),
    ({"pids": [10, 12], "path_prefix": ["/data/10/", "/scratch/"]},
     pl.col(s.PID).is_in([10, 12]) & (pl.col(s.PATH).cat.starts_with("/data/10/") | pl.col(s.PATH).cat.starts_with("/scratch/"))),
]


@pytest.mark.parametrize(("arguments", "keep"), QUERIES)
def test_scan_selects_what_load_then_filter_does(trace, arguments, keep):
    whole = load(trace)
    expected = whole.filter(keep)
    assert 0 < expected.height < whole.height
    assert scan(trace, **arguments).collect().equals(expected)
    assert load(trace, **arguments).equals(expected)


def test_scan_pushes_a_query_down_to_the_same_rows(trace):
    whole = load(trace)
    query = (pl.col(s.PID) == 10) & (pl.col(s.LAYER) == s.LAYER_SYSCALL) & (pl.col(s.OP) == "write")
    columns = [s.TS, s.PATH, s.BYTES]
    expected = whole.filter(query).select(columns)
    assert expected.height
    assert scan(trace).filter(query).select(columns).collect().equals(expected)
    assert scan(trace).filter(query).select(columns).head(3).collect().equals(expected.head(3))


def test_several_traces_scan_in_time_order(trace, tmp_path):
    other = write_trace(trace.parent, PROCS, _batches(start=5, count=2), name="other.pfw.gz")
    both = scan([trace, other]).collect()
    assert both.height == 400 and both.get_column(s.TS).is_sorted()
    assert both.sort(s.TS, s.PID, s.PATH).equals(pl.concat([load(trace), load(other)]).sort(s.TS, s.PID, s.PATH))


def test_a_trace_still_being_written_gets_no_copy_until_closed(tmp_path):
    from ioobserve.data.model import Process
    from ioobserve.trace.write.writer import TraceWriter
    from tests.unit.synthetic_traces import frame

    directory = private_dir(tmp_path, "live")
    writer = TraceWriter(directory, "live.pfw.gz", {"command": ["x"]}, mounts=[])
    writer.processes([Process(pid=p.pid, ppid=p.ppid, comm="python3", exe="/usr/bin/python3", cmdline=("python3",))
                      for p in PROCS])
    writer.events(*Batches()(frame(_batches(count=1)[0])))
    wait_until(lambda: writer.events_written == 50, "the batch flushed (at most a second)")
    assert load(writer.path).height == 50
    assert not copy_path(writer.path).exists(), "a copy would be stale at the next flush"
    writer.close()
    assert load(writer.path).height == 50 and valid_copy(writer.path) is not None


def test_columns_uniform_in_every_chunk_are_read_as_their_value(tmp_path, monkeypatch):
    """The key names the columns with one value (or none) in every event; a column uniform in
    the first chunks but not after is read from the copy. Both load as from the members."""
    monkeypatch.setattr(columnar, "BUILD_CHUNK_BYTES", 1)  # a chunk per member: uniformity is decided across chunks
    procs = [Proc(10, rank=0), Proc(11, ppid=10, rank=0)]
    early = [[io(procs[0], 10, i * 10, i * 10 + 3, "read", "/data/a", 3, 0, 4096) for i in range(k * 20, k * 20 + 20)]
             for k in range(3)]
    late = [[io(procs[1], 11, i * 10, i * 10 + 3, "read", "/data/b", 4, 0, 4096) for i in range(60, 80)]]
    trace = write_trace(private_dir(tmp_path), procs, early + late)
    loaded = load(trace)
    uniform = valid_copy(trace).uniform
    assert uniform[s.RANK] == 0 and uniform[s.WORKER] is None and uniform[s.UID] == 0
    assert {s.PID, s.PATH, s.FD, s.TS}.isdisjoint(uniform), "the later chunk differs: read from the copy"
    assert loaded.equals(_from_members(trace, tmp_path))
    assert loaded.schema == pl.Schema(s.EVENT_SCHEMA)
    assert loaded.get_column(s.PID).to_list() == [10] * 60 + [11] * 20


def test_a_copy_made_with_other_columns_is_of_another_version():
    """An older ioobserve's copy (one column fewer) is rebuilt, not read with missing columns."""
    fewer = {name: dtype for name, dtype in s.COPY_SCHEMA.items() if name != s.POD_NAME}
    assert columnar.copy_version(fewer) != columnar.VERSION == columnar.copy_version(dict(s.COPY_SCHEMA))


def test_columns_the_tables_leave_null_are_not_in_the_copy(trace, tmp_path):
    """Parquet's cost is per column, however empty: a column no table of the trace names (no
    pod, no Python frames here) is left out of the file and read as null, as from the members."""
    loaded = load(trace)
    copy = valid_copy(trace)
    in_file = set(pl.read_parquet_schema(copy_path(trace)))
    assert in_file == set(copy.columns)
    assert {s.POD_NAME, s.NAMESPACE, s.PY_FUNCTION} <= set(s.COPY_SCHEMA) - in_file
    assert {s.TS, s.PID, s.PATH, s.FILE_ID} <= in_file
    assert loaded.get_column(s.POD_NAME).null_count() == loaded.height
    assert loaded.equals(_from_members(trace, tmp_path))
    assert scan(trace).select(s.POD_NAME, s.PID).collect().equals(loaded.select(s.POD_NAME, s.PID))
