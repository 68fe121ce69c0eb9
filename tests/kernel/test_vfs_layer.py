"""The VFS layer: its programs pass this kernel's verifier, and `record --layers vfs` follows
what the kernel allows: where there are no kprobes it refuses with the reason and writes
nothing; where there are, each read syscall of a workload has one vfs_read child."""

from __future__ import annotations

import json
import sys

import polars as pl
import pytest

from ioobserve import schema as s
from ioobserve.probes import layers as ly
from ioobserve.trace.reader import load
from tests.conftest import ROOT
from tests.kernel import programs
from tests.kernel.recorder import record_command

WORKLOAD = ROOT / "tests" / "workloads" / "cold_read.py"


@pytest.mark.kernel
def test_vfs_programs_pass_the_verifier(root_required):
    from bcc import BPF

    from ioobserve.collect.recording import load_probes
    from ioobserve.probes.loader import VFS_FUNCTIONS, VFS_RETURN

    probes = load_probes(layers=ly.DEFAULT | {ly.VFS})
    try:
        for program in [entry for _, entry in VFS_FUNCTIONS] + [VFS_RETURN]:
            loaded = probes.bpf.load_func(program.encode(), BPF.KPROBE)  # loading needs no kprobes
            assert programs.program_type(loaded.fd) == BPF.KPROBE, program
    finally:
        probes.close()


@pytest.mark.kernel
def test_record_vfs_follows_the_kernel(root_required, tmp_path):
    from ioobserve.probes.capabilities import vfs_available

    data = tmp_path / "data.bin"
    data.write_bytes(b"x" * (1 << 20))
    mechanism, why = vfs_available()
    out = tmp_path / "trace"
    done = record_command(out, [sys.executable, str(WORKLOAD), str(data)], "--layers", "vfs")
    if mechanism is None:
        assert done.returncode != 0
        assert done.stderr.strip().count("\n") == 0 and why in done.stderr and "Traceback" not in done.stderr
        assert not list(out.glob("*.pfw.gz"))
        return
    assert done.returncode == 0, done.stderr
    report = json.loads(next(line for line in done.stdout.splitlines() if line.startswith('{"pid"')))
    frame = load(sorted(out.glob("*.pfw.gz"))).filter((pl.col(s.PID) == report["pid"]) & (pl.col(s.PATH) == str(data)))
    reads = frame.filter((pl.col(s.LAYER) == s.LAYER_SYSCALL) & (pl.col(s.OP) == "read"))
    vfs = frame.filter((pl.col(s.LAYER) == s.LAYER_VFS) & (pl.col(s.OP) == "vfs_read"))
    assert reads.height == vfs.height == report["reads"]
    linked = vfs.join(reads.select(s.TID, pl.col(s.TS).alias(s.PARENT_TS)), on=[s.TID, s.PARENT_TS], how="semi")
    assert linked.height == vfs.height and vfs.get_column(s.BYTES).sum() == report["bytes"]
