"""Rotated traces: every part stands alone and together they hold every event."""

from __future__ import annotations

import json

import polars as pl

from ioobserve.data import schema as s
from ioobserve.data.model import Process
from ioobserve.trace.members import build_index, read_index, intact_text
from ioobserve.trace.read.reader import load, own_records
from ioobserve.trace.write import format_thread as describe_module
from ioobserve.trace.write.writer import TraceWriter
from tests.batches import Batches
from tests.sample_trace import PY_STACKS, sample_frame


def test_each_part_is_self_contained(tmp_path):
    writer = TraceWriter(tmp_path, "h-20260101T000000-1.pfw.gz", {"command": []}, rotate_seconds=0, precision="ns")
    writer.processes([Process(pid=10, ppid=1, comm="x", exe="/bin/x", cmdline=("x",))])
    batches = Batches()
    for _ in range(3):
        writer.events(*batches(sample_frame(), PY_STACKS))  # rotate_seconds=0: every batch after the first starts a part
    writer.close()
    names = [p.name for p in writer.paths]
    assert names == ["h-20260101T000000-1.pfw.gz", "h-20260101T000000-1-1.pfw.gz",
                     "h-20260101T000000-1-2.pfw.gz", "h-20260101T000000-1-3.pfw.gz"]
    for path in writer.paths:
        lines = [json.loads(line) for line in intact_text(path)[0].splitlines()]
        kinds = [line["name"] for line in lines if line["ph"] == 1 and line["cat"] == "dftracer"]
        assert kinds[0] == "start" and kinds[-1] == "end"
        defined = {line["args"]["value"] for line in lines if line["name"] == "FH"}
        used = {line["args"][k] for line in lines for k in ("fhash", "fhash2") if line.get("args", {}).get(k)}
        assert used <= defined, f"{path.name} uses file hashes it does not define"
        described = {line["pid"] for line in lines if line["name"] == "PR"}
        events_pids = {line["pid"] for line in lines if line["ph"] == 1 and line["cat"] == "SYSCALL"}
        assert 10 not in events_pids or 10 in described
        assert read_index(path) == build_index(path)[0]  # each part indexed as it closed
    everything = load(writer.paths)
    assert everything.height == 3 * sample_frame().height and everything.filter(pl.col(s.PATH2) == "/data/b").height == 3
    for path in writer.paths[1:]:  # each part describes its own job and process context
        assert load(path).drop(s.PPID, s.COMM).equals(sample_frame().drop(s.PPID, s.COMM))  # only pid 10 has a PR record


def _using(stack_id: int) -> pl.DataFrame:
    """The test frame with pid 10's events made from Python stack `stack_id`."""
    return sample_frame().with_columns(pl.when(pl.col(s.PID) == 10).then(pl.lit(stack_id, pl.UInt32)).alias(s.PY_STACK))


def _described(path) -> set[int]:
    return {line["args"]["stack"] for line in map(json.loads, intact_text(path)[0].splitlines()) if line["name"] == "PS"}


def test_the_writer_keeps_the_stacks_used_last_and_says_if_one_was_missing(tmp_path, monkeypatch):
    """A long recording makes Python stacks for as long as it runs: the writer keeps as many as
    the collector (here 2), by last use; a stack brought back is described in every part that
    uses it; one used after it was forgotten and not brought back is counted in the end record."""
    monkeypatch.setattr(describe_module, "KEPT_CHAINS", 2)
    stack = PY_STACKS[1]
    writer = TraceWriter(tmp_path, "h-20260101T000000-1.pfw.gz", {"command": []})
    writer.processes([Process(pid=10, ppid=1, comm="x", exe="/bin/x", cmdline=("x",))])
    batches = Batches()
    writer.events(*batches(_using(1), {1: stack, 2: stack}))
    writer.events(*batches(_using(2)))
    writer.events(*batches(_using(3), {3: stack}))  # 1 was used least recently: forgotten
    writer.rotate_soon()
    writer.events(*batches(_using(2)))
    writer.events(*batches(_using(1), {1: stack}))  # brought back (python/stacks.py announces a stack again when it resolves a chain)
    writer.events(*batches(_using(3), {4: stack, 5: stack}))  # 2 and 3 forgotten: a bug's signature, counted, not silently left out
    writer.close()
    first, second = writer.paths
    assert _described(first) == {1, 2, 3} and _described(second) == {2, 1}
    (end,) = own_records(second, "end")
    assert end["args"]["counters"]["py_stacks_undescribed"] == 1
