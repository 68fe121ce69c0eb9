"""Compile the probes of every layer into one object, load (verify) their programs, and
attach and detach the layers (probes/attach/, a module per layer) in order, each through the
same interface (probes/attach/__init__.py)."""

from __future__ import annotations

import contextlib
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from ioobserve import __version__
from ioobserve.context.mappings import MappedFile
from ioobserve.data import events as ev
from ioobserve.probes import layers as ly
from ioobserve.probes.attach.block import BlockLayer
from ioobserve.probes.attach.cache import CacheLayer
from ioobserve.probes.attach.io_uring import UringLayer
from ioobserve.probes.attach.libraries import LibraryLayer
from ioobserve.probes.attach.lineage import LineageLayer
from ioobserve.probes.attach.python import PythonLayer, PythonOptions
from ioobserve.probes.attach.syscall import SyscallEntry, SyscallLayer, aio_layer, net_layer
from ioobserve.probes.attach.uprobe_multi import BPF_TRACE_UPROBE_MULTI
from ioobserve.probes.attach.uprobes import MULTI_ENTRY_PROGRAM, MULTI_RETURN_PROGRAM
from ioobserve.probes.attach.vfs import VfsLayer
from ioobserve.probes.build.compile import ProbeError, compile_bpf
from ioobserve.probes.build.compile_spool import compile_remotely, spool_dir
from ioobserve.probes.build.headers import Headers
from ioobserve.probes.build.object_cache import CompiledObject, cache_key, extract, lookup, store
from ioobserve.probes.kernel.bpf_syscall import prog_load, prog_run_stats, prog_verified_insns
from ioobserve.probes.kernel.btf import Btf
from ioobserve.probes.kernel.features import tracefs_dir
from ioobserve.probes.kernel.kernel_layout import KernelLayout
from ioobserve.probes.kernel.program_kind import BPF_PROG_TYPE_KPROBE, BPF_PROG_TYPE_TRACING, ProgramKind
from ioobserve.probes.kernel.syscall_table import machine_arch
from ioobserve.probes.kernel.verifier_features import verifier_cflags
from ioobserve.probes.maps.call_table import call_entries
from ioobserve.probes.maps.filters import KernelFilters
from ioobserve.probes.maps.tables import ProbeTables
from ioobserve.probes.maps.tail_calls import TailCalls

PROBES_DIR = Path(__file__).resolve().parents[3] / "ebpf_probes"
# A file per layer, compiled as one unit in this order (each uses what the ones before it
# define): bcc rewrites map calls only in its main file.
SOURCES = ("core.bpf.c", "paths.bpf.c", "lineage.bpf.c", "syscall.bpf.c", "io_uring.bpf.c", "aio.bpf.c",
           "block.bpf.c", "cache.bpf.c", "calls.bpf.c", "vfs.bpf.c", "python_stacks.bpf.c")
# Stack pointer at a function's return minus at its entry: x86 pops the return address.
RETURN_SP_ADJUST = {"x86_64": 8, "aarch64": 0}
PRELOAD_THREADS = 4  # programs verified at once (the kernel verifies each on its caller's CPU)


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
    from ioobserve.probes.load.cached_bpf import CachedBPF  # deferred: it imports bcc

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
    installed = Path(__file__).resolve().parents[2] / "ebpf_probes"
    return installed if installed.is_dir() else PROBES_DIR


