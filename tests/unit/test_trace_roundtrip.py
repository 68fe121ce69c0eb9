"""Writer and reader agree: an enriched frame written as DFTracer-layout lines loads back."""

from __future__ import annotations

import gzip
import json
import zlib

import polars as pl
import pytest

from ioobserve.data import events as ev
from ioobserve.data import schema as s
from ioobserve.data.model import Process
from ioobserve.trace.read.reader import load, records
from ioobserve.trace.write.writer import TraceWriter
from tests.batches import Batches
from tests.sample_trace import PY_STACKS, sample_frame


@pytest.fixture
def trace(tmp_path):
    writer = TraceWriter(tmp_path, "t.pfw.gz", {"command": ["x"]}, precision="ns")
    writer.processes([Process(pid=pid, ppid=1, comm="x", exe="/bin/x", cmdline=("x", "-y")) for pid in (10, 12, 13)])
    writer.events(*Batches()(sample_frame(), PY_STACKS))
    writer.lost(1_700_000_000_000_000_000, {"read": 2})
    writer.close()
    return writer.path


def test_events_round_trip_with_ns_precision_and_paths(trace):
    loaded = load(trace)
    assert loaded.height == 5
    first = loaded.row(0, named=True)
    assert first[s.TS] == 1_700_000_000_000_001_234 and first[s.DUR] == 2_500
    assert first[s.PATH] == "/data/a" and first[s.BYTES] == 4096 and first[s.OFFSET] == 0
    rename = loaded.filter(pl.col(s.OP) == "rename").row(0, named=True)
    assert (rename[s.PATH], rename[s.PATH2]) == ("/data/a", "/data/b")
    failed = loaded.filter(pl.col(s.PID) == 12).row(0, named=True)
    assert failed[s.PATH] is None and failed[s.ERRNO] == 9
    assert loaded.schema == pl.Schema(s.EVENT_SCHEMA)
    assert loaded.equals(sample_frame()), "every column of every event comes back as written"


def test_a_module_name_with_odd_characters_keeps_the_line_valid(tmp_path):
    """A module name is whatever str the program imported: characters a name cannot hold
    are written as "?", so the line needs no escape."""
    writer = TraceWriter(tmp_path, "t.pfw.gz", {"command": ["x"]})
    writer.events(*Batches()(sample_frame().with_columns(pl.lit('odd"mod\\ule x', pl.String).alias(s.PY_MODULE))))
    writer.close()
    assert load(writer.path).get_column(s.PY_MODULE).unique().to_list() == ["odd?mod?ule?x"]


def test_job_context_is_described_once_per_cgroup_and_uid(trace):
    cg, us = records(trace, "CG").sort(pl.col("args").struct.field("cgroup")), records(trace, "US")
    assert cg.height == 2 and us.height == 1
    args = cg.row(0, named=True)["args"]
    assert (args["cgroup"], args["name"], args["job"], args["step"], args["task"]) == (1, "/slurm/uid_0/job_7/step_0/task_1", "7", "0", 1)
    args = cg.row(1, named=True)["args"]  # the job pid 13's environment names is not its cgroup's
    assert (args["cgroup"], args["name"], args["job"]) == (2, "/user.slice", None)
    assert us.row(0, named=True)["args"]["name"] == "root"


def test_process_context_changes_are_described_where_they_happen(trace):
    pc = records(trace, "PC").sort("pid", pl.col("args").struct.field("since"))
    described = [(row["pid"], row["args"]["since"], row["args"]["job"], [t["value"] for t in row["args"]["tags"] or []])
                 for row in pc.iter_rows(named=True)]
    # pid 10: three contexts (epoch 1; epoch 1 + phase; epoch 2); pid 13: its environment's
    # job (its cgroup names none); pid 12 has no context, so no PC record.
    assert described == [
        (10, 1_700_000_000_000_001_234, None, ["1"]), (10, 1_700_000_000_000_002_000, None, ["1", "io"]),
        (10, 1_700_000_000_000_004_000, None, ["2"]), (13, 1_700_000_000_000_005_000, "99", []),
    ]


def test_dftracer_layout_and_fh_before_use(trace):
    lines = [json.loads(line) for line in gzip.open(trace, "rt")]
    defined = set()
    for line in lines:
        assert isinstance(line["ph"], int)
        if line["name"] == "FH":
            defined.add(line["args"]["value"])
        for key in ("fhash", "fhash2"):
            if line.get("args", {}).get(key) is not None:
                assert line["args"][key] in defined, "file hash used before its FH record"
    events = [line for line in lines if line["ph"] == 1 and line["cat"] == "SYSCALL"]
    assert list(events[0]) == ["name", "cat", "type", "pid", "tid", "ts", "dur", "ph", "args"]
    first = next(e for e in events if e["tid"] == 11)
    assert first["ts"] == 1_700_000_000_000_001 and first["dur"] == 2
    assert (first["args"]["tns"], first["args"]["dns"]) == (234, 500)
    assert [line["name"] for line in lines if line["ph"] == 1][0] == "start"
    assert lines[-1]["name"] == "end" and lines[-1]["args"]["num_events"] == 5 and lines[-1]["args"]["lost_total"] == 2


