"""The VFS layer: its programs of both kinds pass this kernel's verifier, and `record --layers
vfs` follows what the kernel allows: where it has neither kprobes nor fentry it refuses with
the reason and writes nothing; where it has one, the VFS's own events are exact: each read
syscall of a workload has one vfs_read child, each sendfile, copy_file_range and splice its
copy in the VFS, and an exec's loader reads exactly what the ELF file says, through no
syscall at all. Run under both ways where the kernel has both (the kernel matrix's guests)."""

from __future__ import annotations

import json
import os
import shutil
import sys

import polars as pl
import pytest

from ioobserve.data import schema as s
from ioobserve.probes import layers as ly
from ioobserve.trace.read.reader import load
from tests.conftest import ROOT
from tests.kernel import programs
from tests.kernel.kernel_side import ran
from tests.kernel.recorder import record_command

WORKLOAD = ROOT / "tests" / "workloads" / "cold_read.py"
VFS_WORKLOAD = ROOT / "tests" / "workloads" / "vfs_workload.py"
# the VFS op each copy syscall becomes (sendfile's is do_splice_direct)
COPY_OPS = {"sendfile": "vfs_splice_direct", "copy_file_range": "vfs_copy_file_range", "splice": "vfs_splice"}


def _ways_in() -> list[str]:
    from ioobserve.probes.attach.vfs import VfsLayer
    from ioobserve.probes.kernel.btf import Btf

    return [way for way in ("fentry", "kprobe") if VfsLayer(Btf.load(), wanted=way).mechanism]


def _load_vfs_programs(side) -> dict:
    """Every VFS program of both kinds loaded: (program, the type the kernel made of it) per kind."""
    from ioobserve.collect.recording import load_probes
    from ioobserve.probes.attach.vfs import VfsLayer
    from ioobserve.probes.kernel.btf import Btf

    btf = Btf.load()
    probes = load_probes(layers=ly.DEFAULT | {ly.VFS})
    try:
        kprobes = VfsLayer(btf, wanted="kprobe")
        kprobes.mechanism = "kprobe"  # loading a kprobe program needs no kprobes
        loaded = {"kprobe": [[program, programs.program_type(probes.load_program(program, kind))]
                             for program, kind in kprobes.programs()]}
        fentry = VfsLayer(btf, wanted="fentry")  # none where fentry is refused
        loaded["fentry"] = [[program, programs.program_type(probes.load_program(program, kind))]
                            for program, kind in fentry.programs()]
        return {"loaded": loaded, "kprobe_functions": len(kprobes.functions), "left_out": str(kprobes.left_out)}
    finally:
        probes.close()


@pytest.mark.kernel
@pytest.mark.matrix
def test_vfs_programs_pass_the_verifier(root_required, kernel_side):
    from ioobserve.probes.kernel.program_kind import BPF_PROG_TYPE_KPROBE, BPF_PROG_TYPE_TRACING

    recorded = kernel_side(_load_vfs_programs)
    assert recorded["kprobe_functions"], recorded["left_out"]
    assert recorded["loaded"]["kprobe"]
    for program, kind in recorded["loaded"]["kprobe"]:
        assert kind == BPF_PROG_TYPE_KPROBE, program
    for program, kind in recorded["loaded"]["fentry"]:
        assert kind == BPF_PROG_TYPE_TRACING, program


def _record_vfs(side) -> dict:
    from ioobserve.probes.capabilities import vfs_available

    data = side.scratch / "data.bin"
    data.write_bytes(b"x" * (1 << 20))
    mechanism, why = vfs_available()
    done = record_command(side.out / "trace", [sys.executable, str(WORKLOAD), str(data)], "--layers", "vfs")
    return ran(done) | {"mechanism": mechanism, "why": why, "data": str(data)}


@pytest.mark.kernel
@pytest.mark.matrix
def test_record_vfs_follows_the_kernel(root_required, kernel_side):
    recorded = kernel_side(_record_vfs)
    done = recorded.done()
    if recorded["mechanism"] is None:
        assert done.returncode != 0
        assert done.stderr.strip().count("\n") == 0 and recorded["why"] in done.stderr and "Traceback" not in done.stderr
        assert not recorded.traces()
        return
    assert done.returncode == 0, done.stderr
    report = json.loads(next(line for line in done.stdout.splitlines() if line.startswith('{"pid"')))
    frame = load(recorded.traces()).filter((pl.col(s.PID) == report["pid"]) & (pl.col(s.PATH) == recorded["data"]))
    reads = frame.filter((pl.col(s.LAYER) == s.LAYER_SYSCALL) & (pl.col(s.OP) == "read"))
    vfs = frame.filter((pl.col(s.LAYER) == s.LAYER_VFS) & (pl.col(s.OP) == "vfs_read"))
    assert reads.height == vfs.height == report["reads"]
    linked = vfs.join(reads.select(s.TID, pl.col(s.TS).alias(s.PARENT_TS)), on=[s.TID, s.PARENT_TS], how="semi")
    assert linked.height == vfs.height and vfs.get_column(s.BYTES).sum() == report["bytes"]


