"""The writer writes a batch from its id columns and the tables naming them (docs/design.md,
"The data's way": ids travel to disk): the names a batch also carries for the live views are
not read."""

from __future__ import annotations

import polars as pl

from ioobserve.collect import enrich as file_ids
from ioobserve.collect.enrich import FileIds
from ioobserve.data import schema as s
from ioobserve.data.model import BatchTables, Process
from ioobserve.trace.read.reader import load, records
from ioobserve.trace.write.writer import TraceWriter
from tests.batches import Batches, as_path_arguments
from tests.sample_trace import PY_STACKS, sample_frame


def test_the_writer_names_ids_from_the_tables_not_from_the_batch_names(tmp_path):
    frame, tables = Batches()(sample_frame(), PY_STACKS)
    # Names a sink shows, made wrong: a writer reading them would write these.
    wrong = frame.with_columns(
        pl.lit("/wrong").alias(s.PATH), pl.lit("/wrong").alias(s.PATH2), pl.lit("/wrong.slice").alias(s.CGROUP_PATH),
        pl.lit("nobody").alias(s.USER), pl.lit("666").alias(s.JOB), pl.lit(99, pl.Int32).alias(s.RANK),
        pl.lit("wrong").alias(s.PY_FUNCTION))
    writer = TraceWriter(tmp_path, "t.pfw.gz", {"command": ["x"]}, precision="ns")
    writer.processes([Process(pid=pid, ppid=1, comm="x", exe="/bin/x", cmdline=("x",)) for pid in (10, 12, 13)])
    writer.events(wrong, tables)
    writer.close()
    loaded = load(writer.path)
    assert loaded.drop(s.PPID, s.COMM).equals(sample_frame().drop(s.PPID, s.COMM))
    assert "/wrong" not in records(writer.path, "FH").get_column("args").struct.field("name").to_list()


def test_a_part_of_a_batch_is_described_by_its_own_share_of_the_tables(tmp_path):
    """serve writes each job's share of a batch with the whole batch's tables: a job's trace
    names only its own files, cgroups, users and processes' contexts."""
    frame, tables = Batches()(sample_frame(), PY_STACKS)
    writer = TraceWriter(tmp_path, "t.pfw.gz", {"command": ["x"]})
    writer.events(frame.filter(pl.col(s.PID) == 12), tables)  # pid 12: no file, no context
    writer.close()
    assert records(writer.path, "FH").is_empty() and records(writer.path, "PC").is_empty()
    # what was left out: the other processes' ranks
    assert tables.contexts.filter(pl.col(s.RANK).is_not_null()).get_column(s.PID).unique().sort().to_list() == [10, 13]


def test_file_ids_never_name_two_files_when_the_table_starts_over(monkeypatch, tmp_path):
    monkeypatch.setattr(file_ids, "MAX_FILES_KEPT", 2)
    ids = FileIds()
    first, files = ids.assign(as_path_arguments(sample_frame()))  # /data/a and /data/b (rename's target)
    assert sorted(files.get_column(s.PATH).to_list()) == ["/data/a", "/data/b"]
    again, files_again = ids.assign(as_path_arguments(sample_frame()))  # full: started over, new ids for the same files
    assert set(files_again.get_column(s.FILE)).isdisjoint(files.get_column(s.FILE))
    # Two ids for one file in one trace read back as that file.
    writer = TraceWriter(tmp_path, "t.pfw.gz", {"command": ["x"]}, precision="ns")
    batches = Batches()
    _, tables = batches(sample_frame(), PY_STACKS)
    writer.events(first, BatchTables(files=files, cgroups=tables.cgroups, users=tables.users, contexts=tables.contexts,
                                     stacks=PY_STACKS))
    writer.events(again, BatchTables(files=files_again, cgroups=tables.cgroups, users=tables.users, contexts=tables.contexts))
    writer.close()
    assert records(writer.path, "FH").height == 4
    loaded = load(writer.path).filter(pl.col(s.PATH).is_not_null())
    assert loaded.get_column(s.PATH).to_list() == ["/data/a", "/data/a", "/data/a", "/data/a"]
    assert loaded.filter(pl.col(s.PATH2).is_not_null()).get_column(s.PATH2).to_list() == ["/data/b", "/data/b"]


def test_a_discarded_trace_leaves_no_file_and_is_not_finished(tmp_path):
    closed = []
    writer = TraceWriter(tmp_path, "t.pfw.gz", {"command": ["x"]}, on_closed=lambda path, _hurried: closed.append(path))
    writer.discard()
    assert list(tmp_path.iterdir()) == [] and closed == []