def test_each_flush_is_a_complete_gzip_member(trace):
    data = trace.read_bytes()
    members = 0
    while data:
        decompressor = zlib.decompressobj(31)
        decompressor.decompress(data)
        assert decompressor.eof
        data = decompressor.unused_data
        members += 1
    assert members >= 2  # the start record is flushed on its own


def test_process_records(trace):
    pr = records(trace, "PR")
    assert sorted(pr.get_column("pid").to_list()) == [10, 12, 13]
    args = pr.filter(pl.col("pid") == 10).row(0, named=True)["args"]
    assert (args["ppid"], args["comm"], args["exe"], args["cmdline"]) == (1, "x", "/bin/x", ["x", "-y"])


def _event_lines(path) -> list[str]:
    return [line for line in gzip.open(path, "rt") if '"ph":1' in line and '"cat":"dftracer"' not in line]


def test_event_lines_carry_only_what_applies(trace):
    lines = _event_lines(trace)
    assert len(lines) == sample_frame().height
    for line in lines:
        assert "null" not in line and " " not in line, line
    by_pid = {json.loads(line)["pid"]: json.loads(line)["args"] for line in lines}
    failed = by_pid[12]  # read(99) failed: no file, no offset, no stack
    assert failed == {"ret": -9, "count": 10, "fd": 99, "cgroup": 1, "dns": 100, "pts": 1_700_000_000_000_002_500}  # tns 0
    assert "uid" not in failed  # its PR record gives uid 0; its cgroup (1) differs from the PR record's (0)


def _writer_trace(tmp_path, frame: pl.DataFrame, precision: str):
    (tmp_path / precision).mkdir(mode=0o700)
    writer = TraceWriter(tmp_path / precision, "t.pfw.gz", {"command": []}, precision=precision)
    writer.processes([Process(pid=pid, ppid=1, comm="x", exe="/bin/x", cmdline=("x", "-y")) for pid in (10, 12, 13)])
    writer.events(*Batches()(frame, PY_STACKS))
    writer.close()
    return writer.path


def test_microsecond_precision_keeps_everything_but_the_sub_microsecond_times(tmp_path):
    path = _writer_trace(tmp_path, sample_frame(), "us")
    assert all('"tns"' not in line and '"dns"' not in line for line in _event_lines(path))
    expected = sample_frame().with_columns(pl.col(s.TS) // 1000 * 1000, pl.col(s.DUR) // 1000 * 1000)
    assert load(path).equals(expected)


def _family(parent_ns: int) -> pl.DataFrame:
    """Thread 11: a syscall that is a parent, another starting in the same µs, and a page
    cache event inside the first (its parent_ts names the first exactly)."""
    base = sample_frame().row(0, named=True)
    start = 1_700_000_000_000_001_000 + parent_ns
    rows = [
        {**base, s.TS: start, s.DUR: 5_000, s.FLAGS: ev.F_FILE | ev.F_PARENT, s.PARENT_TS: None},
        {**base, s.TS: start + 50, s.DUR: 0, s.LAYER: s.LAYER_CACHE, s.OP: "cache_add", s.FD: -1,
         s.FLAGS: ev.F_FILE, s.PARENT_TS: start},
        {**base, s.TS: 1_700_000_000_000_001_900, s.DUR: 200, s.FLAGS: ev.F_FILE, s.PARENT_TS: None},
    ]
    return pl.DataFrame(rows, schema=s.EVENT_SCHEMA)


@pytest.mark.parametrize("precision", ["us", "ns"])
@pytest.mark.parametrize("parent_ns", [0, 100])  # on a whole µs, the other two read back at the parent's µs
def test_parent_links_are_exact_in_both_precisions(tmp_path, precision, parent_ns):
    loaded = load(_writer_trace(tmp_path, _family(parent_ns), precision))
    child = loaded.filter(pl.col(s.LAYER) == s.LAYER_CACHE).row(0, named=True)
    parents = loaded.filter((pl.col(s.TID) == child[s.TID]) & (pl.col(s.TS) == child[s.PARENT_TS]))
    assert parents.height == 1 and parents.item(0, s.DUR) == 5_000
    assert parents.item(0, s.TS) - (1_700_000_000_000_001_000 + parent_ns) == (1 if (precision, parent_ns) == ("us", 0) else 0)


def test_a_member_mixing_shapes_loads_through_json(trace, tmp_path):
    text = gzip.open(trace).read()
    events = b"".join(line.encode() for line in _event_lines(trace))
    others = b"".join(line for line in text.splitlines(keepends=True) if line.decode() not in _event_lines(trace))
    assert len({tuple(json.loads(line)["args"]) for line in events.splitlines()}) > 1  # shapes differ
    mixed = tmp_path / "mixed.pfw.gz"
    mixed.write_bytes(gzip.compress(others) + gzip.compress(events))  # no index: members found by walking
    assert load(mixed).equals(load(trace))
