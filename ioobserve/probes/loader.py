"""Compile, configure, attach and detach the syscall-layer probes (the only bcc user)."""

from __future__ import annotations

import contextlib
import ctypes
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ioobserve import events as ev
from ioobserve.probes.compile import ProbeError, compile_bpf
from ioobserve.probes.filters import KernelFilters
from ioobserve.probes.headers import Headers
from ioobserve.probes.kernel_layout import KernelLayout
from ioobserve.probes.syscall_table import spec_array

PROBES_DIR = Path(__file__).resolve().parents[2] / "ebpf_probes"
SOURCE = "syscalls.bpf.c"

# (raw tracepoint, program) pairs, attached in this order and detached in reverse.
ATTACHMENTS = (
    ("sched_process_fork", "on_fork"),
    ("sched_process_exec", "on_exec"),
    ("sched_process_exit", "on_exit"),
    ("sys_exit", "on_sys_exit"),
    ("sys_enter", "on_sys_enter"),
)
# The block layer, completion first so no request is issued unseen. Kernels before 6.5 lack
# block_io_start (a request, in its submitter's context): there the bio's queueing stands in.
BLOCK_ATTACHMENTS = (
    (("block_rq_complete", "on_block_rq_complete"),),
    (("block_rq_issue", "on_block_rq_issue"),),
    (("block_io_start", "on_block_io_start"), ("block_bio_queue", "on_block_bio_queue")),
)


@dataclass(frozen=True)
class ProbeSizes:
    """Buffer and table sizes (ring sizes in pages, powers of two)."""

    events_pages: int = 4096  # 16 MiB: ~150k events, 0.1 s of a 1.5M events/s flood
    aux_pages: int = 1024
    known_files: int = 65536


def probes_source_dir() -> Path:
    """Where the .bpf.c files live (a source checkout or the installed package)."""
    installed = Path(__file__).resolve().parents[1] / "ebpf_probes"
    return installed if installed.is_dir() else PROBES_DIR


