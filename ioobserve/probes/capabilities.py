"""What this kernel and machine allow, checked rather than assumed (`ioobserve doctor`).

Each probe picks its mechanism from these checks: fentry, then kprobe or tp_btf, then tracepoint.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ioobserve.probes.bpf_syscall import BPF_SYSCALL, map_create
from ioobserve.probes.btf import VMLINUX_BTF, Btf, BtfError
from ioobserve.probes.compile import ProbeError, compile_bpf
from ioobserve.probes.headers import HeadersMissing, find_headers
from ioobserve.probes.kernel_layout import layout_from_btf, uring_layout_ok
from ioobserve.probes.object_cache import cache_dir
from ioobserve.probes.syscall_attach import MechanismUnavailable
from ioobserve.probes.syscall_attach import choose as choose_syscall_entry
from ioobserve.probes.syscall_table import NUMBERS, machine_arch

TRACEFS_PATHS = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))
BPF_MAP_TYPE_RINGBUF = 27
CAP_SYS_ADMIN, CAP_PERFMON, CAP_BPF = 21, 38, 39


@dataclass(frozen=True)
class Check:
    """One line of the doctor's table."""

    name: str
    ok: bool
    detail: str
    required: bool = False


def effective_caps() -> int:
    """The CapEff bit mask of this process."""
    for line in Path("/proc/self/status").read_text().splitlines():
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
    return Check("privileges", False, f"missing {missing}: run as root (sudo ioobserve ...)", True)


def tracefs_dir(mount: bool = True) -> Path | None:
    """The tracefs directory with events/, mounting tracefs if allowed and needed."""
    for path in TRACEFS_PATHS:
        if (path / "events").is_dir():
            return path
    if mount and os.geteuid() == 0 and TRACEFS_PATHS[0].is_dir():
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACEFS_PATHS[0])], check=True, capture_output=True, timeout=10)
        if (TRACEFS_PATHS[0] / "events").is_dir():
            return TRACEFS_PATHS[0]
    return None


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


def fentry_supported() -> tuple[bool, str]:
    """Load a trivial fentry program (bcc reports support on kernels that then refuse it)."""
    from bcc import BPF  # deferred: only probes import bcc

    if not BPF.support_kfunc():
        return False, "no BTF trampoline support"
    try:
        probe = compile_bpf(text="KFUNC_PROBE(vfs_read) { return 0; }")
    except (ProbeError, HeadersMissing) as exc:
        return False, f"load refused: {str(exc)[:80]}"
    probe.cleanup()
    return True, "fentry/fexit programs load"


def cgroup2_mount(mountinfo: str = "/proc/self/mountinfo") -> Path | None:
    """Where the cgroup v2 hierarchy is mounted (it may sit beside v1 controllers)."""
    with open(mountinfo) as lines:
        for line in lines:
            fields = line.split()
            if fields[fields.index("-") + 1] == "cgroup2":
                return Path(fields[4])
    return None


def _tracepoint(tracefs: Path | None, *names: str) -> str | None:
    for name in names:
        if tracefs and (tracefs / "events" / name).is_dir():
            return name
    return None


def run_checks(try_fentry: bool = True) -> list[Check]:
    """Every check, in the order the doctor shows them."""
    checks = [privileges_check()]
    release, arch = os.uname().release, machine_arch()
    checks.append(Check("kernel", arch in NUMBERS, f"{release} on {arch}" + ("" if arch in NUMBERS else ": no syscall table for this architecture"), True))
    try:
        layout_from_btf(Btf.load())
        checks.append(Check("BTF", True, f"{VMLINUX_BTF}: struct offsets from the running kernel", True))
    except BtfError as exc:
        checks.append(Check("BTF", False, f"{exc}; a kernel with CONFIG_DEBUG_INFO_BTF=y is needed", True))
    try:
        headers = find_headers()
        checks.append(Check("kernel headers", True, headers.description, True))
    except (HeadersMissing, OSError) as exc:
        checks.append(Check("kernel headers", False, str(exc), True))
    tracefs = tracefs_dir()
    checks.append(Check("tracefs", tracefs is not None, str(tracefs) if tracefs else "not mounted and could not mount it", True))
    raw = _tracepoint(tracefs, "raw_syscalls/sys_enter")
    checks.append(Check("syscall tracepoints", raw is not None, "raw_syscalls:sys_enter/sys_exit (raw tracepoints)" if raw else "raw_syscalls missing", True))
    sched = _tracepoint(tracefs, "sched/sched_process_fork")
    checks.append(Check("sched tracepoints", sched is not None, "sched_process_fork/exec/exit" if sched else "missing", True))
    block = _tracepoint(tracefs, "block/block_io_start", "block/block_rq_issue")
    checks.append(Check("block tracepoints", block is not None, block or "missing"))
    filemap = _tracepoint(tracefs, "filemap/mm_filemap_add_to_page_cache")
    checks.append(Check("filemap tracepoints", filemap is not None, filemap or "missing"))
    kprobes = bool(tracefs and (tracefs / "kprobe_events").exists())
    checks.append(Check("kprobes", kprobes, "kprobe_events present" if kprobes else "absent (CONFIG_KPROBES not set)"))
    if try_fentry:
        ok, detail = fentry_supported()
        checks.append(Check("fentry", ok, detail))
    uprobes = bool(tracefs and (tracefs / "uprobe_events").exists())
    checks.append(Check("uprobes", uprobes, "uprobe_events present" if uprobes else "absent (CONFIG_UPROBE_EVENTS not set)"))
    ring = ringbuf_supported()
    checks.append(Check("BPF ring buffer", ring, "BPF_MAP_TYPE_RINGBUF" if ring else "cannot create one (kernel < 5.8?)", True))
    cgroup = cgroup2_mount()
    checks.append(Check("cgroup v2", cgroup is not None, str(cgroup) if cgroup else "not mounted: --cgroup unavailable"))
    if all(check.ok for check in checks if check.required):
        checks.append(probes_check())
    return checks


