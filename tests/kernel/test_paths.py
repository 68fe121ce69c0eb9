"""dev, inode and path in events equal os.fstat/realpath: openat with a dirfd, a symlinked
directory, an fd inherited over fork, dup2, a file opened before recording began, and a new
file with a deleted file's inode number."""

from __future__ import annotations

import sys

import polars as pl
import pytest

from ioobserve.data import schema as s
from ioobserve.trace.read.reader import load
from tests.conftest import ROOT
from tests.kernel.recorder import Recorder, Workload, json_line, record_command

WORKLOAD = str(ROOT / "tests" / "workloads" / "paths_workload.py")


@pytest.mark.kernel
def test_identity_and_paths(root_required, tmp_path):
    workload = Workload([sys.executable, WORKLOAD, str(tmp_path / "work")])
    recorder = Recorder(tmp_path / "trace", "--pid", str(workload.pid))
    out = workload.go()
    code, _, err = recorder.stop()
    assert code == 0, err
    frame = load(recorder.traces())
    cases = json_line(out, "cases")["cases"]
    assert {c["case"] for c in cases} == {"early", "dirfd", "symlink", "inherited", "dup2", "reused inode"}, \
        "the file system gave no new file a deleted one's inode number"
    for case in cases:
        reads = frame.filter((pl.col(s.PID) == case["pid"]) & (pl.col(s.FD) == case["fd"]) & (pl.col(s.OP) == "read"))
        assert reads.height == 1, case
        event = reads.row(0, named=True)
        assert (event[s.PATH], event[s.DEV], event[s.INO]) == (case["path"], case["dev"], case["ino"]), case["case"]
        assert event[s.BYTES] == 100 and event[s.OFFSET] == 0
    opens = frame.filter(pl.col(s.OP) == "openat")
    dirfd_open = opens.filter(pl.col(s.PATH).cat.ends_with("/dirfd.bin")).row(0, named=True)
    assert dirfd_open[s.PATH] == next(c["path"] for c in cases if c["case"] == "dirfd")
    dup = frame.filter(pl.col(s.OP) == "dup2").row(0, named=True)
    assert dup[s.RET] == 100 and dup[s.PATH].endswith("/duped.bin")


@pytest.mark.kernel
def test_a_file_name_that_is_not_utf8_is_recorded_escaped(root_required, tmp_path):
    """File names are bytes: one that is not UTF-8 is shown with \\xNN for its odd bytes, in
    its path argument and in the path the kernel resolves, and the recording goes on."""
    work = tmp_path / "work"
    work.mkdir()
    script = ("import os, sys\n"
              "name = os.fsencode(sys.argv[1]) + b'/caf\\xe9.bin'\n"
              "fd = os.open(name, os.O_CREAT | os.O_WRONLY, 0o600); os.write(fd, b'x' * 10); os.close(fd)\n"
              "fd = os.open(name, os.O_RDONLY); os.read(fd, 100); os.close(fd)\n")
    ran = record_command(tmp_path / "trace", [sys.executable, "-c", script, str(work)])
    assert ran.returncode == 0, ran.stderr
    frame = load(sorted((tmp_path / "trace").glob("*.pfw.gz")))
    ours = frame.filter(pl.col(s.PATH).cast(pl.String) == f"{work}/caf\\xe9.bin")
    assert ours.filter(pl.col(s.OP) == "openat").height == 2
    assert ours.filter(pl.col(s.OP) == "write").get_column(s.BYTES).to_list() == [10]
    assert ours.filter(pl.col(s.OP) == "read").get_column(s.BYTES).to_list() == [10]


@pytest.mark.kernel
def test_a_file_renamed_into_place_and_read_at_once_is_named_by_its_new_path(root_required, tmp_path):
    """A download's pattern: written under a temporary name, renamed, opened by its new name
    and read within microseconds, so in the batch that holds the rename; six times, as two
    threads, so that one batch holds several renames."""
    work = tmp_path / "work"
    work.mkdir()
    script = ("import os, sys, threading\n"
              "def place(n):\n"
              "    for i in range(3):\n"
              "        tmp, final = f'{sys.argv[1]}/{n}-{i}.tmp', f'{sys.argv[1]}/{n}-{i}.bin'\n"
              "        fd = os.open(tmp, os.O_CREAT | os.O_WRONLY, 0o600); os.write(fd, b'x' * 100); os.close(fd)\n"
              "        os.rename(tmp, final)\n"
              "        fd = os.open(final, os.O_RDONLY); os.read(fd, 1000); os.close(fd)\n"
              "threads = [threading.Thread(target=place, args=(n,)) for n in range(2)]\n"
              "[t.start() for t in threads]; [t.join() for t in threads]\n")
    ran = record_command(tmp_path / "trace", [sys.executable, "-c", script, str(work)])
    assert ran.returncode == 0, ran.stderr
    ours = load(sorted((tmp_path / "trace").glob("*.pfw.gz"))).filter(pl.col(s.PATH).cast(pl.String).str.starts_with(f"{work}/"))
    names = [f"{n}-{i}" for n in range(2) for i in range(3)]
    reads = ours.filter(pl.col(s.OP) == "read")
    assert sorted(reads.get_column(s.PATH).cast(pl.String).to_list()) == [f"{work}/{name}.bin" for name in names]
    assert reads.get_column(s.BYTES).to_list() == [100] * 6
    writes = ours.filter(pl.col(s.OP) == "write")
    assert sorted(writes.get_column(s.PATH).cast(pl.String).to_list()) == [f"{work}/{name}.tmp" for name in names]
