"""Compile, configure, attach and detach the probes of every layer (the only bcc user)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ioobserve import __version__
from ioobserve import events as ev
from ioobserve.probes import layers as ly
from ioobserve.probes.bpf_syscall import prog_load, prog_run_stats, tracing_attach
from ioobserve.probes.async_table import aio_op_array, uring_spec_array
from ioobserve.probes.call_table import HDF5, LIBC, MPIIO, call_entries, call_spec_array
from ioobserve.probes.capabilities import tracefs_dir, uring_unavailable
from ioobserve.probes.compile import ProbeError, compile_bpf
from ioobserve.probes.compile_spool import compile_remotely, spool_dir
from ioobserve.probes.filters import KernelFilters
from ioobserve.probes.headers import Headers
from ioobserve.probes.kernel_layout import KernelLayout, uring_layout_ok
from ioobserve.probes.libraries import (HDF5_FILE, LIBC_FILE, MPI_FILE, MULTI_ENTRY_PROGRAM, MULTI_RETURN_PROGRAM,
                                        LibraryProbes, mapped_files)
from ioobserve.probes.object_cache import CompiledObject, cache_key, extract, lookup, store
from ioobserve.probes.python_probes import CHAINED, WALK_PROGRAM, PythonOptions, PythonProbes
from ioobserve.probes.syscall_attach import BPF_PROG_TYPE_TRACING, RAW, ProgramKind, SyscallEntry
from ioobserve.probes.syscall_table import machine_arch, spec_array
from ioobserve.probes.tracepoint_format import FILEMAP_ADD, READAHEAD, absent_flags
from ioobserve.probes.tail_calls import TailCalls
from ioobserve.probes.uprobe_multi import BPF_TRACE_UPROBE_MULTI
from ioobserve.probes.verifier_features import verifier_cflags

PROBES_DIR = Path(__file__).resolve().parents[2] / "ebpf_probes"
# A file per layer, compiled as one unit in this order (each uses what the ones before it
# define): bcc rewrites map calls only in its main file.
SOURCES = ("core.bpf.c", "paths.bpf.c", "emit.bpf.c", "lineage.bpf.c", "syscall.bpf.c", "io_uring.bpf.c", "aio.bpf.c",
           "block.bpf.c", "cache.bpf.c", "calls.bpf.c", "vfs.bpf.c", "python_stacks.bpf.c")

# Process lineage: (raw tracepoint, program) pairs, attached in this order (before the
# syscall layer, so no process is born unseen) and detached in reverse.
ATTACHMENTS = (
    ("sched_process_fork", "on_fork"),
    ("sched_process_exec", "on_exec"),
    ("sched_process_exit", "on_exit"),
)
# The syscall layer by raw tracepoints (the way in of last resort: syscall_attach.py).
RAW_SYSCALL_ATTACHMENTS = (("sys_exit", "on_sys_exit"), ("sys_enter", "on_sys_enter_raw"))
# The block layer, completion first so no request is issued unseen. Kernels before 6.5 lack
# block_io_start (a request, in its submitter's context): there the bio's queueing stands in.
BLOCK_ATTACHMENTS = (
    (("block_rq_complete", "on_block_rq_complete"),),
    (("block_rq_issue", "on_block_rq_issue"),),
    (("block_io_start", "on_block_io_start"), ("block_bio_queue", "on_block_bio_queue")),
)
# The IO_URING layer, completion first so no request is submitted unseen.
URING_ATTACHMENTS = (("io_uring_complete", "on_uring_complete"), ("io_uring_submit_req", "on_uring_submit"),
                     ("io_uring_create", "on_uring_create"))
# The AIO layer: programs the syscall layer's exit program tail-calls (aio_programs), by index.
AIO_PROGRAMS = ("aio_submitted", "aio_reaped")
# The page cache: classic tracepoints, read by the offsets of their format files.
CACHE_ATTACHMENTS = (
    (FILEMAP_ADD, (("filemap:mm_filemap_add_to_page_cache", "on_filemap_add"),)),
    (READAHEAD, (("readahead:page_cache_sync_ra", "on_readahead_sync"), ("readahead:page_cache_async_ra", "on_readahead_async"))),
)
# The VFS functions, their entry programs (one return program serves them all).
VFS_FUNCTIONS = (("vfs_read", "vfs_enter_read"), ("vfs_write", "vfs_enter_write"), ("vfs_open", "vfs_enter_open"),
                 ("vfs_fsync_range", "vfs_enter_fsync"))
VFS_RETURN = "vfs_return"
# The library layers: their calls, the files (by name) that implement them, and the names
# the system's linker knows them by (probed from the start, before any process maps them).
LIBRARY_CALLS = {ly.LIBC: (LIBC, LIBC_FILE), ly.HDF5: (HDF5, HDF5_FILE), ly.MPIIO: (MPIIO, MPI_FILE)}
SYSTEM_LIBRARIES = {ly.LIBC: ("c",), ly.HDF5: ("hdf5", "hdf5_serial"), ly.MPIIO: ("mpi", "mpich")}
# Stack pointer at a function's return minus at its entry: x86 pops the return address.
RETURN_SP_ADJUST = {"x86_64": 8, "aarch64": 0}
PRELOAD_THREADS = 4  # programs verified at once (the kernel verifies each on its caller's CPU)
BUMP = object()  # _update_config: add one to this counter


@dataclass(frozen=True)
class ProbeSizes:
    """Buffer and table sizes (ring sizes in pages, powers of two)."""

    events_pages: int = 4096  # 16 MiB: ~150k events, 0.1 s of a 1.5M events/s flood
    aux_pages: int = 1024
    known_files: int = 65536
    aggregate_entries: int = 0  # > 0: kernel aggregation (`serve`) with tables this size; 0: none compiled in


def _probe_object(text: str, cflags: list[str], headers: Headers) -> tuple[object, bool]:
    """The probes as a CachedBPF (its maps made and programs loaded by ioobserve, so every
    program passes through portable_cfg), and whether the compile was kept from before: an
    entry matching this source, these flags and this kernel is loaded as it is; otherwise the
    probes are compiled, and the result kept for the next recording."""
    from ioobserve.probes.cached_bpf import CachedBPF  # deferred: it imports bcc

    key = cache_key(text, cflags, headers, __version__)
    compiled = lookup(key)
    if compiled is not None:
        try:
            return CachedBPF(compiled), True
        except OSError:  # the kernel refused the maps it made before: compile afresh
            pass
    compiled = _compile(key, text, cflags, headers)
    with contextlib.suppress(OSError, ValueError):  # a read-only cache only costs the next start
        store(compiled)
    return CachedBPF(compiled), False


def _compile(key: str, text: str, cflags: list[str], headers: Headers) -> CompiledObject:
    """Compile the probes here with bcc, or on the spool's host (compile_spool) if one is set."""
    spool = spool_dir()
    if spool is not None:
        try:
            return compile_remotely(spool, key, text, cflags, headers)
        except RuntimeError as exc:
            raise ProbeError(str(exc)) from exc
    try:
        bpf = compile_bpf(text=text, cflags=cflags, headers=headers)
    except ProbeError as exc:
        raise ProbeError(f"compiling {' and '.join(SOURCES)} failed: {exc}") from exc
    try:
        return extract(bpf, key)
    finally:
        bpf.cleanup()


