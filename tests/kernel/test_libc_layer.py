"""The libc layer: 1,000 10-byte fwrite calls and an fflush become a few write syscalls, each
linked to the stdio call that made it; libc's pread wrapper and its syscall, one to one."""

from __future__ import annotations

import json
import subprocess

import polars as pl
import pytest

from ioobserve import schema as s
from ioobserve.trace.reader import load
from tests.conftest import ROOT
from tests.kernel import programs
from tests.kernel.kernel_side import ran
from tests.kernel.recorder import record_command

pytestmark = pytest.mark.matrix  # also run in each guest of the kernel matrix

SOURCE = ROOT / "tests" / "workloads" / "stdio_workload.c"


def _children(frame: pl.DataFrame, parents: pl.DataFrame) -> pl.DataFrame:
    """Events of `frame` whose parent is one of `parents` (same thread, parent's ts)."""
    return frame.join(parents.select(s.TID, pl.col(s.TS).alias(s.PARENT_TS)), on=[s.TID, s.PARENT_TS], how="semi")


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


def check_stdio_workload(frame: pl.DataFrame, report: dict) -> None:
    """tests/workloads/stdio_workload.c's calls (`frame`: its events on its file) against its
    report: each stdio call, the write syscalls they became inside them, each pread wrapper
    with its one syscall."""
    stdio = frame.filter(pl.col(s.LAYER) == s.LAYER_STDIO)
    fwrites = stdio.filter(pl.col(s.OP) == "fwrite")
    assert fwrites.height == report["fwrites"]
    assert fwrites.get_column(s.BYTES).sum() == report["bytes"]
    assert stdio.filter(pl.col(s.OP) == "fflush").height == 1
    assert {"fopen", "setvbuf", "fclose"} <= set(stdio.get_column(s.OP).to_list())

    # The write syscalls: as many as stdio's buffer needs, every one inside an fwrite or the
    # fflush of this thread, the last one the fflush's; no POSIX event for libc's own write.
    writes = frame.filter((pl.col(s.LAYER) == s.LAYER_SYSCALL) & (pl.col(s.OP) == "write")).sort(s.TS)
    assert writes.height == report["write_syscalls"]
    assert writes.get_column(s.BYTES).sum() == report["bytes"]
    linked = writes.join(stdio.select(s.TID, pl.col(s.TS).alias(s.PARENT_TS), pl.col(s.OP).alias("parent_op"),
                                      pl.col(s.DUR).alias("parent_dur")), on=[s.TID, s.PARENT_TS], how="left")
    assert linked.get_column("parent_op").to_list() == ["fwrite"] * (report["write_syscalls"] - 1) + ["fflush"]
    assert linked.get_column(s.BYTES).to_list()[-1] == report["flushed"]
    assert linked.filter((pl.col(s.TS) < pl.col(s.PARENT_TS))
                         | (pl.col(s.TS) + pl.col(s.DUR) > pl.col(s.PARENT_TS) + pl.col("parent_dur"))).height == 0
    posix = frame.filter(pl.col(s.LAYER) == s.LAYER_POSIX)
    assert posix.filter(pl.col(s.OP) == "write").height == 0

    # The POSIX wrappers the program called itself: each pread with its one pread64 syscall.
    preads = posix.filter(pl.col(s.OP) == "pread")
    assert preads.height == report["preads"]
    assert preads.get_column(s.BYTES).sum() == report["read_bytes"]
    syscalls = frame.filter((pl.col(s.LAYER) == s.LAYER_SYSCALL) & (pl.col(s.OP) == "pread64"))
    children = _children(syscalls, preads)
    assert children.height == syscalls.height == report["preads"]
    assert sorted(children.get_column(s.OFFSET).to_list()) == sorted(preads.get_column(s.OFFSET).to_list())
    assert {"open", "close"} <= set(posix.get_column(s.OP).to_list())


def _load_per_probe_programs(side) -> dict:
    """Each per-probe program loaded: its name and the type of program the kernel made of it."""
    from bcc import BPF

    from ioobserve.collect.recording import load_probes
    from ioobserve.probes import layers as ly
    from ioobserve.probes.maps.call_table import HDF5, LIBC, MPIIO, TLS, entry_program
    from ioobserve.probes.maps.call_table import PYTHON
    from ioobserve.probes.attach.uprobes import RETURN_PROGRAM, SITE_ENTRY_PROGRAM

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
