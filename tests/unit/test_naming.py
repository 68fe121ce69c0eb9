"""Names in one place (ioobserve.data.naming): an id batch and its tables, named by BatchNamer as
the sinks that show names do, give back the named events they were made from."""

from __future__ import annotations

import os

import numpy as np
import polars as pl
from polars.testing import assert_frame_equal

from ioobserve.collect.context_tables import ContextTables
from ioobserve.collect.enrich import Enricher
from ioobserve.context.files import FileTable
from ioobserve.data import events as ev
from ioobserve.data import schema as s
from ioobserve.data.decode import PathRecord
from ioobserve.data.model import BatchTables, Process
from ioobserve.data.naming import BatchNamer, with_job_context
from tests.batches import Batches
from tests.sample_trace import PY_STACKS, sample_frame

PROCESSES = [Process(pid, 1, "x") for pid in (10, 12, 13)]


def test_an_id_batch_named_is_the_named_batch_it_came_from():
    named = sample_frame()
    ids, tables = Batches()(named, PY_STACKS)
    assert not set(ids.columns) & {s.PATH, s.COMM, s.JOB, s.USER, s.RANK, s.PY_FUNCTION}  # ids only
    namer = BatchNamer()
    namer.processes(PROCESSES)
    again = namer.name(ids, tables)
    columns = list(s.EVENT_SCHEMA)
    assert_frame_equal(again.select(columns), named.select(columns).cast({c: s.BATCH_SCHEMA[c] for c in columns}))


def test_stacks_are_named_in_batches_after_the_one_that_brought_them():
    named = sample_frame()
    batches, namer = Batches(), BatchNamer()
    namer.processes(PROCESSES)
    first, first_tables = batches(named.head(1), PY_STACKS)
    namer.keep(first_tables)  # a sink that named nothing of that batch still keeps its stacks
    ids, tables = batches(named.slice(1))
    assert tables.stacks == {}
    again = namer.name(ids, tables)
    assert again.filter(pl.col(s.PID) == 10).get_column(s.PY_FUNCTION).to_list() == ["Dataset.__getitem__"] * 2


def test_forgotten_processes_are_named_by_nothing_but_their_ids():
    ids, tables = Batches()(sample_frame(), PY_STACKS)
    namer = BatchNamer()
    namer.processes(PROCESSES)
    namer.forget([12])
    again = namer.name(ids, tables)
    assert again.filter(pl.col(s.PID) == 12).select(s.COMM, s.PPID).row(0) == (None, 0)
    assert again.filter(pl.col(s.PID) == 10).get_column(s.COMM).unique().to_list() == ["x"]


def test_the_job_context_of_an_id_batch_keeps_its_order():
    named = sample_frame()
    ids, tables = Batches()(named, PY_STACKS)
    reversed_ids = ids.reverse()
    jobs = with_job_context(reversed_ids, tables)
    assert jobs.get_column(s.TS).to_list() == reversed_ids.get_column(s.TS).to_list()
    expected = named.reverse().select(s.JOB, s.STEP, s.RANK, s.WORKER, s.TAGS)
    assert_frame_equal(jobs.select(expected.columns), expected.cast({s.JOB: pl.String, s.STEP: pl.String}))
    # Without process contexts: the cgroups' jobs alone, no as-of join.
    bare = with_job_context(ids, BatchTables(files=tables.files, cgroups=tables.cgroups, users=tables.users))
    assert bare.get_column(s.JOB).to_list() == ["7", "7", "7", "7", None]  # pid 13's job was its environment's
    assert bare.get_column(s.RANK).null_count() == bare.height


def test_the_enricher_hands_id_batches_whose_files_come_from_dev_and_ino():
    files = FileTable()
    files.add([PathRecord(dev=8 << 20 | 1, ino=1234, mode=0o100644, path="/d/open")])
    enricher = Enricher(ContextTables(files=files), 0)
    batch = np.zeros(3, dtype=ev.EVENT)
    batch["pid"] = batch["tid"] = 10
    batch["ts_ns"] = (100, 200, 300)
    batch["op"] = ev.OP_CODES["pread64"]
    batch["dev"], batch["ino"], batch["flags"] = 8 << 20 | 1, 1234, (ev.F_FILE, ev.F_FILE, 0)
    ids, tables = enricher.frame(batch)
    assert ids.schema == pl.Schema(s.ID_BATCH_SCHEMA)
    assert ids.get_column(s.FILE).to_list()[:2] == [1, 1] and ids.get_column(s.FILE)[2] is None
    assert tables.files.rows() == [(1, "/d/open", os.makedev(8, 1), 1234)]
    # The spans still open at the end come as an id batch too (none here).
    ended, _ = enricher.end_spans()
    assert ended.schema == pl.Schema(s.ID_BATCH_SCHEMA) and ended.is_empty()