def _children(frame: pl.DataFrame, parents: pl.DataFrame) -> pl.DataFrame:
    """The events of `frame` whose parent is one of `parents` (same thread, its start)."""
    return frame.join(parents.select(s.TID, pl.col(s.TS).alias(s.PARENT_TS)), on=[s.TID, s.PARENT_TS], how="semi")


def _record_copies(side, way: str) -> dict:
    """The copies workload under `way` where this kernel has it; else the refusal, and why."""
    from ioobserve.probes.attach.vfs import VfsLayer
    from ioobserve.probes.kernel.btf import Btf

    env = {**os.environ, "IOOBSERVE_VFS_PROBES": way}
    if way not in _ways_in():
        done = record_command(side.out / "trace", ["true"], "--layers", "vfs", env=env)
        return ran(done) | {"available": False, "unavailable": VfsLayer(Btf.load(), wanted=way).unavailable}
    work = side.scratch / "work"
    work.mkdir()
    done = record_command(side.out / "trace", [sys.executable, str(VFS_WORKLOAD), str(work), shutil.which("true")],
                          "--layers", "vfs", env=env)
    return ran(done) | {"available": True}


@pytest.mark.kernel
@pytest.mark.matrix
@pytest.mark.parametrize("way", ["fentry", "kprobe"])
def test_the_vfs_sees_copies_and_exec_reads_exactly(root_required, kernel_side, way):
    recorded = kernel_side(_record_copies, way)
    done = recorded.done()
    if not recorded["available"]:
        assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
        assert recorded["unavailable"] in done.stderr
        return
    assert done.returncode == 0, done.stderr
    assert ("fentry/fexit" if way == "fentry" else "kprobes/kretprobes") in " ".join(done.stdout.split())
    report = json.loads(next(line for line in done.stdout.splitlines() if line.startswith('{"pid"')))
    frame = load(recorded.traces())
    mine = frame.filter(pl.col(s.PID) == report["pid"])
    syscalls = mine.filter(pl.col(s.LAYER) == s.LAYER_SYSCALL)
    vfs = mine.filter(pl.col(s.LAYER) == s.LAYER_VFS)
    for call, (count, moved) in report["copies"].items():
        # once per call, on the workload's files (shutil.copy of the binary uses sendfile too)
        calls = syscalls.filter((pl.col(s.OP) == call) & ((pl.col(s.FLAGS) & 0x20) == 0)
                                & pl.col(s.PATH).is_in([report["src"], report["dst"]]))
        assert calls.height == count and calls.get_column(s.RET).sum() == moved, call
        copies = _children(vfs.filter(pl.col(s.OP) == COPY_OPS[call]), calls)
        sides = copies.filter((pl.col(s.FLAGS) & 0x20) == 0)  # a call's first side that is a file
        assert sides.height == count and sides.get_column(s.RET).sum() == moved, (call, copies)
        assert set(copies.get_column(s.PATH).to_list()) <= {report["src"], report["dst"]}
    reads = syscalls.filter((pl.col(s.OP) == "read") & (pl.col(s.PATH) == report["src"]))
    vfs_reads = _children(vfs.filter(pl.col(s.OP) == "vfs_read"), reads)
    assert reads.height == vfs_reads.height == report["reads"][0]
    assert vfs_reads.get_column(s.RET).sum() == report["reads"][1]
    program = frame.filter(pl.col(s.PATH) == report["exec"]["path"])
    loads = program.filter((pl.col(s.LAYER) == s.LAYER_VFS) & (pl.col(s.OP) == "vfs_kernel_read"))
    got = sorted(loads.select(s.OFFSET, s.RET).rows())
    assert got == sorted(tuple(read) for read in report["exec"]["reads"])
    (child,) = loads.get_column(s.PID).unique().to_list()  # the exec'd process: its loader read through no syscall
    assert child != report["pid"]
    assert program.filter((pl.col(s.PID) == child) & (pl.col(s.LAYER) == s.LAYER_SYSCALL)
                          & pl.col(s.OP).is_in(["read", "pread64"])).height == 0