def probes_check() -> Check:
    """Load the default layers' probes and verify their programs: the first time on a kernel
    (or ioobserve version) this compiles them, and keeps the result for every recording."""
    from ioobserve.collect.recording import load_probes  # deferred: it imports the collector

    try:
        probes = load_probes()
    except (ProbeError, HeadersMissing, BtfError, OSError) as exc:
        return Check("probes", False, str(exc), True)
    try:
        programs = probes.verify()
    except ProbeError as exc:
        return Check("probes", False, str(exc), True)
    finally:
        probes.close()
    how = "loaded from the compile kept" if probes.from_cache else "compiled, and the compile kept"
    return Check("probes", True, f"{how} in {cache_dir()}; {programs} programs pass the verifier", True)


def layer_plan(checks: list[Check]) -> dict[str, str]:
    """Which mechanism each layer uses here, or why it is unavailable."""
    ok = {c.name: c.ok for c in checks}
    ready = all(c.ok for c in checks if c.required)
    plan = {"syscall": syscall_mechanism() if ready else "unavailable (see failed checks)"}
    plan["io_uring"] = uring_plan(_uring_layout_ok()) if ready else "unavailable (see failed checks)"
    plan["aio"] = ("the syscall layer's io_submit (each iocb) and io_getevents/io_pgetevents (each completion)"
                   if ready else "unavailable (see failed checks)")
    plan["block"] = ("raw tracepoints block_io_start (or block_bio_queue)/block_rq_issue/block_rq_complete"
                     if ready and ok.get("block tracepoints") else "unavailable: no block tracepoints")
    plan["cache"] = ("tracepoints mm_filemap_add_to_page_cache, page_cache_sync_ra/async_ra where present"
                     if ready and ok.get("filemap tracepoints") else "unavailable: no filemap tracepoints")
    plan["libc"] = ("uprobes on each libc the selected processes map (opt-in: --layers libc)"
                    if ready and ok.get("uprobes") else "unavailable: no uprobes")
    for layer, what in (("hdf5", "libhdf5 (also copies inside wheels)"), ("mpiio", "the MPI library")):
        plan[layer] = (f"uprobes on {what} where the selected processes map it (opt-in: --layers {layer})"
                       if ready and ok.get("uprobes") else "unavailable: no uprobes")
    plan["vfs"] = vfs_mechanism(ok.get("fentry", False), ok.get("kprobes", False))[1]
    return plan


def _uring_layout_ok() -> bool:
    try:
        return uring_layout_ok(layout_from_btf(Btf.load()))
    except BtfError:
        return False


def syscall_mechanism() -> str:
    """How the syscall layer enters the kernel here, and why not by the cheaper ways."""
    try:
        return choose_syscall_entry().describe()
    except MechanismUnavailable as exc:
        return str(exc)


def vfs_mechanism(fentry: bool, kprobes: bool) -> tuple[str | None, str]:
    """("kprobes" | None, what the doctor says) for the VFS layer. Its probes are kprobes,
    which every kernel with fentry also has in practice; fentry is reported, not used."""
    if kprobes:
        return "kprobes", "kprobes/kretprobes on vfs_read/write/open/fsync_range (opt-in: --layers vfs)"
    if fentry:
        return None, "unavailable: fentry only, and the VFS layer's probes are kprobes"
    return None, "unavailable: no fentry and no kprobes on this kernel"


URING_TRACEPOINTS = ("io_uring/io_uring_submit_req", "io_uring/io_uring_complete", "io_uring/io_uring_create")
URING_DISABLED = Path("/proc/sys/kernel/io_uring_disabled")


def uring_unavailable(layout_ok: bool) -> str | None:
    """Why this kernel cannot give the IO_URING layer, or None if it can: its tracepoints
    and the io_kiocb fields the probes read (layout_ok: kernel_layout.uring_layout_ok)."""
    tracefs = tracefs_dir()
    missing = [name for name in URING_TRACEPOINTS if not _tracepoint(tracefs, name)]
    if missing:
        return f"no io_uring tracepoints ({', '.join(missing)}): a kernel before 5.5, or built without io_uring"
    if not layout_ok:
        return "BTF lacks the io_uring request fields the probes read (io_kiocb, io_rw, io_sync)"
    return None


def uring_plan(layout_ok: bool) -> str:
    """What the doctor says of the IO_URING layer."""
    why = uring_unavailable(layout_ok)
    if why:
        return f"unavailable: {why}"
    what = "raw tracepoints io_uring_submit_req/io_uring_complete/io_uring_create"
    try:
        if URING_DISABLED.read_text().strip() == "2":
            what += " (kernel.io_uring_disabled=2: no process can use io_uring here)"
    except OSError:
        pass
    return what


def uprobes_available() -> bool:
    """Whether this kernel has uprobes (the library layers' probes)."""
    tracefs = tracefs_dir()
    return bool(tracefs and (tracefs / "uprobe_events").exists())


def vfs_available() -> tuple[str | None, str]:
    """The VFS layer's mechanism on this kernel, checked (fentry by loading a program)."""
    tracefs = tracefs_dir()
    kprobes = bool(tracefs and (tracefs / "kprobe_events").exists())
    return vfs_mechanism(fentry_supported()[0], kprobes)
