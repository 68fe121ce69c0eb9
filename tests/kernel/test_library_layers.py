"""The HDF5 and MPI-IO layers on real libraries: h5py's bundled libhdf5 writing and reading a
dataset, and mpi4py on Debian's MPICH with two ranks writing one file collectively. Each
library call is named by its file and linked to the syscalls it made."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest

from ioobserve import schema as s
from ioobserve.trace.reader import load
from tests.conftest import PYTHON, ROOT
from tests.kernel.recorder import Recorder, Workload, record_command

WORKLOADS = ROOT / "tests" / "workloads"
MPICH = Path("/usr/lib/x86_64-linux-gnu/libmpich.so.12")


def _reports(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith('{"pid"')]


def _children(frame: pl.DataFrame, parents: pl.DataFrame) -> pl.DataFrame:
    """Events of `frame` whose parent is one of `parents` (same thread, parent's ts)."""
    return frame.join(parents.select(s.TID, pl.col(s.TS).alias(s.PARENT_TS)), on=[s.TID, s.PARENT_TS], how="semi")


def _syscalls(frame: pl.DataFrame, op: str) -> pl.DataFrame:
    return frame.filter((pl.col(s.LAYER) == s.LAYER_SYSCALL) & (pl.col(s.OP) == op))


@pytest.mark.kernel
def test_hdf5_calls_of_h5py_and_their_syscalls(root_required, tmp_path):
    data = tmp_path / "values.h5"
    # h5py's libhdf5 is probed when a process first maps it, some ms later under load: calls
    # made before that are missed. A process holding it when the recording starts has it
    # probed at the start; the measured one then finds it probed.
    holder = Workload([PYTHON, "-c", "import h5py; print('READY', flush=True); input()"])
    recorder = Recorder(tmp_path / "trace", "--layers", "hdf5")
    workload = subprocess.run([PYTHON, str(WORKLOADS / "hdf5_workload.py"), str(data)], capture_output=True, text=True, check=False,
                              timeout=120)
    holder.go()
    code, out, stderr = recorder.stop()
    assert workload.returncode == 0, workload.stderr
    assert code == 0, stderr
    assert "functions in 1 hdf5 file(s)" in " ".join(out.split()), out
    report = _reports(workload.stdout)[0]
    frame = load(recorder.traces()).filter(pl.col(s.PID) == report["pid"])
    check_hdf5_workload(frame, report, str(data))


def check_hdf5_workload(frame: pl.DataFrame, report: dict, data: str) -> None:
    """tests/workloads/hdf5_workload.py's calls (`frame`: its process's events) against its
    report: each HDF5 call once, named by its file (`data`, as the trace names it), the
    dataset's bytes in the syscalls of H5Dwrite and H5Dread, every syscall on it inside one."""
    hdf5 = frame.filter(pl.col(s.LAYER) == s.LAYER_HDF5)
    ops = hdf5.get_column(s.OP).to_list()
    for op in ("H5Fcreate", "H5Dcreate2", "H5Dwrite", "H5Awrite", "H5Fopen", "H5Oopen", "H5Dread"):
        assert ops.count(op) == 1, (op, ops)
    # Every call is named by its file, through the handle it was made with.
    assert hdf5.get_column(s.PATH).to_list() == [data] * hdf5.height

    # The dataset's bytes go down in the syscalls of H5Dwrite and come back in those of H5Dread.
    for call, syscall in (("H5Dwrite", "pwrite64"), ("H5Dread", "pread64")):
        moved = _children(_syscalls(frame, syscall), hdf5.filter(pl.col(s.OP) == call))
        assert moved.get_column(s.BYTES).sum() == report["bytes"], call
    # Every syscall on the file happened inside an HDF5 call: HDF5 is the only one using it.
    on_file = frame.filter((pl.col(s.LAYER) == s.LAYER_SYSCALL) & (pl.col(s.PATH) == data))
    # two h5py.File: each closes its one descriptor; how many opens, stats, reads and writes
    # HDF5 makes in between is its own version's affair
    assert on_file.filter(pl.col(s.OP) == "close").height == 2
    assert {"openat", "pwrite64", "pread64"} <= set(on_file.get_column(s.OP)), on_file.get_column(s.OP).to_list()
    assert _children(on_file, hdf5).height == on_file.height


@pytest.fixture
def mpi4py_env(tmp_path) -> dict[str, str]:
    """mpi4py's wheel loads MPICH as libmpi.so.12; Debian names its MPICH libmpich.so.12."""
    shim = tmp_path / "libmpi"
    shim.mkdir()
    (shim / "libmpi.so.12").symlink_to(MPICH)
    return {"LD_LIBRARY_PATH": str(shim)}


@pytest.mark.kernel
def test_mpiio_collective_calls_per_rank(root_required, tmp_path, mpi4py_env, monkeypatch):
    for name, value in mpi4py_env.items():
        monkeypatch.setenv(name, value)
    data = tmp_path / "shared.dat"
    command = [shutil.which("mpiexec") or "mpiexec", "-n", "2", PYTHON, str(WORKLOADS / "mpiio_workload.py"), str(data)]
    done = record_command(tmp_path / "trace", command, "--layers", "mpiio")
    assert done.returncode == 0, done.stderr
    reports = {r["rank"]: r for r in _reports(done.stdout)}
    assert sorted(reports) == [0, 1]
    check_mpiio_workload(load(sorted((tmp_path / "trace").glob("*.pfw.gz"))), reports, str(data))


def check_mpiio_workload(frame: pl.DataFrame, reports: dict[int, dict], data: str) -> None:
    """tests/workloads/mpiio_workload.py's ranks (`reports` by rank) in a trace: each rank's
    collective calls in order, named by the file (`data`, as the trace names it), with their
    bytes, offsets and counts, and the file I/O done inside them."""
    written = read = 0
    for rank, report in reports.items():
        mine = frame.filter(pl.col(s.PID) == report["pid"])
        mpiio = mine.filter(pl.col(s.LAYER) == s.LAYER_MPIIO)
        ops = mpiio.get_column(s.OP).to_list()
        assert ops == ["MPI_File_open", "MPI_File_write_at_all", "MPI_File_close",
                       "MPI_File_open", "MPI_File_read_at_all", "MPI_File_close"], ops
        assert mpiio.get_column(s.PATH).to_list() == [data] * mpiio.height
        assert mpiio.get_column(s.RANK).to_list() == [rank] * mpiio.height
        transfers = mpiio.filter(pl.col(s.OP).cat.ends_with("_at_all"))
        assert transfers.get_column(s.BYTES).to_list() == [report["bytes"]] * 2  # count x sizeof(MPI_DOUBLE)
        assert transfers.get_column(s.OFFSET).to_list() == [rank * report["bytes"]] * 2
        assert transfers.get_column(s.ARG).to_list() == [report["elements"]] * 2
        # Each rank opens the file itself, inside each of its MPI_File_open calls.
        opens = mpiio.filter(pl.col(s.OP) == "MPI_File_open")
        openats = _syscalls(mine, "openat").filter(pl.col(s.PATH) == data)
        assert opens.join(openats.select(s.TID, pl.col(s.PARENT_TS).alias(s.TS)), on=[s.TID, s.TS], how="semi").height == 2
        written += _children(_syscalls(mine, "pwrite64"), transfers).get_column(s.BYTES).sum()
        read += _children(_syscalls(mine, "pread64"), transfers).get_column(s.BYTES).sum()
    # Whichever ranks did the file I/O, it was done inside the collective calls.
    assert written == read == sum(r["bytes"] for r in reports.values())
