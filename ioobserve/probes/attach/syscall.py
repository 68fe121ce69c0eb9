"""The syscall layer (syscall.bpf.c, with the AIO layer its exit program tail-calls).

Its way in is the cheapest this kernel allows: fentry/fexit on the traced syscall functions
only, else tp_btf on sys_enter/sys_exit, else raw tracepoints; each found by loading a
two-instruction program of its kind (a refusal costs no verifier time).
IOOBSERVE_SYSCALL_PROBES=fentry|tp_btf|raw asks for one (tests, benchmarks)."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, replace

from ioobserve.probes import layers as ly
from ioobserve.probes.attach import Attachments
from ioobserve.probes.build.compile import ProbeError
from ioobserve.probes.kernel.bpf_syscall import tracing_attach
from ioobserve.probes.kernel.btf import Btf, BtfError
from ioobserve.probes.kernel.program_kind import (BPF_PROG_TYPE_TRACING, BPF_TRACE_FENTRY, BPF_TRACE_FEXIT,
                                                  BPF_TRACE_RAW_TP, RAW, ProgramKind, refusal)
from ioobserve.probes.kernel.syscall_table import traced_functions

ENV = "IOOBSERVE_SYSCALL_PROBES"
MECHANISMS = ("fentry", "tp_btf", "raw")
TRACEPOINT_TYPES = ("btf_trace_sys_enter", "btf_trace_sys_exit")
# Prototype groups of the traced functions with bodies of their own: each costs the verifier
# the bodies again (Debian's 6.1 and 6.12 have 2).
MAX_PROTOTYPES = 4
# The raw tracepoints, exit first (an enter's record waits for one).
RAW_ATTACHMENTS = (("sys_exit", "on_sys_exit"), ("sys_enter", "on_sys_enter_raw"))
# The AIO layer: programs the exit program tail-calls (aio_programs), by index.
AIO_PROGRAMS = ("aio_submitted", "aio_reaped")


class MechanismUnavailable(Exception):
    """The way in asked for (IOOBSERVE_SYSCALL_PROBES) is not one this kernel allows."""


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
        refused = refusal(enter)
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
    refused = refusal(enter)
    if refused:
        return None, f"fentry refused: {refused}"
    points = tuple((name, ids[name], ids[name], group_of.get(protos[name], 0)) for name in names)
    return SyscallEntry("fentry", enter, replace(enter, attach_type=BPF_TRACE_FEXIT), points,
                        tuple((anchor, anchor) for anchor in anchors)), ""


def _tail_calls_need_one_prototype(btf: Btf) -> bool:
    """Whether a program array holds only tracing programs of one prototype (kernel 6.13+):
    the stubs on every syscall function tail-call one body."""
    return btf.has_member("bpf_map", "owner.attach_func_proto") or btf.has_member("bpf_map_owner", "attach_func_proto")


class SyscallLayer:
    """The syscall layer's programs by the chosen way in, and the AIO programs its exit
    program tail-calls."""

    name = ly.SYSCALL
    unavailable = None

    def __init__(self, entry: SyscallEntry, layers: frozenset[str]):
        self.entry = entry
        self.aio = ly.AIO in layers
        # fentry: the socket-only syscalls' functions are left alone unless the net layer is on
        self._left_out = frozenset() if ly.NET in layers else frozenset(traced_functions()) - set(traced_functions(net=False))
        self._attached: Attachments | None = None

    def programs(self) -> list[tuple[str, ProgramKind]]:
        """What attach() loads, the programs the verifier takes longest over first."""
        entry = self.entry
        wanted = [("on_sys_exit", entry.exit), (entry.enter_program, entry.enter)]
        if entry.mechanism == "fentry":  # the stubs, as loaded for the first function (the rest alike)
            wanted += [("syscall_fexit", entry.exit), ("syscall_fentry", entry.enter)]
            wanted += [(program, entry.in_group(kind, group)) for group in range(1, len(entry.anchors))
                       for program, kind in (("on_sys_exit", entry.exit), (entry.enter_program, entry.enter))]
        if self.aio:  # tail-called by the exit program: loaded as its kind
            wanted += [(program, entry.exit) for program in AIO_PROGRAMS]
        return wanted

    def attach(self, probes) -> str:
        """Attach by the way in chosen, exits first; ProbeError if it does not attach."""
        entry = self.entry
        attached = self._attached = Attachments(probes.bpf)
        try:
            if self.aio:
                for index, program in enumerate(AIO_PROGRAMS):
                    probes.tail_calls.set("aio_programs", index, program, entry.exit)
            if entry.mechanism == "raw":
                for tracepoint, program in RAW_ATTACHMENTS:
                    attached.raw_tracepoint(tracepoint, program)
            elif entry.mechanism == "tp_btf":
                attached.link(tracing_attach(probes.load_program("on_sys_exit", entry.exit)))
                attached.link(tracing_attach(probes.load_program(entry.enter_program, entry.enter)))
            else:
                # the bodies the stubs on every function tail-call, a set per prototype group
                probes.tail_calls.set("syscall_exit_body", 0, "on_sys_exit", entry.exit)
                probes.tail_calls.set("syscall_enter_body", 0, entry.enter_program, entry.enter)
                points = [point for point in entry.attach_points if point[0] not in self._left_out]
                for _, _, exit_id, group in points:
                    attached.link(tracing_attach(probes.load_program("syscall_fexit", replace(entry.exit, btf_id=exit_id),
                                                                     group)))
                for _, enter_id, _, group in points:
                    attached.link(tracing_attach(probes.load_program("syscall_fentry",
                                                                     replace(entry.enter, btf_id=enter_id), group)))
        except Exception as exc:  # bcc raises bare Exceptions
            self.detach()
            raise ProbeError(f"attaching the syscall layer by {entry.describe()} failed: {exc}") from exc
        return entry.describe()

    def detach(self) -> None:
        """Detach (safe to call twice)."""
        if self._attached is not None:
            self._attached.detach()


AIO_DESCRIPTION = "the syscall layer's io_submit (each iocb) and io_getevents/io_pgetevents (each completion)"
NET_DESCRIPTION = ("the syscall layer's calls on Internet sockets: read, write, readv, writev, recvfrom, sendto, "
                   "recvmsg, sendmsg, connect, accept (opt-in: --layers net)")


class RidingLayer:
    """A layer the syscall layer's programs carry (AIO: the programs its exit program
    tail-calls, which SyscallLayer loads and sets; NET: rows of its table, filled when the layer
    is on): attaching it adds nothing, and says how it is probed."""

    unavailable = None

    def __init__(self, name: str, description: str):
        self.name, self.description = name, description

    def programs(self) -> list[tuple[str, ProgramKind]]:
        """None of its own: the syscall layer's programs() lists what it needs."""
        return []

    def describe(self) -> str:
        """How the layer is probed (wherever the syscall layer is)."""
        return self.description

    def attach(self, probes) -> str:
        """Nothing beyond the syscall layer's attach: how the layer is probed."""
        return self.describe()

    def detach(self) -> None:
        """Nothing: it stops with the syscall layer's programs."""


def aio_layer() -> RidingLayer:
    """The AIO layer: io_submit's iocbs and their completions, read at the syscalls' exit."""
    return RidingLayer(ly.AIO, AIO_DESCRIPTION)


def net_layer() -> RidingLayer:
    """The NET layer: the syscalls on Internet sockets."""
    return RidingLayer(ly.NET, NET_DESCRIPTION)
