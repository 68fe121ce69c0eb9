"""What this kernel and machine allow, checked rather than assumed (`ioobserve doctor`), and
the way each layer would take here, as its attach module (probes/attach/) chooses it."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ioobserve.context.mounts import cgroup2_mount
from ioobserve.probes import layers as ly
from ioobserve.probes.attach.block import BlockLayer
from ioobserve.probes.attach.cache import CacheLayer
from ioobserve.probes.attach.io_uring import UringLayer
from ioobserve.probes.attach.syscall import AIO_DESCRIPTION, NET_DESCRIPTION, MechanismUnavailable
from ioobserve.probes.attach.syscall import choose as choose_syscall_entry
from ioobserve.probes.attach.vfs import VfsLayer
from ioobserve.probes.build.headers import HeadersMissing, find_headers
from ioobserve.probes.kernel.bpf_syscall import BPF_SYSCALL, map_create
from ioobserve.probes.kernel.btf import VMLINUX_BTF, Btf, BtfError
from ioobserve.probes.kernel.features import first_tracepoint, kprobes_available, lockdown_mode, tracefs_dir, uprobes_available
from ioobserve.probes.kernel.kernel_layout import layout_from_btf
from ioobserve.probes.kernel.program_kind import fentry_kind, refusal
from ioobserve.probes.kernel.syscall_table import NUMBERS, machine_arch

BPF_MAP_TYPE_RINGBUF = 27
CAP_SYS_PTRACE, CAP_SYS_ADMIN, CAP_PERFMON, CAP_BPF = 19, 21, 38, 39


@dataclass(frozen=True)
class Check:
    """One line of the doctor's table."""

    name: str
    ok: bool
    detail: str
    required: bool = False


