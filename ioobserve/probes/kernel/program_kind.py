"""How the kernel is asked to load a program (type, expected attach type, BTF attach point),
and whether it takes a trivial one of a kind: a refusal costs no verifier time."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ioobserve.probes.kernel.bpf_syscall import prog_load

BPF_PROG_TYPE_KPROBE, BPF_PROG_TYPE_TRACEPOINT = 2, 5
BPF_PROG_TYPE_RAW_TRACEPOINT, BPF_PROG_TYPE_TRACING = 17, 26
BPF_TRACE_RAW_TP, BPF_TRACE_FENTRY, BPF_TRACE_FEXIT = 23, 24, 25
RETURN_ZERO = bytes.fromhex("b700000000000000" "9500000000000000")  # r0 = 0; exit


@dataclass(frozen=True)
class ProgramKind:
    """How the kernel is asked to load a program: its type, expected attach type and the BTF
    type it attaches to (0: none)."""

    prog_type: int
    attach_type: int = 0
    btf_id: int = 0


RAW = ProgramKind(BPF_PROG_TYPE_RAW_TRACEPOINT)
KPROBE = ProgramKind(BPF_PROG_TYPE_KPROBE)
TRACEPOINT = ProgramKind(BPF_PROG_TYPE_TRACEPOINT)


def fentry_kind(btf_id: int, exit_: bool = False) -> ProgramKind:
    """An fentry (or fexit) program on the function of this BTF id."""
    return ProgramKind(BPF_PROG_TYPE_TRACING, BPF_TRACE_FEXIT if exit_ else BPF_TRACE_FENTRY, btf_id)


def refusal(kind: ProgramKind) -> str:
    """Why the kernel refuses a trivial program of this kind ("" if it loads)."""
    try:
        fd = prog_load(kind.prog_type, RETURN_ZERO, b"ioo_probe", b"GPL", 0, kind.attach_type, kind.btf_id)
    except OSError as exc:
        return exc.strerror or str(exc)
    os.close(fd)
    return ""
