"""The trace writer's pool: traces written with one and with two writer threads say the same,
event for event; a pool thread that fails loses nothing silently (its flush is counted as
unwritten, the user is told once, every member written still loads); a part deflated in a
hurry says so, for the finisher."""

from __future__ import annotations

import polars as pl
import pytest

from ioobserve.data import schema as s
from ioobserve.data.model import Process
from ioobserve.plumbing.deadline import UNWRITTEN
from ioobserve.trace.read.reader import load, own_records
from ioobserve.trace.write import format_thread as writer_module
from ioobserve.trace.write.writer import TraceWriter
from tests.batches import Batches
from tests.unit.synthetic_traces import Proc, frame, io, private_dir

PROCS = [Proc(20), Proc(21, ppid=20, worker=0), Proc(22, ppid=20, worker=1)]
OPS = ("read", "openat", "newfstatat", "write", "lseek")
BATCHES, PER_BATCH = 24, 500


def _rows(batch: int) -> list[dict]:
    """A batch of mixed layers, ops and shapes (files or none, offsets or none, errors)."""
    rows = []
    for i in range(PER_BATCH):
        n = batch * PER_BATCH + i
        op = OPS[n % len(OPS)]
        layer = s.LAYER_POSIX if n % 11 == 0 else s.LAYER_SYSCALL
        path = f"/data/{n % 13}" if n % 5 else None
        rows.append(io(PROCS[n % 3], 20 + n % 3, n * 3, n * 3 + 1 + n % 4, op, path, fd=3 + n % 4,
                       offset=n * 4096 if op in ("read", "write") else -1, size=4096 if op in ("read", "write") else 0,
                       ret=-2 if n % 17 == 0 else None, layer=layer))
    return rows


def _record(directory, threads: int, on_trouble=None, name: str | None = None):
    """A trace of every batch (each its own flush under one_flush_per_batch: the pool then has many at once)."""
    writer = TraceWriter(directory, name or f"t{threads}.pfw.gz", {"command": ["synthetic"]}, mounts=[],
                         writer_threads=threads, on_trouble=on_trouble)
    writer.processes([Process(pid=p.pid, ppid=p.ppid, comm="python3") for p in PROCS])
    named = Batches()
    for batch in range(BATCHES):
        writer.events(*named(frame(_rows(batch))))
    writer.close()
    return writer


@pytest.fixture
def one_flush_per_batch(monkeypatch):
    monkeypatch.setattr(writer_module, "FLUSH_BYTES", 1)


def test_one_and_two_writer_threads_write_the_same_events(tmp_path, one_flush_per_batch):
    directory = private_dir(tmp_path)
    one, two = _record(directory, 1), _record(directory, 2)
    first, second = load(one.path), load(two.path)
    assert first.height == second.height == BATCHES * PER_BATCH
    assert first.equals(second)
    assert one.unwritten == two.unwritten == 0


def test_a_failing_writer_thread_is_counted_and_the_rest_loads(tmp_path, one_flush_per_batch, monkeypatch):
    real, event_members = writer_module.gzip_member, []

    def fail_on_the_third_event_member(data: bytes, hurried: bool = False) -> bytes:
        if b'"ph":1,"args"' in data[:200] and b'"cat":"dftracer"' not in data[:200]:
            event_members.append(len(data))
            if len(event_members) == 3:
                raise MemoryError("deflate failed")
        return real(data, hurried)

    monkeypatch.setattr(writer_module, "gzip_member", fail_on_the_third_event_member)
    told: list[str] = []
    writer = _record(private_dir(tmp_path), 2, told.append)
    assert writer.unwritten > 0
    assert len(told) == 1 and "writer thread failed" in told[0] and "MemoryError" in told[0]
    (end,) = own_records(writer.path, "end")
    lost = end["args"]["lost"][UNWRITTEN]
    assert 0 < lost <= PER_BATCH, "one flush: at most one batch"
    assert lost == writer.unwritten
    assert end["args"]["counters"]["writer_failed_flushes"] == 1
    loaded = load(writer.path)
    assert loaded.height == BATCHES * PER_BATCH - lost, "every other event was written and loads"
    assert loaded.filter(pl.col(s.PID).is_in([p.pid for p in PROCS])).height == loaded.height


def test_a_part_written_in_a_hurry_says_so(tmp_path, monkeypatch):
    directory = private_dir(tmp_path)
    # Whether the disk process keeps up is the machine's timing (on busy cores three members
    # may wait for it): the calm writer's disk queue is made too long ever to fill.
    monkeypatch.setattr(writer_module, "DISK_QUEUE", 1 << 20)
    calm = _record(directory, 1)
    assert not calm.hurried(calm.path)
    monkeypatch.setattr(writer_module, "HURRY_QUEUE", 0)  # always behind
    hurried = _record(directory, 1, name="hurried.pfw.gz")
    assert hurried.hurried(hurried.path)
    assert load(hurried.path).equals(load(calm.path))