class Probes:
    """The probes of one recording: every layer asked for, on this kernel, compiled into one
    object, loaded, and attached and detached in order."""

    def __init__(self, layout: KernelLayout, headers: Headers, entry: SyscallEntry, sizes: ProbeSizes = ProbeSizes(),
                 layers: frozenset[str] = ly.DEFAULT, python: PythonOptions = PythonOptions(), btf: Btf | None = None):
        self.sizes = sizes
        self.layers = layers
        self.btf = btf  # the kernel's types: the recording's exit accounting reads its layouts too
        self.entry = entry  # the syscall layer's way in (attach.syscall.choose)
        self._tracing: dict[tuple[str, ProgramKind, int], int] = {}  # tp_btf and fentry programs loaded (by group): fd
        self.attached_layers: dict[str, str] = {}  # layer -> how it is probed here, once attach() ran
        self.unavailable_layers: dict[str, str] = {}  # layer asked for -> why this kernel cannot give it
        cache = CacheLayer(tracefs_dir(mount=False))  # its tracepoints' offsets are compiled in, asked for or not
        kernel_layers = [LineageLayer(), SyscallLayer(entry, layers)]
        if ly.IO_URING in layers:
            kernel_layers.append(UringLayer(btf, layout))
        if ly.BLOCK in layers:
            kernel_layers.append(BlockLayer())
        if ly.CACHE in layers:
            kernel_layers.append(cache)
        if ly.VFS in layers:
            kernel_layers.append(VfsLayer(btf))
        if ly.AIO in layers:
            kernel_layers.append(aio_layer())
        if ly.NET in layers:
            kernel_layers.append(net_layer())
        self._kernel_layers = kernel_layers  # then the uprobe layers (made once the object is): see _layers()
        for layer in kernel_layers:
            if layer.unavailable:
                self.unavailable_layers[layer.name] = layer.unavailable
        source_dir = probes_source_dir()
        cflags = layout.cflags() + verifier_cflags(layout) + cache.cflags() + [
            f"-I{source_dir}",
            f"-DEVENTS_PAGES={sizes.events_pages}",
            f"-DAUX_PAGES={sizes.aux_pages}",
            f"-DKNOWN_FILES={sizes.known_files}",
            f"-DPAGE_SIZE_={os.sysconf('SC_PAGE_SIZE')}",
            f"-DRETURN_SP_ADJUST={RETURN_SP_ADJUST.get(machine_arch(), 0)}",
            f"-DIOO_CALL_ENTRIES={call_entries()}",
            "-Wno-unused-function",
            *(["-DIOO_AGGREGATE", f"-DAGG_ENTRIES={sizes.aggregate_entries}"] if sizes.aggregate_entries else []),
        ]
        text = "".join(f'#line 1 "{source_dir / name}"\n' + (source_dir / name).read_text() + "\n" for name in SOURCES)
        self.closed = False
        self.stopping = False  # stop_selecting() was called: no new probes
        self._attaching = threading.Lock()  # library and interpreter probes, attached by the collector's reader
        self.bpf, self.from_cache = _probe_object(text, cflags, headers)
        self.tables = ProbeTables(self.bpf, sizes.events_pages, sizes.aux_pages, bool(sizes.aggregate_entries))
        self.tail_calls = TailCalls(self.bpf, entry, self.load_program)
        self.libraries = {layer: LibraryLayer(self.bpf, layer) for layer in ly.LIBRARY_LAYERS if layer in layers}
        self.python = PythonLayer(self.bpf, python, self.tail_calls, entry.enter) if ly.PYTHON in layers else None
        self._uprobe_layers = [*([self.python] if self.python is not None else []), *self.libraries.values()]
        self.gate = None  # the recording's ExecGate while it runs (its report goes in the end record)
        self._preloading = self._preload()

    def _layers(self) -> list:
        """Every layer, in the order attach() takes them: lineage first, so that no process is
        born unseen, then the syscall layer, the other kernel layers, Python and the libraries."""
        return [*self._kernel_layers, *self._uprobe_layers]

    def _programs_wanted(self) -> list[tuple[str, str, ProgramKind]]:
        """(layer, program, kind) of what attach() loads for these layers, the ones the
        verifier takes longest over first: the syscall layer's, the uprobe_multi links'
        (whose refusal leaves their layers one uprobe per function), lineage's, the uprobe
        layers' (the Python walk) and the other kernel layers'."""
        lineage, syscall, *others = self._kernel_layers
        wanted = [(syscall.name, *program) for program in syscall.programs()]
        if self._uprobe_layers:
            multi = ProgramKind(BPF_PROG_TYPE_KPROBE, BPF_TRACE_UPROBE_MULTI)
            wanted += [("uprobe_multi", name, multi) for name in (MULTI_RETURN_PROGRAM, MULTI_ENTRY_PROGRAM)]
        for layer in [lineage, *self._uprobe_layers, *others]:
            if not layer.unavailable:
                wanted += [(layer.name, *program) for program in layer.programs()]
        return list(dict.fromkeys(wanted))

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
        futures = [pool.submit(load, name, kind) for _, name, kind in self._programs_wanted()]
        pool.shutdown(wait=False)  # the queued loads still run
        return futures

    def verify(self) -> int:
        """Load (verify) the programs attach() would, without attaching; how many loaded.
        Raises ProbeError with the first one of lineage, the syscall layer or the Python
        layer the kernel refuses; a refused program of another layer makes that layer
        unavailable (as attach() would leave it out), and the uprobe_multi programs, which a
        kernel before 6.6 refuses, leave their layers one uprobe per function."""
        wait(self._preloading)
        loaded = 0
        for layer, name, kind in self._programs_wanted():
            try:
                self.load_program(name, kind)
                loaded += 1
            except Exception as exc:  # bcc raises bare Exceptions
                if layer in ("lineage", ly.SYSCALL, ly.PYTHON):
                    raise ProbeError(f"the kernel refused program {name}: {exc}") from exc
                if layer != "uprobe_multi":
                    self.unavailable_layers.setdefault(layer, f"the kernel refused program {name}: {exc}")
        return loaded

    def configure(self, filters: KernelFilters, self_tgid: int | None = None) -> None:
        """Fill the tables and filter maps; call before attach()."""
        call_layers = [library.probes for library in self.libraries.values()]
        call_layers += [self.python.calls] if self.python is not None else []
        specs = tuple(spec for probes in call_layers for spec in probes.specs)
        bits = ((ev.LAYER_PYTHON if self.python is not None else 0) | (ev.LAYER_AIO if ly.AIO in self.layers else 0)
                | (ev.LAYER_NET if ly.NET in self.layers else 0))
        self.tables.configure(filters, self_tgid, specs, bits)

    def attach(self) -> None:
        """Attach every layer, lineage first so that no process is born unseen (_layers()).
        Optional layers the kernel cannot give are left out (see layer_report); one asked for
        by name (VFS, the libraries) raises ProbeError saying why. The copies of a library
        layer's library that running processes map besides the system's are probed by
        scan_running(), before the command starts."""
        wait(self._preloading)
        for layer in self._layers():
            if layer.name in self.unavailable_layers and layer.name != ly.VFS:
                continue  # the VFS layer is asked for explicitly: its attach says why it cannot
            try:
                how = layer.attach(self)
            except ProbeError:
                self.detach()
                raise
            if layer.unavailable:
                self.unavailable_layers[layer.name] = layer.unavailable
            elif layer.name != "lineage":
                self.attached_layers[layer.name] = how

    def scan_running(self) -> None:
        """Probe the copies of a library layer's library that running processes map besides
        the system's (containers' own libc): after attach(), once the collector runs (a
        copy new to the kernel is reported to it as well)."""
        for library in self.libraries.values():
            for mapped in library.running_copies():
                with self._attaching:
                    if self.stopping:
                        return
                    library.probes.attach_mapped(mapped)
                    self.attached_layers[library.name] = library.describe()

    def library_mapped(self, pid: int, path: str, ident: tuple[int, int], mapped_ns: int = 0) -> None:
        """A selected process mapped `path` (inode `ident`) executable at `mapped_ns`
        (CLOCK_MONOTONIC): probe it if a library layer wants it, read its interpreter if it is
        libpython (nothing once the recording stops, but saying a refused one's process)."""
        if self.python is not None:
            self.python.note_program(pid, ident)
        if self.stopping:
            return  # without the lock: detach() may hold it a while
        with self._attaching:
            if self.stopping:
                return
            for library in self.libraries.values():
                if library.consider(pid, path, ident, mapped_ns):
                    self.attached_layers[library.name] = library.describe()
            if self.python is not None and self.python.consider(pid, path, mapped_ns):
                self.attached_layers[ly.PYTHON] = self.python.describe()

    def has_uprobe_layers(self) -> bool:
        """Whether a layer probes library or interpreter files (what the exec gate waits for)."""
        return any(layer.name not in self.unavailable_layers for layer in self._uprobe_layers)

    def prepare_exec(self, pid: int, files: list[MappedFile]) -> bool:
        """Process `pid`, held at the exec gate, will load `files` (the program first): probe
        the copies of a library layer's library or of an interpreter among them that no probe
        covers yet; True if one was probed now."""
        wanted = [mapped for mapped in files
                  if any(library.probes.wants(mapped) for library in self.libraries.values())
                  or (self.python is not None and self.python.wants(mapped))]
        if not wanted or self.stopping:
            return False
        probed = False
        with self._attaching:
            if self.stopping:
                return False
            for mapped in wanted:
                for library in self.libraries.values():
                    if library.probes.wants(mapped) and library.probes.attach_mapped(mapped):
                        self.attached_layers[library.name] = library.describe()
                        probed = True
                if self.python is not None and self.python.wants(mapped) and self.python.prepare(mapped):
                    self.attached_layers[ly.PYTHON] = self.python.describe()
                    probed = True
        return probed

    def program_started(self, pid: int, exe: tuple[int, int] = (0, 0), started_ns: int = 0) -> None:
        """A selected process exec'd the file `exe` at `started_ns` (CLOCK_MONOTONIC): read its
        interpreter if the program is a python binary."""
        if self.python is not None:
            self.python.note_program(pid, exe)
        if self.stopping:
            return
        with self._attaching:
            if not self.stopping and self.python is not None and self.python.consider(pid, started_ns=started_ns):
                self.attached_layers[ly.PYTHON] = self.python.describe()

    def stop_selecting(self) -> None:
        """Select no process from now on (one write of the config: every program returns
        before its work), so the rings hold all there will be and detach() may run while they
        are drained; no probe is attached after this."""
        with self._attaching:
            self.stopping = True
        self.tables.update(stopped=1)

    def detach(self) -> None:
        """Detach every attached program (safe to call twice): the uprobe layers first, in the
        order they attached, then the kernel layers, the last attached first."""
        with self._attaching:
            self.stopping = True
        for layer in [*self._uprobe_layers, *reversed(self._kernel_layers)]:
            layer.detach()

    def close(self) -> None:
        """Detach and release the programs and maps."""
        self.closed = self.tables.closed = True
        self.detach()
        while self._tracing:
            with contextlib.suppress(OSError):
                os.close(self._tracing.popitem()[1])
        self.tail_calls.close()
        with contextlib.suppress(Exception):
            self.bpf.cleanup()

    def verified_instructions(self) -> dict[str, int]:
        """Each loaded program's instructions processed by the verifier (its largest copy)."""
        fds = [(name.decode(), function.fd) for name, function in list(self.bpf.funcs.items())]
        fds += [(name, fd) for (name, _, _), fd in list(self._tracing.items())]
        counts: dict[str, int] = {}
        for name, fd in fds:
            with contextlib.suppress(OSError):
                counts[name] = max(counts.get(name, 0), prog_verified_insns(fd))
        return dict(sorted(counts.items()))

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
