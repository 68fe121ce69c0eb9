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

from ioobserve.data import schema as s
from ioobserve.trace.read.reader import load
from tests.conftest import PYTHON, ROOT
from tests.kernel.library_checks import check_hdf5_workload, check_mpiio_workload
from tests.kernel.recorder import Recorder, Workload, record_command

WORKLOADS = ROOT / "tests" / "workloads"
MPICH = Path("/usr/lib/x86_64-linux-gnu/libmpich.so.12")


def _reports(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith('{"pid"')]


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