class SyscallProbes:
    """The syscall and process-lineage probes of one recording."""

    def __init__(self, layout: KernelLayout, headers: Headers, sizes: ProbeSizes = ProbeSizes()):
        self.sizes = sizes
        self._attached: list[str] = []
        self.block_layer: str | None = None  # the block tracepoints attached, once attach() ran
        source_dir = probes_source_dir()
        cflags = layout.cflags() + [
            f"-I{source_dir}",
            f"-DEVENTS_PAGES={sizes.events_pages}",
            f"-DAUX_PAGES={sizes.aux_pages}",
            f"-DKNOWN_FILES={sizes.known_files}",
            "-Wno-unused-function",
        ]
        try:
            self.bpf = compile_bpf(src_file=str(source_dir / SOURCE), cflags=cflags, headers=headers)
        except ProbeError as exc:
            raise ProbeError(f"compiling {SOURCE} failed: {exc}") from exc

    def configure(self, filters: KernelFilters, self_tgid: int | None = None) -> None:
        """Fill the syscall table and filter maps; call before attach()."""
        specs = self.bpf["syscall_specs"]
        for nr, row in enumerate(spec_array()):
            if row["op"]:
                specs[ctypes.c_int(nr)] = specs.Leaf.from_buffer_copy(row.tobytes())
        self._fill_set("traced_tgids", (ctypes.c_uint32(p) for p in filters.pids))
        self._fill_set("cgroups", (ctypes.c_uint64(c) for c in filters.cgroup_ids))
        comms = self.bpf["comms"]
        for comm in filters.comms:
            comms[comms.Key.from_buffer_copy(comm.encode()[:15].ljust(16, b"\0"))] = ctypes.c_uint8(1)
        dirs = self.bpf["prefix_dirs"]
        for dev, ino in filters.prefix_dirs:
            key = np.array([(ino, dev, 0)], dtype=ev.FILE_KEY)
            dirs[dirs.Key.from_buffer_copy(key.tobytes())] = ctypes.c_uint8(1)
        strings, lengths = self.bpf["prefix_strings"], self.bpf["prefix_lens"]
        for prefix in filters.prefixes:
            raw = prefix.encode()
            strings[strings.Key.from_buffer_copy(raw.ljust(ev.PREFIX_LEN, b"\0"))] = ctypes.c_uint8(1)
        for index, length in enumerate(sorted({len(p.encode()) for p in filters.prefixes})):
            lengths[ctypes.c_int(index)] = ctypes.c_uint32(length)
        self._fill_set("excluded_devs", (ctypes.c_uint32(d) for d in filters.excluded_devs))
        cfg = np.zeros(1, dtype=ev.CONFIG)
        cfg["self_tgid"] = os.getpid() if self_tgid is None else self_tgid
        cfg["filter_pid"] = filters.filter_pid
        cfg["filter_cgroup"] = bool(filters.cgroup_ids)
        cfg["filter_comm"] = bool(filters.comms)
        cfg["filter_path"] = bool(filters.prefix_dirs or filters.prefixes)
        self._config = cfg
        self._write_config()

    def _write_config(self) -> None:
        config = self.bpf["config"]
        config[ctypes.c_int(0)] = config.Leaf.from_buffer_copy(self._config.tobytes())

    def exclude_helper(self, pid: int) -> None:
        """Never trace this helper process of ours (the capture process)."""
        self._config["helper_tgid"] = pid
        self._write_config()

    def _fill_set(self, name: str, keys) -> None:
        table = self.bpf[name]
        for key in keys:
            table[key] = ctypes.c_uint8(1)

    def trace_pid(self, pid: int) -> None:
        """Add a process (and, through fork, its future descendants) to the pid filter."""
        self.bpf["traced_tgids"][ctypes.c_uint32(pid)] = ctypes.c_uint8(1)

    def attach(self) -> None:
        """Attach every program; lineage first so no process is born unseen."""
        try:
            for tracepoint, program in ATTACHMENTS:
                self.bpf.attach_raw_tracepoint(tp=tracepoint.encode(), fn_name=program.encode())
                self._attached.append(tracepoint)
        except Exception as exc:
            self.detach()
            raise ProbeError(f"attaching {program} to raw tracepoint {tracepoint} failed: {exc}") from exc
        self.block_layer = self._attach_block()

    def _attach_block(self) -> str | None:
        """Attach the block layer where the kernel has its tracepoints; None (and nothing of
        it attached) where it does not, which leaves the syscall layer whole."""
        attached = []
        for candidates in BLOCK_ATTACHMENTS:
            for tracepoint, program in candidates:
                try:
                    self.bpf.attach_raw_tracepoint(tp=tracepoint.encode(), fn_name=program.encode())
                except Exception:  # absent on this kernel: try the next name
                    continue
                attached.append(tracepoint)
                break
            else:
                for tracepoint in attached:
                    with contextlib.suppress(Exception):
                        self.bpf.detach_raw_tracepoint(tp=tracepoint.encode())
                return None
        self._attached.extend(attached)
        return ", ".join(attached)

    def detach(self) -> None:
        """Detach every attached program (safe to call twice)."""
        while self._attached:
            tracepoint = self._attached.pop()
            with contextlib.suppress(Exception):
                self.bpf.detach_raw_tracepoint(tp=tracepoint.encode())

    def close(self) -> None:
        """Detach and release the programs and maps."""
        self.detach()
        with contextlib.suppress(Exception):
            self.bpf.cleanup()

    def ring(self, name: str) -> tuple[int, int]:
        """(map fd, data size in bytes) of the ring buffer `name` ("events" or "aux")."""
        pages = self.sizes.events_pages if name == "events" else self.sizes.aux_pages
        return self.bpf[name].map_fd, pages * os.sysconf("SC_PAGE_SIZE")

    def lost_counts(self) -> np.ndarray:
        """Failed reserves so far, summed over CPUs: index = op code, or LOST_AUX_BASE + kind."""
        table = self.bpf["lost"]
        return np.array([sum(table.getvalue(ctypes.c_int(i))) for i in range(ev.LOST_SLOTS)], dtype=np.uint64)