def effective_caps() -> int:
    """The CapEff bit mask of this process."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return 0


def privileges_check() -> Check:
    """Root, or CAP_BPF + CAP_PERFMON (+ CAP_SYS_ADMIN for cgroup and /proc reads)."""
    caps = effective_caps()
    have = {name: bool(caps >> bit & 1) for name, bit in (("CAP_BPF", CAP_BPF), ("CAP_PERFMON", CAP_PERFMON), ("CAP_SYS_ADMIN", CAP_SYS_ADMIN))}
    if all(have.values()):
        return Check("privileges", True, "root" if os.geteuid() == 0 else "CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN", True)
    missing = ", ".join(name for name, ok in have.items() if not ok)
    return Check("privileges", False, f"missing {missing}: run as root (sudo ioobserve ...); in a container, add "
                                      "the capabilities (securityContext.capabilities.add) or run it privileged", True)


def not_ready(purpose: str) -> str | None:
    """Why `purpose` (recording, serve) cannot run here, in one line: privileges, then kernel
    lockdown; None when both allow it. (Headers and BTF are told when the probes load.)"""
    for check in (privileges_check(), lockdown_check()):
        if not check.ok:
            return f"{purpose} needs {check.name}: {check.detail}" if check.name == "privileges" else \
                f"{purpose} cannot run under kernel lockdown: {check.detail}"
    return None


def capability_warnings() -> list[str]:
    """What a recorder that may run but lacks a capability misses, one line each (a container
    given a capability set rather than privileges)."""
    if effective_caps() >> CAP_SYS_PTRACE & 1:
        return []
    return ["without CAP_SYS_PTRACE, other users' processes get no Python stacks and no library probes "
            "(their memory maps cannot be read): add it to the container's capabilities"]


def ringbuf_supported(arch: str | None = None) -> bool:
    """Create and close a BPF ring buffer map (kernel 5.8+)."""
    if (arch or machine_arch()) not in BPF_SYSCALL:
        return False
    try:
        fd = map_create(BPF_MAP_TYPE_RINGBUF, 0, 0, 4096, 0, b"ioo_probe")
    except OSError:
        return False
    os.close(fd)
    return True


def fentry_supported(btf: Btf | None) -> tuple[bool, str]:
    """Load a trivial fentry program on vfs_read (a refusal costs no verifier time)."""
    if btf is None:
        return False, "no kernel BTF"
    found = btf.named_ids("function", ["vfs_read"])
    if not found:
        return False, "vfs_read is not in this kernel's BTF"
    refused = refusal(fentry_kind(found["vfs_read"]))
    return (False, f"load refused: {refused}") if refused else (True, "fentry/fexit programs load")


def lockdown_check() -> Check:
    """The kernel's lockdown mode: integrity still lets BPF read kernel memory through BTF;
    confidentiality forbids it (the probes cannot run)."""
    mode = lockdown_mode()
    if mode is None:
        return Check("lockdown", True, "no lockdown LSM")
    if mode == "confidentiality":
        return Check("lockdown", False, "confidentiality: the kernel forbids BPF reading its memory; boot with "
                                        "lockdown=integrity or none", True)
    return Check("lockdown", True, mode + (": BPF probes allowed" if mode != "none" else ""))


def _load_btf() -> Btf | None:
    try:
        return Btf.load()
    except BtfError:
        return None


def run_checks(try_fentry: bool = True) -> list[Check]:
    """Every check of the kernel and machine, in the order the doctor shows them."""
    checks = [privileges_check()]
    release, arch = os.uname().release, machine_arch()
    checks.append(Check("kernel", arch in NUMBERS, f"{release} on {arch}" + ("" if arch in NUMBERS else ": no syscall table for this architecture"), True))
    btf = _load_btf()
    try:
        layout_from_btf(btf if btf is not None else Btf.load())
        checks.append(Check("BTF", True, f"{VMLINUX_BTF}: struct offsets from the running kernel", True))
    except BtfError as exc:
        checks.append(Check("BTF", False, f"{exc}; a kernel with CONFIG_DEBUG_INFO_BTF=y is needed", True))
    checks.append(lockdown_check())
    try:
        headers = find_headers()
        checks.append(Check("kernel headers", True, headers.description, True))
    except (HeadersMissing, OSError) as exc:
        checks.append(Check("kernel headers", False, str(exc), True))
    tracefs = tracefs_dir()
    checks.append(Check("tracefs", tracefs is not None, str(tracefs) if tracefs else "not mounted and could not mount it", True))
    raw = first_tracepoint("raw_syscalls/sys_enter")
    checks.append(Check("syscall tracepoints", raw is not None, "raw_syscalls:sys_enter/sys_exit (raw tracepoints)" if raw else "raw_syscalls missing", True))
    sched = first_tracepoint("sched/sched_process_fork")
    checks.append(Check("sched tracepoints", sched is not None, "sched_process_fork/exec/exit" if sched else "missing", True))
    block = first_tracepoint("block/block_io_start", "block/block_rq_issue")
    checks.append(Check("block tracepoints", block is not None, block or "missing"))
    filemap = first_tracepoint("filemap/mm_filemap_add_to_page_cache")
    checks.append(Check("filemap tracepoints", filemap is not None, filemap or "missing"))
    kprobes = kprobes_available()
    checks.append(Check("kprobes", kprobes, "kprobe_events present" if kprobes else "absent (CONFIG_KPROBES not set)"))
    if try_fentry:
        ok, detail = fentry_supported(btf)
        checks.append(Check("fentry", ok, detail))
    uprobes = uprobes_available()
    checks.append(Check("uprobes", uprobes, "uprobe_events present" if uprobes else "absent (CONFIG_UPROBE_EVENTS not set)"))
    ring = ringbuf_supported()
    checks.append(Check("BPF ring buffer", ring, "BPF_MAP_TYPE_RINGBUF" if ring else "cannot create one (kernel < 5.8?)", True))
    cgroup = cgroup2_mount()
    checks.append(Check("cgroup v2", cgroup is not None, str(cgroup) if cgroup else "not mounted: --cgroup unavailable"))
    checks.append(exec_gate_check())
    return checks


def exec_gate_check() -> Check:
    """Whether the exec gate can hold execs here (fanotify permission events, openat2)."""
    from ioobserve.probes.attach.linked_files import openat2_available
    from ioobserve.probes.kernel.fanotify import ExecPermissions

    if not openat2_available():
        return Check("exec gate", False, "no openat2 (Linux 5.6+): a new root's library copies are probed when first mapped")
    try:
        ExecPermissions().close()
    except OSError as exc:
        return Check("exec gate", False, f"fanotify permission events unavailable ({exc.strerror}; "
                     "CONFIG_FANOTIFY_ACCESS_PERMISSIONS): a new root's library copies are probed when first mapped")
    return Check("exec gate", True, "fanotify FAN_OPEN_EXEC_PERM: execs wait (0.2 s at most) for a new root's library probes")


def layer_plan(checks: list[Check]) -> dict[str, str]:
    """Which way each layer takes here (its attach module's choice), or why it cannot; every
    layer is unusable while a required check fails."""
    failed = [check.name for check in checks if check.required and not check.ok]
    if failed:
        return dict.fromkeys(ly.KNOWN, f"not usable: recording cannot work here ({', '.join(failed)} failed)")
    btf = _load_btf()
    layout = layout_from_btf(btf)
    plan = {ly.SYSCALL: syscall_mechanism(btf)}
    for layer in (UringLayer(btf, layout), BlockLayer(), CacheLayer(tracefs_dir())):
        plan[layer.name] = f"unavailable: {layer.unavailable}" if layer.unavailable else layer.describe()
    plan[ly.AIO] = AIO_DESCRIPTION
    plan[ly.NET] = NET_DESCRIPTION
    plan[ly.PYTHON] = "the stack walk tail-called by the syscall layer; uprobes on each interpreter for imports and open()"
    uprobes = uprobes_available()
    for layer, what in ((ly.LIBC, "each libc the selected processes map"), (ly.HDF5, "libhdf5 (also copies inside wheels)"),
                        (ly.MPIIO, "the MPI library"), (ly.TLS, "each libssl the selected processes map")):
        plan[layer] = (f"uprobes on {what} (opt-in: --layers {layer})" if uprobes
                       else "unavailable: no uprobes (CONFIG_UPROBE_EVENTS not set)")
    vfs = VfsLayer(btf)
    plan[ly.VFS] = f"unavailable: {vfs.unavailable}" if vfs.unavailable else f"{vfs.describe()} (opt-in: --layers vfs)"
    return {layer: plan[layer] for layer in ly.KNOWN}


def syscall_mechanism(btf: Btf | None = None) -> str:
    """How the syscall layer enters the kernel here, and why not by the cheaper ways."""
    try:
        return choose_syscall_entry(btf).describe()
    except MechanismUnavailable as exc:
        return str(exc)


def vfs_available() -> tuple[str | None, str]:
    """The VFS layer's way in on this kernel ("fentry", "kprobe" or None) and what the doctor
    says of it (why not, when None)."""
    vfs = VfsLayer(_load_btf())
    return vfs.mechanism, vfs.unavailable or vfs.describe()
