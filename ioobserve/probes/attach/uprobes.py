"""Uprobes on library and interpreter files: which files to probe, which addresses, attached
once per file (the library layers' and the Python layer's calls).

A library is probed by file (inode): every process mapping that file, now or later, runs the
probes, and the programs drop what the filters do not select. Aliases at one address (open
and open64) are probed once. Files are found in the mappings of running processes when the
recording starts, and later from the kernel's report of each new executable mapping.
Probes go in through two uprobe_multi links per file where the kernel has them, one perf
event per probe (slow to detach) where it does not. An op may be probed at call sites rather
than at its function (`sites`: CPython's module loads, see ioobserve/python/import_sites.py):
there a probe on the call and one on the next instruction stand for the entry and the return.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ioobserve.context.mappings import MappedFile, file_ident, mapped_files, reported_file
from ioobserve.data import events as ev
from ioobserve.probes.attach.uprobe_multi import BPF_TRACE_UPROBE_MULTI, link_uprobes
from ioobserve.probes.maps.call_table import CallSpec, entry_program

RETURN_PROGRAM = "on_call_return"
MULTI_ENTRY_PROGRAM, MULTI_RETURN_PROGRAM = "on_call_enter_multi", "on_call_return_multi"
SITE_ENTRY_PROGRAM = "enter_py_import_find_and_load"  # the one call-site op, where links are missing
COOKIE_FIND_AND_LOAD, COOKIE_RETURN = 0x10000, 0x20000  # IOO_COOKIE_* of common.h
CALL_LENGTH = 5  # x86-64 `call rel32`: the instruction after a call site
LIBC_FILE = re.compile(r"^libc(\.so\.6|-[0-9.]+\.so)$")
# libhdf5 as distributions name it (libhdf5.so.310, Debian's libhdf5_serial.so.103 and
# libhdf5_mpich.so.103) and as wheels bundle it (h5py.libs/libhdf5-9e18f0c6.so.320.0.0);
# not the high-level libhdf5_hl.
HDF5_FILE = re.compile(r"^libhdf5(_serial|_openmpi|_mpich)?(-[0-9a-f]{8})?\.so(\.[0-9]+)*$")
# MPI libraries: MPICH and its ABI family (libmpich.so.12, libmpi.so.12), Open MPI (libmpi.so.40).
MPI_FILE = re.compile(r"^lib(mpi|mpich)(-[0-9a-f]{8})?\.so(\.[0-9]+)*$")
# OpenSSL's libssl (libssl.so.3, libssl.so.1.1) and copies wheels bundle (libssl-1b2c3d4e.so.3).
TLS_FILE = re.compile(r"^libssl(-[0-9a-f]{8})?\.so(\.[0-9]+)*$")


def resolve_calls(symbols: list[tuple[bytes, int]], specs: tuple[CallSpec, ...]) -> dict[int, str]:
    """{address: op} from a library's (symbol, address) list: each address once, given to the
    first spec (in table order) naming a symbol there."""
    where: dict[str, int] = {}
    for name, address in symbols:
        where.setdefault(name.decode(errors="replace"), address)
    chosen: dict[int, str] = {}
    for spec in specs:
        for symbol in spec.symbols:
            address = where.get(symbol)
            if address is not None and address not in chosen:
                chosen[address] = spec.op
    return chosen


def running_copies(pattern: re.Pattern) -> list[MappedFile]:
    """The distinct files (by inode) matching `pattern` by name that running processes map,
    each reached through a process mapping it (a container's own copy, not the host's)."""
    found: dict[tuple[int, int], MappedFile] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            for mapped in mapped_files(int(entry), pattern):
                found.setdefault(mapped.ident, mapped)
    return sorted(found.values(), key=lambda mapped: mapped.inside)


@dataclass
class LibraryProbes:
    """The uprobes of one library layer (its call specs), on every file it was attached to."""

    bpf: object
    specs: tuple[CallSpec, ...]
    pattern: re.Pattern
    files: dict[tuple[int, int], int] = field(default_factory=dict)  # (dev, inode) -> functions probed
    names: dict[tuple[int, int], str] = field(default_factory=dict)  # (dev, inode) -> its path inside its root
    late: dict[str, float] = field(default_factory=dict)  # name -> seconds from its first mapping to its probes
    failures: dict[str, str] = field(default_factory=dict)  # path -> why it could not be probed
    multi: bool | None = None  # whether uprobe_multi links work here (None: not tried yet)
    links: list[int] = field(default_factory=list)
    events: list[bytes] = field(default_factory=list)  # bcc's perf-event uprobes (no links here), by event name
    locate: Callable[[str], dict[int, str]] | None = None  # {address: op} of functions without a symbol
    sites: Callable[[str], dict[int, str]] | None = None  # {call address: op} of ops probed where they are called
    site_files: int = 0  # files probed at call sites

    def attach_mapped(self, mapped: MappedFile) -> int:
        """Probe a file a process maps, through that process's mapping of it: held open
        meanwhile, as attaching takes a while and a short process may leave before it ends."""
        if mapped.ident in self.files:
            return self.files[mapped.ident]
        try:
            held = os.open(mapped.opened, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            self.failures[mapped.shown] = f"its process left before it could be read ({exc.strerror})"
            return 0
        try:
            return self.attach_file(f"/proc/self/fd/{held}", mapped.shown)
        finally:
            os.close(held)

    def attach_file(self, path: str, shown: str | None = None) -> int:
        """Probe one library file (once per inode), opened at `path` and named `shown` (its
        path inside the root it was found in); the number of functions probed there."""
        from bcc import BPF  # deferred: only probes import bcc

        shown = shown or path
        key = file_ident(path)
        if key is None:
            self.failures[shown] = "not found"
            return 0
        if key in self.files:
            return self.files[key]
        self.files[key] = 0
        self.names[key] = shown
        wanted = "^(" + "|".join(re.escape(s) for spec in self.specs for s in spec.symbols) + ")$"
        try:
            calls = resolve_calls(BPF.get_user_functions_and_addresses(path, wanted), self.specs)
            if self.locate is not None:
                calls = {**self.locate(path), **calls}
            sites = self.sites(path) if self.sites is not None else {}
            calls = {address: op for address, op in calls.items() if op not in sites.values()}
            if self.multi is not False and self._attach_multi(path, calls, sites):
                self.files[key] = len(calls) + len(sites)
            else:
                self._attach_each(path, calls, sites)
                self.files[key] = len(calls) + len(sites)
            self.site_files += bool(sites)
        except Exception as exc:  # bcc raises bare Exceptions; the layer goes on without this file
            self.failures[shown] = str(exc)
            del self.files[key], self.names[key]  # another path to it may do (a container's copy whose process left)
            return 0
        self.failures.pop(shown, None)
        return self.files[key]

    def _attach_each(self, path: str, calls: dict[int, str], sites: dict[int, str]) -> None:
        """One perf-event uprobe per probe; the return first, so that no entry outlives its match."""
        known = set(self.bpf.uprobe_fds)
        try:
            for address, op in sorted(calls.items()):
                self.bpf.attach_uretprobe(name=path, addr=address, fn_name=RETURN_PROGRAM)
                self.bpf.attach_uprobe(name=path, addr=address, fn_name=entry_program(op))
            for address in sorted(sites):
                self.bpf.attach_uprobe(name=path, addr=address + CALL_LENGTH, fn_name=RETURN_PROGRAM)
                self.bpf.attach_uprobe(name=path, addr=address, fn_name=SITE_ENTRY_PROGRAM)
        finally:  # a file that failed part way keeps the ones it attached, for close()
            self.events += [name for name in self.bpf.uprobe_fds if name not in known]

    def load_programs(self) -> None:
        """Load (verify) the link programs now, not when a process maps a library: there the
        tenth of a second it takes is calls missed."""
        if self.multi is not False:
            try:
                self._multi_programs()
            except Exception:  # an older kernel: the per-probe programs will do
                self.multi = False

    def _multi_programs(self) -> tuple[int, int]:
        """(entry, return) program fds for uprobe_multi links (bcc loads each once)."""
        from bcc import BPF

        return tuple(self.bpf.load_func(name.encode(), BPF.KPROBE, attach_type=BPF_TRACE_UPROBE_MULTI).fd
                     for name in (MULTI_ENTRY_PROGRAM, MULTI_RETURN_PROGRAM))

    def _attach_multi(self, path: str, calls: dict[int, str], sites: dict[int, str]) -> bool:
        """Two uprobe_multi links (returns, then entries with the op as cookie, call sites and
        the instructions after them among them); False, and never again, where the kernel
        cannot make them."""
        from bcc import BPF

        def offset(address: int) -> int:  # symbol address to file offset, as bcc does before attaching
            return BPF._check_path_symbol(path, b"", address, -1)[1]

        offsets = [offset(address) for address in sorted(calls)]
        entries = [(at, ev.OP_CODES[calls[address]]) for at, address in zip(offsets, sorted(calls))]
        for address, op in sorted(sites.items()):
            entries += [(offset(address), ev.OP_CODES[op] | COOKIE_FIND_AND_LOAD),
                        (offset(address + CALL_LENGTH), ev.OP_CODES[op] | COOKIE_RETURN)]
        try:
            entry, exit_ = self._multi_programs()
            returns = [link_uprobes(exit_, path, offsets, returns=True)] if offsets else []
            self.links += returns  # closed after the entries
            try:
                self.links.append(link_uprobes(entry, path, [at for at, _ in entries], [c for _, c in entries]))
            except BaseException:
                for _ in returns:
                    os.close(self.links.pop())  # no return probes left behind without their entries
                raise
        except OSError as exc:
            gone = exc.errno in (errno.ENOENT, errno.ESRCH)  # the path left with its process
            if self.multi is None and not gone:  # an older kernel: no uprobe_multi links
                self.multi = False
                return False
            raise
        except Exception:  # bcc could not load the programs for links: an older kernel
            if self.multi is None:
                self.multi = False
                return False
            raise
        self.multi = True
        return True

    def close(self) -> None:
        """Release the links (their probes leave every process at once), then detach the
        perf-event uprobes (safe to call twice)."""
        while self.links:
            os.close(self.links.pop())
        events, self.events = self.events, []
        for name in events:
            with contextlib.suppress(Exception):  # bcc raises bare Exceptions
                self.bpf.detach_uprobe_event(name)

    def wants(self, mapped: MappedFile) -> bool:
        """Whether `mapped` is a copy of this layer's library that is not probed yet."""
        return bool(self.pattern.match(os.path.basename(mapped.inside))) and mapped.ident not in self.files

    def consider(self, pid: int, path: str, ident: tuple[int, int], mapped_ns: int = 0) -> int:
        """The kernel saw process `pid` map `path` (inode `ident`) executable at `mapped_ns`
        (CLOCK_MONOTONIC): probe it if it is one of this layer's libraries, as that process
        maps it (its container's copy). A copy first mapped during the recording is probed a
        moment after its first process mapped it: how long is kept, for the summary."""
        if not self.pattern.match(os.path.basename(path)):
            return 0
        if ident in self.files:
            return self.files[ident]
        mapped = reported_file(pid, path, ident, self.pattern)
        if mapped is None:
            self.failures[path] = "its process left before it could be read"
            return 0
        done = self.attach_mapped(mapped)
        if done and mapped_ns:
            self.late[mapped.shown] = max(time.monotonic_ns() - mapped_ns, 0) / 1e9
        return done

    def describe_files(self) -> str:
        """The files probed, by their path inside their root (and that root, if not ours),
        with how late those first mapped during the recording were probed."""
        return ", ".join(f"{name} ({self.late[name] * 1000:.0f} ms after its first mapping)" if name in self.late else name
                         for name in sorted(self.names.values()))

    @property
    def functions(self) -> int:
        """Functions probed, over all files."""
        return sum(self.files.values())
