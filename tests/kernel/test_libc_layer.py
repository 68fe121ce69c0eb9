"""The libc layer: 1,000 10-byte fwrite calls and an fflush become a few write syscalls, each
linked to the stdio call that made it; libc's pread wrapper and its syscall, one to one."""

from __future__ import annotations

import json
import subprocess

import polars as pl
import pytest

from ioobserve.data import schema as s
from ioobserve.trace.read.reader import load
from tests.conftest import ROOT
from tests.kernel import programs
from tests.kernel.kernel_side import ran
from tests.kernel.library_checks import check_stdio_workload
from tests.kernel.recorder import record_command

pytestmark = pytest.mark.matrix  # also run in each guest of the kernel matrix

SOURCE = ROOT / "tests" / "workloads" / "stdio_workload.c"


def _record_stdio(side) -> dict:
    binary = side.scratch / "stdio_workload"
    subprocess.run(["cc", "-O2", "-o", str(binary), str(SOURCE)], check=True)
    data = side.scratch / "records.txt"
    # ns: a write's end is compared with its fwrite's, which whole µs, rounded apart, can tie or cross
    done = record_command(side.out / "trace", [str(binary), str(data)], "--layers", "libc", "--precision", "ns")
    return ran(done) | {"data": str(data)}


@pytest.mark.kernel
def test_stdio_calls_and_the_syscalls_they_became(root_required, kernel_side):
    recorded = kernel_side(_record_stdio)
    done = recorded.done()
    assert done.returncode == 0, done.stderr
    report = json.loads(next(line for line in done.stdout.splitlines() if line.startswith('{"pid"')))
    frame = load(recorded.traces()).filter((pl.col(s.PID) == report["pid"]) & (pl.col(s.PATH) == recorded["data"]))
    check_stdio_workload(frame, report)


def _load_per_probe_programs(side) -> dict:
    """Each per-probe program loaded: its name and the type of program the kernel made of it."""
    from bcc import BPF

    from ioobserve.collect.recording import load_probes
    from ioobserve.probes import layers as ly
    from ioobserve.probes.attach.uprobes import RETURN_PROGRAM, SITE_ENTRY_PROGRAM
    from ioobserve.probes.maps.call_table import HDF5, LIBC, MPIIO, TLS, entry_program
    from ioobserve.probes.maps.call_table import PYTHON

    probes = load_probes(layers=ly.DEFAULT | set(ly.LIBRARY_LAYERS))
    try:
        names = [entry_program(spec.op) for spec in LIBC + HDF5 + MPIIO + TLS + PYTHON] + [RETURN_PROGRAM, SITE_ENTRY_PROGRAM]
        return {"loaded": [[name, programs.program_type(probes.bpf.load_func(name.encode(), BPF.KPROBE).fd)] for name in names],
                "kprobe": BPF.KPROBE}
    finally:
        probes.close()


@pytest.mark.kernel
def test_per_probe_programs_pass_the_verifier(root_required, kernel_side):
    """Kernels without uprobe_multi links get one perf event per probe, with an entry program
    per op: those programs must load too, though this kernel takes the links."""
    recorded = kernel_side(_load_per_probe_programs)
    assert len(recorded["loaded"]) > 2
    for program, kind in recorded["loaded"]:
        assert kind == recorded["kprobe"], program
