"""The trace writer on disks that fail for real: a tmpfs that fills up, trace files deleted
under it, a FUSE file system answering EIO or EROFS (as writers see a file system the kernel
turned read-only after an error: `mount -o remount,ro` itself refuses while the trace is open
for writing). The writer never raises; every event handed to it is either in a whole member
on disk or counted as unwritten; what it kept loads; when the file system takes writes again
a new part begins."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from ioobserve.data.model import Process
from ioobserve.trace.members import build_index, read_index
from ioobserve.trace.read.reader import load, own_records
from ioobserve.trace.write import format_thread as writer_module
from ioobserve.trace.write.writer import TraceWriter
from tests.batches import Batches
from tests.kernel.faulty_mounts import faulty_fs, fill, small_tmpfs
from tests.unit.synthetic_traces import Proc, frame, io
from tests.waiting import wait_until

PROC = Proc(4242, job=None)
ROWS = 2000  # events per batch


@pytest.fixture(autouse=True)
def small_members(monkeypatch):
    """A member per batch or so, as a long recording has many (and a small disk fills between them)."""
    monkeypatch.setattr(writer_module, "FLUSH_BYTES", 64 << 10)


class Feeder:
    """Batches of events that compress poorly (random offsets and sizes), counted as handed."""

    def __init__(self, writer: TraceWriter) -> None:
        self.writer, self.handed, self.random, self.batches = writer, 0, random.Random(7), Batches()
        writer.processes([Process(pid=PROC.pid, ppid=1, comm="python3", exe="/usr/bin/python3", cmdline=("python3",))])

    def batch(self) -> None:
        """One batch into the writer."""
        start = self.handed * 10
        rows = [io(PROC, PROC.pid, start + i * 10, start + i * 10 + 3, "read", f"/data/f{self.random.randrange(64)}",
                   3, self.random.randrange(1 << 40), self.random.randrange(1, 1 << 20)) for i in range(ROWS)]
        self.writer.events(*self.batches(frame(rows)))
        self.handed += ROWS

    def until(self, condition, what: str) -> None:
        """Keep the recording going (a batch each poll) until the writer's state is reached."""
        wait_until(lambda: condition() or self.batch(), what)


def _writer(directory: Path, messages: list[str]) -> TraceWriter:
    return TraceWriter(directory, "t.pfw.gz", {"command": ["fault test"]}, mounts=[], on_trouble=messages.append)


def _kept_loads_whole(writer: TraceWriter) -> None:
    """Every part left ends on a whole member its index describes, and holds exactly the
    events the writer says it wrote."""
    damage = []
    assert load(writer.paths, damage=damage).height == writer.events_written
    assert not any(damage), damage
    for part in writer.paths:
        assert read_index(part) == build_index(part)[0], part


def _accounted(writer: TraceWriter, feeder: Feeder) -> None:
    """Handed = written + unwritten, and the last part's end record says the unwritten count."""
    assert writer.events_handed == feeder.handed
    assert writer.events_written + writer.unwritten == feeder.handed
    (end,) = own_records(writer.paths[-1], "end")
    assert end["args"]["lost"]["unwritten"] == writer.unwritten, end


@pytest.mark.kernel
def test_a_full_disk_keeps_whole_members_counts_the_rest_and_resumes_when_room_returns(root_required):
    messages: list[str] = []
    with small_tmpfs("8m") as disk:
        filler = fill(disk, leave=256 << 10)
        writer = _writer(disk, messages)
        feeder = Feeder(writer)
        feeder.until(lambda: writer.trouble, "the writer found the disk full")
        assert messages == [f"cannot write {writer.paths[0]}: No space left on device (ENOSPC); "
                            "events are counted as lost until it can write again"]
        assert writer.unwritten > 0 and writer.events_written > 0
        filler.unlink()
        feeder.until(lambda: len(writer.paths) == 2 and writer.trouble is None, "a second part after room came back")
        for _ in range(3):
            feeder.batch()
        writer.close()
        assert messages[1].startswith(f"writing again, in {writer.paths[1]} (")
        _kept_loads_whole(writer)
        _accounted(writer, feeder)
        assert own_records(writer.paths[0], "end") == []  # the full part ended where the disk did
        (start,) = own_records(writer.paths[1], "start")
        assert "No space left on device" in start["args"]["after_trouble"]["error"]


@pytest.mark.kernel
def test_a_file_system_turned_read_only_and_back(root_required):
    messages: list[str] = []
    with faulty_fs("--fail-after-bytes", str(256 << 10), "--errno", "EROFS") as disk:
        writer = _writer(disk.point, messages)
        feeder = Feeder(writer)
        feeder.until(lambda: writer.trouble, "the writer found the file system read-only")
        assert messages[0] == (f"cannot write {writer.paths[0]}: Read-only file system (EROFS); "
                               "events are counted as lost until it can write again")
        written = writer.events_written
        disk.heal()
        feeder.until(lambda: writer.trouble is None and writer.events_written > written,
                     "events written again after the file system healed")
        writer.close()
        _kept_loads_whole(writer)
        _accounted(writer, feeder)


@pytest.mark.kernel
def test_trace_files_deleted_while_written(root_required):
    messages: list[str] = []
    with small_tmpfs("16m") as disk:
        directory = disk / "traces"
        directory.mkdir(mode=0o700)
        writer = _writer(directory, messages)
        feeder = Feeder(writer)
        for _ in range(3):
            feeder.batch()
        wait_until(lambda: writer.events_written == feeder.handed, "the first batches on disk")
        first = writer.paths[0]
        for path in directory.iterdir():
            path.unlink()
        feeder.until(lambda: writer.trouble, "the writer noticed its file was deleted")
        assert messages[0].startswith(f"cannot write {first}: the trace file was deleted while being written")
        feeder.until(lambda: writer.trouble is None, "a new part in the directory, still there")
        shutil.rmtree(directory)
        feeder.until(lambda: writer.trouble, "the writer noticed its directory was removed")
        for _ in range(3):
            feeder.batch()
        writer.close()  # nowhere to write the end record: no error either
    assert writer.paths == [] and writer.events_written == 0
    assert writer.unwritten == writer.events_handed == feeder.handed


@pytest.mark.kernel
def test_a_disk_answering_eio(root_required):
    messages: list[str] = []
    with faulty_fs("--fail-after-bytes", str(256 << 10)) as disk:
        writer = _writer(disk.point, messages)
        feeder = Feeder(writer)
        feeder.until(lambda: writer.trouble, "the writer met the I/O error")
        assert messages[0] == (f"cannot write {writer.paths[0]}: Input/output error (EIO); "
                               "events are counted as lost until it can write again")
        writer.close()
        assert writer.paths[0].exists()
        damage = []
        assert load([writer.paths[0]], damage=damage).height == writer.events_written > 0
        assert not any(damage), damage
        assert writer.events_written + writer.unwritten == feeder.handed