def probes_source_dir() -> Path:
    """Where the .bpf.c files live (a source checkout or the installed package)."""
    installed = Path(__file__).resolve().parents[1] / "ebpf_probes"
    return installed if installed.is_dir() else PROBES_DIR


class SyscallProbes:
    """The syscall and process-lineage probes of one recording."""

    def __init__(self, layout: KernelLayout, headers: Headers, entry: SyscallEntry, sizes: ProbeSizes = ProbeSizes(),
                 layers: frozenset[str] = ly.DEFAULT, python: PythonOptions = PythonOptions()):
        self.sizes = sizes
        self.layers = layers
        self.entry = entry  # the syscall layer's way in (syscall_attach.choose)
        self._tracing: dict[tuple[str, ProgramKind, int], int] = {}  # tp_btf and fentry programs loaded (by group): fd
        self._links: list[int] = []  # their attachments
        self._attached: list[str] = []
        self._attached_classic: list[str] = []
        self._kprobes: list[str] = []
        self.attached_layers: dict[str, str] = {}  # layer -> how it is probed here, once attach() ran
        self.unavailable_layers: dict[str, str] = {}  # layer asked for -> why this kernel cannot give it
        if ly.IO_URING in layers and (why := uring_unavailable(uring_layout_ok(layout))):
            self.unavailable_layers[ly.IO_URING] = why
        source_dir = probes_source_dir()
        tracefs = tracefs_dir(mount=False)
        self._cache_fields = {spec.macro: spec.offsets(tracefs) for spec, _ in CACHE_ATTACHMENTS}
        tracepoint_flags: dict[str, int] = {}
        for spec, _ in CACHE_ATTACHMENTS:
            tracepoint_flags.update(self._cache_fields[spec.macro] or absent_flags(spec))
        cflags = layout.cflags() + verifier_cflags(layout) + [
            f"-I{source_dir}",
            f"-DEVENTS_PAGES={sizes.events_pages}",
            f"-DAUX_PAGES={sizes.aux_pages}",
            f"-DKNOWN_FILES={sizes.known_files}",
            f"-DPAGE_SIZE_={os.sysconf('SC_PAGE_SIZE')}",
            f"-DRETURN_SP_ADJUST={RETURN_SP_ADJUST.get(machine_arch(), 0)}",
            f"-DIOO_CALL_ENTRIES={call_entries()}",
            *(f"-D{name}={value}" for name, value in sorted(tracepoint_flags.items())),
            "-Wno-unused-function",
            *(["-DIOO_AGGREGATE", f"-DAGG_ENTRIES={sizes.aggregate_entries}"] if sizes.aggregate_entries else []),
        ]
        text = "".join(f'#line 1 "{source_dir / name}"\n' + (source_dir / name).read_text() + "\n" for name in SOURCES)
        self.closed = False
        self.stopping = False  # stop_selecting() was called: no new probes
        self._attaching = threading.Lock()  # library and interpreter probes, attached by the collector's reader
        self._config: np.ndarray | None = None  # ev.CONFIG as last written, once configure() ran
        self._config_lock = threading.Lock()  # threads change the config (helpers, serve's stream and jobs)
        self.bpf, self.from_cache = _probe_object(text, cflags, headers)
        self.tail_calls = TailCalls(self.bpf, entry, self.load_program)
        self.libraries = {layer: LibraryProbes(self.bpf, *LIBRARY_CALLS[layer]) for layer in ly.LIBRARY_LAYERS
                          if layer in layers}
        self.python = PythonProbes(self.bpf, python, self.tail_calls, entry.enter) if ly.PYTHON in layers else None
        self._preloading = self._preload()

    def _programs_wanted(self) -> list[tuple[str, ProgramKind]]:
        """(program, kind) of what attach() loads for these layers, the ones the verifier takes
        longest over first."""
        from bcc import BPF  # deferred: only probes import bcc

        entry = self.entry
        wanted = [("on_sys_exit", entry.exit), (entry.enter_program, entry.enter)]
        if entry.mechanism == "fentry":  # the stubs, as loaded for the first function (the rest alike)
            wanted += [("syscall_fexit", entry.exit), ("syscall_fentry", entry.enter)]
            # each further prototype group's bodies
            wanted += [(program, entry.in_group(kind, group)) for group in range(1, len(entry.anchors))
                       for program, kind in (("on_sys_exit", entry.exit), (entry.enter_program, entry.enter))]
        if self.libraries or self.python is not None:
            multi = ProgramKind(BPF.KPROBE, BPF_TRACE_UPROBE_MULTI)
            wanted += [(name, multi) for name in (MULTI_RETURN_PROGRAM, MULTI_ENTRY_PROGRAM)]
        wanted += [(program, RAW) for _, program in ATTACHMENTS]
        if self.python is not None:  # tail-called by the enter program: loaded as its kind
            wanted += [(program, entry.enter) for program in (WALK_PROGRAM, *(name for name, _ in CHAINED))]
        if self._wants(ly.IO_URING):
            wanted += [(program, RAW) for _, program in URING_ATTACHMENTS]
        if ly.AIO in self.layers:  # tail-called by the exit program: loaded as its kind
            wanted += [(program, entry.exit) for program in AIO_PROGRAMS]
        if ly.BLOCK in self.layers:
            wanted += [(program, RAW) for candidates in BLOCK_ATTACHMENTS for _, program in candidates]
        if ly.CACHE in self.layers:
            wanted += [(program, ProgramKind(BPF.TRACEPOINT)) for spec, pairs in CACHE_ATTACHMENTS
                       if self._cache_fields[spec.macro] is not None for _, program in pairs]
        return list(dict.fromkeys(wanted))

    def _wants(self, layer: str) -> bool:
        """Whether `layer` was asked for and this kernel can give it."""
        return layer in self.layers and layer not in self.unavailable_layers

    def layer_report(self) -> dict[str, str]:
        """How each layer asked for is probed here, or why it is unavailable."""
        return {**self.attached_layers, **{layer: f"unavailable: {why}" for layer, why in self.unavailable_layers.items()}}

    def load_program(self, name: str, kind: ProgramKind, group: int | None = None) -> int:
        """Load (verify) a program as this kind, once; its fd. bcc loads the kinds it knows;
        tp_btf and fentry programs, which need a BTF attach point, are loaded here, with the
        program arrays of their prototype group (tail_calls; by default the kind's)."""
        if kind.prog_type != BPF_PROG_TYPE_TRACING:
            return self.bpf.load_func(name.encode(), kind.prog_type, attach_type=kind.attach_type or -1).fd
        group = self.entry.group_of(kind) if group is None else group
        key = (name, kind, group)
        fd = self._tracing.get(key)
        if fd is None:
            compiled = self.bpf.compiled
            code = self.bpf.instructions(name, self.tail_calls.maps(group))
            fd = prog_load(kind.prog_type, code, name.encode(), compiled.license.encode(), compiled.kern_version,
                           kind.attach_type, kind.btf_id)
            if self._tracing.setdefault(key, fd) != fd:  # another thread loaded it meanwhile
                os.close(fd)
                fd = self._tracing[key]
        return fd

    def _preload(self) -> list[Future]:
        """Verify the programs attach() will need on background threads, from now on: the
        verifier is most of a cached start (~0.8 s here, one core), and the calls wait in the
        kernel with the GIL released. A program that fails here fails again, with its
        reason, when attach() loads it."""
        def load(name: str, kind: ProgramKind) -> None:
            with contextlib.suppress(Exception):  # bcc raises bare Exceptions
                self.load_program(name, kind)

        pool = ThreadPoolExecutor(max_workers=min(PRELOAD_THREADS, os.cpu_count() or 1),
                                  thread_name_prefix="ioobserve-verify")
        futures = [pool.submit(load, *program) for program in self._programs_wanted()]
        pool.shutdown(wait=False)  # the queued loads still run
        return futures

    def verify(self) -> int:
        """Load (verify) the programs attach() would, without attaching; how many loaded.
        Raises ProbeError with the first one the kernel refuses, but for the uprobe_multi
        programs, which a kernel before 6.6 refuses (their layers then take one uprobe each)."""
        wait(self._preloading)
        loaded = 0
        for name, kind in self._programs_wanted():
            try:
                self.load_program(name, kind)
                loaded += 1
            except Exception as exc:  # bcc raises bare Exceptions
                if name not in (MULTI_ENTRY_PROGRAM, MULTI_RETURN_PROGRAM):
                    raise ProbeError(f"the kernel refused program {name}: {exc}") from exc
        return loaded

    def configure(self, filters: KernelFilters, self_tgid: int | None = None) -> None:
        """Fill the syscall table and filter maps; call before attach()."""
        for name, rows in (("syscall_specs", spec_array()), ("uring_specs", uring_spec_array()), ("aio_ops", aio_op_array())):
            table = self.bpf[name]
            for index, row in enumerate(rows):
                if row["op"]:
                    table[ctypes.c_int(index)] = table.Leaf.from_buffer_copy(row.tobytes())
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
        cfg["emit_some"] = bool(self.sizes.aggregate_entries)  # aggregating: no events until asked for
        cfg["select_gen"] = 1  # threads' kept verdicts (0: none yet) are of these filters
        call_layers = [*self.libraries.values(), *([self.python.calls] if self.python is not None else [])]
        if call_layers:
            cfg["layers"] |= ev.LAYER_LIBS
            calls = self.bpf["call_specs"]
            specs = tuple(spec for probes in call_layers for spec in probes.specs)
            for op, row in enumerate(call_spec_array(specs)):
                if row["library"]:
                    calls[ctypes.c_int(op)] = calls.Leaf.from_buffer_copy(row.tobytes())
        if self.python is not None:  # libpython is found through the kernel's report of mappings
            cfg["layers"] |= ev.LAYER_PYTHON
        if ly.AIO in self.layers:
            cfg["layers"] |= ev.LAYER_AIO
        with self._config_lock:
            self._config = cfg
            self._write_config()

    def _update_config(self, **changes: int) -> None:
        """Change fields of the config (a value of BUMP adds one: emit_gen, select_gen) and write it."""
        with self._config_lock:
            if self._config is None:
                return  # configure() writes the whole config later
            for name, value in changes.items():
                self._config[name] = self._config[name] + 1 if value is BUMP else value
            self._write_config()

    def _write_config(self) -> None:
        config = self.bpf["config"]
        config[ctypes.c_int(0)] = config.Leaf.from_buffer_copy(self._config.tobytes())

    def exclude_helper(self, pid: int) -> None:
        """Never trace this helper process of ours (capture, a trace's disk process); the kernel
        forgets it when it exits. Any thread, before or after attach(); after close() nothing traces it."""
        if not self.closed:
            self.bpf["own_tgids"][ctypes.c_uint32(pid)] = ctypes.c_uint8(1)
            self._update_config(select_gen=BUMP)  # after the table: its threads decide again

    def emit_some(self, on: bool) -> None:
        """With kernel aggregation: events leave the kernel only for the cgroups of emit_cgroup
        (on) or for every traced task (off); every call is aggregated either way."""
        self._update_config(emit_some=on)

    def emit_cgroup(self, cgroup_id: int, on: bool) -> None:
        """Let a cgroup's events (and its descendants') leave the kernel, or stop them."""
        table = self.bpf["emit_cgroups"]
        if on:
            table[ctypes.c_uint64(cgroup_id)] = ctypes.c_uint8(1)
        else:
            table.pop(ctypes.c_uint64(cgroup_id), None)
        # After the table: a verdict the kernel caches under the new generation saw the new set.
        self._update_config(emit_count=len(table), emit_gen=BUMP)

    def aggregates(self) -> tuple[np.ndarray, int]:
        """The kernel's aggregates as they stand: ev.AGG_ENTRY rows (a key, its sums and
        histograms) and the calls dropped because the table was full."""
        entries = b"".join(bytes(key) + bytes(value) for key, value in self.bpf["agg_calls"].items())
        return np.frombuffer(entries, dtype=ev.AGG_ENTRY), int(self.bpf["agg_dropped"][ctypes.c_int(0)].value)

    def forget_aggregates(self, cgroup_ids: set[int]) -> None:
        """Remove the aggregate entries of these cgroups (gone: their sums are carried in user space)."""
        table = self.bpf["agg_calls"]
        for key in [key for key in table if key.cgroup_id in cgroup_ids]:
            table.pop(key, None)

    def _fill_set(self, name: str, keys) -> None:
        table = self.bpf[name]
        for key in keys:
            table[key] = ctypes.c_uint8(1)

    def trace_pid(self, pid: int) -> None:
        """Add a process (and, through fork, its future descendants) to the pid filter."""
        self.bpf["traced_tgids"][ctypes.c_uint32(pid)] = ctypes.c_uint8(1)
        self._update_config(select_gen=BUMP)

    def attach(self) -> None:
        """Attach every program; lineage first so no process is born unseen. Optional layers
        the kernel cannot give are left out (see attached_layers). The copies of a library
        layer's library that running processes map besides the system's are probed by
        scan_running(), once the command is on its way."""
        wait(self._preloading)
        try:
            for tracepoint, program in ATTACHMENTS:
                self.bpf.attach_raw_tracepoint(tp=tracepoint.encode(), fn_name=program.encode())
                self._attached.append(tracepoint)
        except Exception as exc:
            self.detach()
            raise ProbeError(f"attaching {program} to raw tracepoint {tracepoint} failed: {exc}") from exc
        self._attach_syscalls()
        if self._wants(ly.IO_URING):
            self._attach_uring()
        if self.python is not None:
            self._attach_python()
        if ly.BLOCK in self.layers and (block := self._attach_block()):
            self.attached_layers[ly.BLOCK] = f"raw tracepoints {block}"
        if ly.CACHE in self.layers and (cache := self._attach_cache()):
            self.attached_layers[ly.CACHE] = f"tracepoints {cache}"
        for layer in self.libraries:
            self._attach_library_layer(layer)
        if ly.VFS in self.layers:
            self._attach_vfs()

    def _attach_syscalls(self) -> None:
        """The syscall layer by its way in here, exits first (an enter's record waits for one),
        with the AIO layer's programs its exit program tail-calls."""
        entry = self.entry
        try:
            if ly.AIO in self.layers:
                for index, program in enumerate(AIO_PROGRAMS):
                    self.tail_calls.set("aio_programs", index, program, entry.exit)
            if entry.mechanism == "raw":
                for tracepoint, program in RAW_SYSCALL_ATTACHMENTS:
                    self.bpf.attach_raw_tracepoint(tp=tracepoint.encode(), fn_name=program.encode())
                    self._attached.append(tracepoint)
            elif entry.mechanism == "tp_btf":
                self._link("on_sys_exit", entry.exit)
                self._link(entry.enter_program, entry.enter)
            else:
                # the bodies the stubs on every function tail-call, a set per prototype group
                self.tail_calls.set("syscall_exit_body", 0, "on_sys_exit", entry.exit)
                self.tail_calls.set("syscall_enter_body", 0, entry.enter_program, entry.enter)
                for _, _, exit_id, group in entry.attach_points:
                    self._link("syscall_fexit", replace(entry.exit, btf_id=exit_id), group)
                for _, enter_id, _, group in entry.attach_points:
                    self._link("syscall_fentry", replace(entry.enter, btf_id=enter_id), group)
        except Exception as exc:  # bcc raises bare Exceptions
            self.detach()
            raise ProbeError(f"attaching the syscall layer by {entry.describe()} failed: {exc}") from exc
        self.attached_layers[ly.SYSCALL] = entry.describe()
        if ly.AIO in self.layers:
            self.attached_layers[ly.AIO] = "the syscall layer's io_submit (each iocb) and io_getevents/io_pgetevents"

    def _link(self, program: str, kind: ProgramKind, group: int | None = None) -> None:
        """Load a tracing program for its attach point and attach it there."""
        self._links.append(tracing_attach(self.load_program(program, kind, group)))

    def _attach_python(self) -> None:
        try:
            self.python.attach()
        except Exception as exc:  # bcc raises bare Exceptions
            self.detach()
            raise ProbeError(f"the Python layer could not attach: {exc}") from exc
        self.attached_layers[ly.PYTHON] = self.python.describe()

    def _attach_vfs(self) -> None:
        """kprobes on the VFS functions (`record` checked the kernel has them)."""
        try:
            for function, program in VFS_FUNCTIONS:
                self.bpf.attach_kretprobe(event=function.encode(), fn_name=VFS_RETURN.encode())
                self._kprobes.append(function)
                self.bpf.attach_kprobe(event=function.encode(), fn_name=program.encode())
        except Exception as exc:  # bcc raises bare Exceptions
            self.detach()
            raise ProbeError(f"the VFS layer could not attach to {function}: {exc}") from exc
        self.attached_layers[ly.VFS] = f"kprobes on {', '.join(f for f, _ in VFS_FUNCTIONS)}"

    def _attach_uring(self) -> None:
        """The IO_URING layer's tracepoints; if one does not attach, none of them (the
        syscall layer still sees io_uring_enter)."""
        attached = []
        try:
            for tracepoint, program in URING_ATTACHMENTS:
                self.bpf.attach_raw_tracepoint(tp=tracepoint.encode(), fn_name=program.encode())
                attached.append(tracepoint)
        except Exception as exc:  # bcc raises bare Exceptions
            for tracepoint in attached:
                with contextlib.suppress(Exception):
                    self.bpf.detach_raw_tracepoint(tp=tracepoint.encode())
            self.unavailable_layers[ly.IO_URING] = f"{tracepoint} did not attach: {exc}"
            return
        self._attached.extend(attached)
        self.attached_layers[ly.IO_URING] = f"raw tracepoints {', '.join(attached)}"

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

    def _attach_cache(self) -> str | None:
        """Attach the page-cache tracepoints the kernel has with the fields the probes read
        (readahead is a bonus: filemap alone gives the misses)."""
        attached = []
        for spec, pairs in CACHE_ATTACHMENTS:
            if self._cache_fields[spec.macro] is None:
                continue
            for tracepoint, program in pairs:
                try:
                    self.bpf.attach_tracepoint(tp=tracepoint.encode(), fn_name=program.encode())
                except Exception:  # refused here: the layer goes on without it
                    continue
                self._attached_classic.append(tracepoint)
                attached.append(tracepoint.split(":")[1])
        return ", ".join(attached) if any("filemap" in name for name in attached) else None

    def _attach_library_layer(self, layer: str) -> None:
        """Probe the system's copy of a layer's library and every other copy a running process
        maps; copies mapped later are probed as the kernel reports them (library_mapped)."""
        from bcc import BPF  # deferred: only probes import bcc

        probes = self.libraries[layer]
        probes.load_programs()
        for path in [found.decode() for name in SYSTEM_LIBRARIES[layer] if (found := BPF.find_library(name.encode()))]:
            probes.attach_file(path)
        if layer == ly.LIBC and not probes.functions:  # no system libc: a running process's copy, then
            for path in mapped_files(probes.pattern):
                probes.attach_file(path)
        if layer == ly.LIBC and not probes.functions:  # every process has a libc: something is wrong
            self.detach()
            why = "; ".join(f"{path}: {reason}" for path, reason in probes.failures.items()) or "no libc found"
            raise ProbeError(f"the libc layer could not probe any libc ({why})")
        self._describe_library_layer(layer)

    def scan_running(self) -> None:
        """Probe the copies of a library layer's library that running processes map besides
        the system's (containers' own libc): after attach(), once a command is released, as
        reading every process's mappings takes a while on a busy node."""
        for layer, probes in self.libraries.items():
            for path in mapped_files(probes.pattern):
                with self._attaching:
                    if self.stopping:
                        return
                    probes.attach_file(path)
                    self._describe_library_layer(layer)

    def _describe_library_layer(self, layer: str) -> None:
        """How a library layer is probed so far (HDF5 and MPI-IO grow as processes map them)."""
        probes = self.libraries[layer]
        how = "uprobes" if probes.multi is False else "uprobe_multi links"
        what = f"{how} on {probes.functions} functions in {len(probes.files)} {layer} file(s)"
        if layer != ly.LIBC:
            what += ", probed as processes map them"
        if probes.failures:
            what += f" ({len(probes.failures)} could not be probed: {next(iter(probes.failures.values()))})"
        self.attached_layers[layer] = what

    def library_mapped(self, pid: int, path: str) -> None:
        """A selected process mapped `path` executable: probe it if a library layer wants it,
        read its interpreter if it is libpython (nothing once the recording stops)."""
        if self.stopping:
            return  # without the lock: detach() may hold it a while
        with self._attaching:
            if self.stopping:
                return
            for layer, probes in self.libraries.items():
                if probes.consider(pid, path):
                    self._describe_library_layer(layer)
            if self.python is not None and self.python.consider(pid, path):
                self.attached_layers[ly.PYTHON] = self.python.describe()

    def program_started(self, pid: int) -> None:
        """A selected process exec'd: read its interpreter if the program is a python binary."""
        if self.stopping:
            return
        with self._attaching:
            if not self.stopping and self.python is not None and self.python.consider(pid):
                self.attached_layers[ly.PYTHON] = self.python.describe()

    def stop_selecting(self) -> None:
        """Select no process from now on (one write of the config: every program returns
        before its work), so the rings hold all there will be and detach() may run while they
        are drained; no probe is attached after this."""
        with self._attaching:
            self.stopping = True
        self._update_config(stopped=1)

    def detach(self) -> None:
        """Detach every attached program (safe to call twice)."""
        with self._attaching:
            self.stopping = True
        if self.python is not None:
            self.python.detach()
        for probes in self.libraries.values():
            probes.close()
        for name in list(getattr(self.bpf, "uprobe_fds", {})):
            with contextlib.suppress(Exception):
                self.bpf.detach_uprobe_event(name)
        while self._kprobes:
            function = self._kprobes.pop().encode()
            for detach in (self.bpf.detach_kprobe, self.bpf.detach_kretprobe):
                with contextlib.suppress(Exception):
                    detach(event=function)
        while self._links:
            with contextlib.suppress(OSError):
                os.close(self._links.pop())
        while self._attached_classic:
            with contextlib.suppress(Exception):
                self.bpf.detach_tracepoint(tp=self._attached_classic.pop().encode())
        while self._attached:
            tracepoint = self._attached.pop()
            with contextlib.suppress(Exception):
                self.bpf.detach_raw_tracepoint(tp=tracepoint.encode())

    def close(self) -> None:
        """Detach and release the programs and maps."""
        self.closed = True
        self.detach()
        while self._tracing:
            with contextlib.suppress(OSError):
                os.close(self._tracing.popitem()[1])
        self.tail_calls.close()
        with contextlib.suppress(Exception):
            self.bpf.cleanup()

    def run_stats(self) -> dict[str, tuple[int, int]]:
        """Each loaded program's (run time in ns, runs), as the kernel counts them while its
        BPF run-time stats are on (kernel.bpf_stats_enabled, or enable_run_stats())."""
        fds = [(name.decode(), function.fd) for name, function in list(self.bpf.funcs.items())]
        fds += [(name, fd) for (name, _, _), fd in list(self._tracing.items())]
        stats: dict[str, tuple[int, int]] = {}
        for name, fd in fds:  # a fentry stub, loaded once per function, sums its copies
            with contextlib.suppress(OSError):
                _, run_ns, runs = prog_run_stats(fd)
                total_ns, total_runs = stats.get(name, (0, 0))
                stats[name] = (total_ns + run_ns, total_runs + runs)
        return stats

    def ring(self, name: str) -> tuple[int, int]:
        """(map fd, data size in bytes) of the ring buffer `name` ("events" or "aux")."""
        pages = self.sizes.events_pages if name == "events" else self.sizes.aux_pages
        return self.bpf[name].map_fd, pages * os.sysconf("SC_PAGE_SIZE")

    def lost_counts(self) -> np.ndarray:
        """Failed reserves so far, summed over CPUs: index = op code, or LOST_AUX_BASE + kind."""
        table = self.bpf["lost"]
        return np.array([sum(table.getvalue(ctypes.c_int(i))) for i in range(ev.LOST_SLOTS)], dtype=np.uint64)
