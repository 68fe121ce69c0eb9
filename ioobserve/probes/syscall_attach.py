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
# Prototype groups of the traced functions with bodies of their own: each costs the verifier
# the bodies again (Debian's 6.1 and 6.12 have 2).
MAX_PROTOTYPES = 4


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
    # fentry: (function, BTF id of its fentry, of its fexit, its prototype group) per traced
    # syscall; the two ids are one function, kept apart so the stubs can also run on
    # sys_enter/sys_exit (tests, here)
    attach_points: tuple[tuple[str, int, int, int], ...] = ()
    # fentry: the (enter, exit) BTF ids each prototype group's bodies load against, group 0
    # first (enter's and exit's); a kernel that tail-calls only between programs of one
    # prototype needs a set of bodies per prototype
    anchors: tuple[tuple[int, int], ...] = ()
    why: str = ""  # why the ways before it were not taken

    def in_group(self, kind: ProgramKind, group: int) -> ProgramKind:
        """The enter or exit kind `kind` (group 0's) as loaded for a prototype group."""
        if group == 0:
            return kind
        enter_id, exit_id = self.anchors[group]
        return replace(kind, btf_id=enter_id if kind.btf_id == self.enter.btf_id else exit_id)

    def group_of(self, kind: ProgramKind) -> int:
        """The prototype group a kind was made for (0 for every other way in)."""
        for group, ids in enumerate(self.anchors):
            if kind.prog_type == BPF_PROG_TYPE_TRACING and kind.btf_id in ids:
                return group
        return 0

    @property
    def enter_program(self) -> str:
        """The enter program's name in the probes' source."""
        return "on_sys_enter_raw" if self.mechanism == "raw" else "on_sys_enter"

    def describe(self) -> str:
        """One line for the doctor and the recording's summary."""
        groups = f", {len(self.anchors)} prototypes" if len(self.anchors) > 1 else ""
        what = {"fentry": f"fentry/fexit on the {len(self.attach_points)} traced syscall functions{groups}",
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
    by_use = [proto for proto, _ in Counter(protos.values()).most_common()]
    if not _tail_calls_need_one_prototype(btf):
        by_use = by_use[:1]  # one set of bodies serves every function
    if len(by_use) > MAX_PROTOTYPES:
        return None, f"fentry: the traced syscall functions have {len(by_use)} prototypes (at most {MAX_PROTOTYPES} here)"
    group_of = {proto: group for group, proto in enumerate(by_use)}
    anchors = [ids[next(name for name in names if protos[name] == proto)] for proto in by_use]
    enter = ProgramKind(BPF_PROG_TYPE_TRACING, BPF_TRACE_FENTRY, anchors[0])
    refused = _refusal(enter)
    if refused:
        return None, f"fentry refused: {refused}"
    points = tuple((name, ids[name], ids[name], group_of.get(protos[name], 0)) for name in names)
    return SyscallEntry("fentry", enter, replace(enter, attach_type=BPF_TRACE_FEXIT), points,
                        tuple((anchor, anchor) for anchor in anchors)), ""


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
