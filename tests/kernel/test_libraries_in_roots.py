"""The libc, HDF5, MPI-IO and TLS layers for jobs in a root file system of their own
(ci/roots.sh: Debian's unstable suite, with its own libc, h5py's libhdf5, MPICH and libssl),
entered by chroot or by a new mount namespace and pivot_root; exact against the workloads'
own counts.

A library copy new to the node is probed a moment after its first process maps it, so calls
made before are missed (the summary says how late). These jobs enter a root whose copies a
process running before the recording maps already, as a pod's or an image's long-lived
processes do: those copies are probed before the command starts."""

from __future__ import annotations

import json
import subprocess

import polars as pl
import pytest

from ioobserve.data import schema as s
from ioobserve.trace.read.reader import load
from tests.conftest import ROOT
from tests.kernel.certificates import self_signed
from tests.kernel.library_checks import check_hdf5_workload, check_mpiio_workload, check_ssl_calls, check_stdio_workload
from tests.kernel.recorder import Workload, record_command
from tests.roots import WAYS

WORKLOADS = ROOT / "tests" / "workloads"
PYTHON = "/usr/bin/python3"  # the root's own (3.14), with h5py
HOLD_LIBRARIES = "import h5py, ssl; print('READY', flush=True); input()"  # its libc, libhdf5 and libssl


def _reports(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith('{"pid"')]


@pytest.fixture
def holder(job_root):
    """A process of the test root holding its libc, libhdf5 and libssl from before the recording."""
    process = Workload(job_root.command("chroot", [PYTHON, "-c", HOLD_LIBRARIES]))
    yield process
    process.go()


@pytest.fixture
def mpiio_workload(job_root) -> tuple[str, Workload]:
    """tests/workloads/mpiio_workload.c built against MPICH (its path inside the root), and one
    process of it holding the root's libmpich from before the recording."""
    inside, host = job_root.scratch()
    subprocess.run(["mpicc", "-O2", "-o", str(host / "mpiio_workload"), str(WORKLOADS / "mpiio_workload.c")], check=True)
    binary = f"{inside}/mpiio_workload"
    process = Workload(job_root.command("chroot", [binary, "--hold"]))
    yield binary
    process.go()


@pytest.mark.kernel
@pytest.mark.parametrize("way", WAYS)
def test_stdio_calls_with_the_roots_own_libc(job_root, holder, tmp_path, way):
    """1000 fwrite calls through the root's libc, not the host's, each in the trace."""
    inside, host = job_root.scratch()
    subprocess.run(["cc", "-O2", "-o", str(host / "stdio_workload"), str(WORKLOADS / "stdio_workload.c")], check=True)
    data = f"{inside}/records.txt"
    done = record_command(tmp_path / "trace", job_root.command(way, [f"{inside}/stdio_workload", data]),
                          "--layers", "libc", "--precision", "ns")
    assert done.returncode == 0, done.stderr
    summary = " ".join(done.stdout.split())
    assert f"/usr/lib/x86_64-linux-gnu/libc.so.6 in {job_root.path}" in summary, summary
    report = _reports(done.stdout)[0]
    frame = load(sorted((tmp_path / "trace").glob("*.pfw.gz"))).filter(
        (pl.col(s.PID) == report["pid"]) & (pl.col(s.PATH) == job_root.traced_path(data, way)))
    check_stdio_workload(frame, report)


@pytest.mark.kernel
@pytest.mark.parametrize("way", WAYS)
def test_hdf5_calls_with_the_roots_own_libhdf5(job_root, holder, tmp_path, way):
    """h5py's calls through the root's libhdf5 (Debian's libhdf5_serial), each once."""
    inside, host = job_root.scratch()
    script = job_root.copy_in(WORKLOADS / "hdf5_workload.py", host)
    data = f"{inside}/values.h5"
    done = record_command(tmp_path / "trace", job_root.command(way, [PYTHON, script, data]), "--layers", "hdf5")
    assert done.returncode == 0, done.stderr
    summary = " ".join(done.stdout.split())
    assert "/usr/lib/x86_64-linux-gnu/libhdf5_serial.so" in summary, summary
    report = _reports(done.stdout)[0]
    frame = load(sorted((tmp_path / "trace").glob("*.pfw.gz"))).filter(pl.col(s.PID) == report["pid"])
    check_hdf5_workload(frame, report, job_root.traced_path(data, way))


@pytest.mark.kernel
@pytest.mark.parametrize("way", WAYS)
def test_mpiio_collective_calls_with_the_roots_own_mpich(job_root, mpiio_workload, tmp_path, way):
    """Two ranks on the root's MPICH (libmpich.so.12, launched by its own mpiexec): each rank's
    collective calls, with their bytes and the file I/O inside them."""
    inside, _ = job_root.scratch()
    data = f"{inside}/shared.dat"
    command = job_root.command(way, ["/usr/bin/mpiexec.hydra", "-n", "2", mpiio_workload, data])
    done = record_command(tmp_path / "trace", command, "--layers", "mpiio")
    assert done.returncode == 0, done.stderr
    summary = " ".join(done.stdout.split())
    assert "/usr/lib/x86_64-linux-gnu/libmpich.so.12" in summary, summary
    reports = {report["rank"]: report for report in _reports(done.stdout)}
    assert sorted(reports) == [0, 1], done.stdout
    check_mpiio_workload(load(sorted((tmp_path / "trace").glob("*.pfw.gz"))), reports, job_root.traced_path(data, way))


@pytest.mark.kernel
@pytest.mark.parametrize("way", WAYS)
def test_ssl_calls_with_the_roots_own_libssl(job_root, holder, tmp_path, way):
    """HTTPS through the root's Python and libssl: every SSL read and write, through that copy."""
    inside, host = job_root.scratch()
    script = job_root.copy_in(WORKLOADS / "tls_workload.py", host)
    cert, key = self_signed(host)
    done = record_command(tmp_path / "trace", job_root.command(way, [PYTHON, script, f"{inside}/{cert.name}",
                                                                     f"{inside}/{key.name}"]), "--layers", "tls")
    assert done.returncode == 0, done.stderr
    summary = " ".join(done.stdout.split())
    assert f"/usr/lib/x86_64-linux-gnu/libssl.so.3 in {job_root.path}" in summary, summary
    report = _reports(done.stdout)[0]
    events = load(sorted((tmp_path / "trace").glob("*.pfw.gz")))
    check_ssl_calls(events.filter((pl.col(s.PID) == report["pid"]) & (pl.col(s.LAYER) == s.LAYER_TLS)), report)
