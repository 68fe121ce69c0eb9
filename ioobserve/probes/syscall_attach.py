"""How the syscall layer's programs reach the kernel here: fentry/fexit on the traced syscall
functions only, else tp_btf on sys_enter/sys_exit, else raw tracepoints; the first this
kernel allows, found by loading a two-instruction program of each kind (a refusal costs no
verifier time). IOOBSERVE_SYSCALL_PROBES=fentry|tp_btf|raw asks for one (tests, benchmarks)."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, replace

from ioobserve.probes.bpf_syscall import prog_load
from ioobserve.probes.btf import Btf, BtfError
from ioobserve.probes.syscall_table import traced_functions

ENV = "IOOBSERVE_SYSCALL_PROBES"
MECHANISMS = ("fentry", "tp_btf", "raw")
BPF_PROG_TYPE_RAW_TRACEPOINT, BPF_PROG_TYPE_TRACING = 17, 26
BPF_TRACE_RAW_TP, BPF_TRACE_FENTRY, BPF_TRACE_FEXIT = 23, 24, 25
RETURN_ZERO = bytes.fromhex("b700000000000000" "9500000000000000")  # r0 = 0; exit
TRACEPOINT_TYPES = ("btf_trace_sys_enter", "btf_trace_sys_exit")


class MechanismUnavailable(Exception):
    """The way in asked for (IOOBSERVE_SYSCALL_PROBES) is not one this kernel allows."""


@dataclass(frozen=True)
class ProgramKind:
    """How the kernel is asked to load a program: its type, expected attach type and the BTF
    type it attaches to (0: none)."""

    prog_type: int
    attach_type: int = 0
    btf_id: int = 0


RAW = ProgramKind(BPF_PROG_TYPE_RAW_TRACEPOINT)


@dataclass(frozen=True)
class SyscallEntry:
    """The syscall layer's way in: the kinds of its programs and, for fentry, where they attach."""

    mechanism: str
    enter: ProgramKind  # the enter program's, and the Python walk's, which it tail-calls
    exit: ProgramKind
    # fentry: (function, BTF id of its fentry, of its fexit) per traced syscall; the two are
    # one function, kept apart so the stubs can also run on sys_enter/sys_exit (tests, here)
    attach_points: tuple[tuple[str, int, int], ...] = ()
    why: str = ""  # why the ways before it were not taken

    @property
    def enter_program(self) -> str:
        """The enter program's name in the probes' source."""
        return "on_sys_enter_raw" if self.mechanism == "raw" else "on_sys_enter"

    def describe(self) -> str:
        """One line for the doctor and the recording's summary."""
        what = {"fentry": f"fentry/fexit on the {len(self.attach_points)} traced syscall functions",
                "tp_btf": "tp_btf sys_enter/sys_exit (BTF-typed arguments)",
                "raw": "raw tracepoints sys_enter/sys_exit"}[self.mechanism]
        return f"{what} ({self.why})" if self.why else what


def choose(btf: Btf | None = None, wanted: str | None = None) -> SyscallEntry:
    """The first way in this kernel allows, or the one asked for (argument, else the
    environment); raises MechanismUnavailable if that one is refused."""
    wanted = os.environ.get(ENV, "") if wanted is None else wanted
    if wanted and wanted not in MECHANISMS:
        raise MechanismUnavailable(f"{ENV}={wanted}: expected one of {', '.join(MECHANISMS)}")
    if btf is None:
        try:
            btf = Btf.load()
        except BtfError:
            btf = None  # raw tracepoints need none
    reasons = []
    for mechanism in (wanted,) if wanted else MECHANISMS:
        entry, reason = _try(mechanism, btf)
        if entry is not None:
            return replace(entry, why="; ".join(reasons))
        if wanted:
            raise MechanismUnavailable(f"{ENV}={wanted}: {reason}")
        reasons.append(reason)
    raise AssertionError("raw tracepoints are always a way in")


def _try(mechanism: str, btf: Btf | None) -> tuple[SyscallEntry | None, str]:
    if mechanism == "raw":
        return SyscallEntry("raw", RAW, RAW), ""
    if btf is None:
        return None, f"{mechanism}: no kernel BTF"
    if mechanism == "tp_btf":
        ids = btf.named_ids("typedef", list(TRACEPOINT_TYPES))
        if len(ids) < len(TRACEPOINT_TYPES):
            return None, "tp_btf: no BTF for the syscall tracepoints"
        enter = ProgramKind(BPF_PROG_TYPE_TRACING, BPF_TRACE_RAW_TP, ids[TRACEPOINT_TYPES[0]])
        refused = _refusal(enter)
        if refused:
            return None, f"tp_btf refused: {refused}"
        return SyscallEntry("tp_btf", enter, replace(enter, btf_id=ids[TRACEPOINT_TYPES[1]])), ""
    names = traced_functions()
    ids = btf.named_ids("function", names)
    missing = [name for name in names if name not in ids]
    if not names or missing:
        return None, f"fentry: no BTF for {missing[0] if missing else 'the syscall functions'}"
    protos = {name: btf.function_proto(ids[name]) for name in names}
    common = Counter(protos.values()).most_common(1)[0][0]
    anchor = next(name for name in names if protos[name] == common)  # the bodies load against it
    enter = ProgramKind(BPF_PROG_TYPE_TRACING, BPF_TRACE_FENTRY, ids[anchor])
    refused = _refusal(enter)
    if refused:
        return None, f"fentry refused: {refused}"
    odd = [name for name in names if protos[name] != common]
    if odd and _tail_calls_need_one_prototype(btf):
        return None, (f"fentry: {', '.join(odd)} differ(s) in prototype from {anchor}, and this kernel "
                      "refuses tail calls between tracing programs of different prototypes")
    points = tuple((name, ids[name], ids[name]) for name in names)
    return SyscallEntry("fentry", enter, replace(enter, attach_type=BPF_TRACE_FEXIT), points), ""


def _tail_calls_need_one_prototype(btf: Btf) -> bool:
    """Whether a program array holds only tracing programs of one prototype (kernel 6.13+):
    the stubs on every syscall function tail-call one body."""
    return btf.has_member("bpf_map", "owner.attach_func_proto") or btf.has_member("bpf_map_owner", "attach_func_proto")


def _refusal(kind: ProgramKind) -> str:
    """Why the kernel refuses a trivial program of this kind ("" if it loads)."""
    try:
        fd = prog_load(kind.prog_type, RETURN_ZERO, b"ioo_probe", b"GPL", 0, kind.attach_type, kind.btf_id)
    except OSError as exc:
        return exc.strerror or str(exc)
    os.close(fd)
    return ""
