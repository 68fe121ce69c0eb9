"""The library layers (calls.bpf.c): libc, HDF5, MPI-IO and libssl calls by uprobes on each copy of
their library that selected processes map: one uprobe_multi link per file and direction
where the kernel has them (6.6+), one uprobe per function where it does not."""

from __future__ import annotations

from ioobserve.context.mappings import MappedFile
from ioobserve.probes import layers as ly
from ioobserve.probes.attach.uprobes import HDF5_FILE, LIBC_FILE, MPI_FILE, TLS_FILE, LibraryProbes, running_copies
from ioobserve.probes.build.compile import ProbeError
from ioobserve.probes.kernel.features import uprobes_available
from ioobserve.probes.maps.call_table import HDF5, LIBC, MPIIO, TLS

# Each layer's calls and the files (by name) that implement them.
LIBRARY_CALLS = {ly.LIBC: (LIBC, LIBC_FILE), ly.HDF5: (HDF5, HDF5_FILE), ly.MPIIO: (MPIIO, MPI_FILE), ly.TLS: (TLS, TLS_FILE)}
# The names the system's linker knows them by (probed from the start, before any process maps them).
SYSTEM_LIBRARIES = {ly.LIBC: ("c",), ly.HDF5: ("hdf5", "hdf5_serial"), ly.MPIIO: ("mpi", "mpich"), ly.TLS: ("ssl",)}


class LibraryLayer:
    """One library layer's uprobes: the system's copy of its library from the start, the
    copies running processes map, and those mapped later as the kernel reports them."""

    def __init__(self, bpf, layer: str):
        self.name = layer
        self.probes = LibraryProbes(bpf, *LIBRARY_CALLS[layer])
        self.unavailable = None if uprobes_available() else "no uprobes (CONFIG_UPROBE_EVENTS not set)"

    def programs(self) -> list:
        """Loaded by attach() through LibraryProbes (their kind depends on uprobe_multi)."""
        return []

    def attach(self, probes) -> str:
        """Probe the system's copy (libc: else a running process's); ProbeError if this kernel
        has no uprobes (the layer is asked for by name) or if libc has none."""
        from bcc import BPF  # deferred: only probes import bcc

        if self.unavailable:
            raise ProbeError(f"the {self.name} layer is unavailable here: {self.unavailable}")
        library = self.probes
        library.load_programs()
        for name in SYSTEM_LIBRARIES[self.name]:
            found = BPF.find_library(name.encode())
            if found:
                library.attach_file(found.decode())
        if self.name == ly.LIBC and not library.functions:  # no system libc: a running process's copy, then
            for mapped in running_copies(library.pattern):
                library.attach_mapped(mapped)
        if self.name == ly.LIBC and not library.functions:  # every process has a libc: something is wrong
            why = "; ".join(f"{path}: {reason}" for path, reason in library.failures.items()) or "no libc found"
            raise ProbeError(f"the libc layer could not probe any libc ({why})")
        return self.describe()

    def running_copies(self) -> list[MappedFile]:
        """The copies of the library running processes map (containers' own libc, say)."""
        return running_copies(self.probes.pattern)

    def consider(self, pid: int, path: str, ident: tuple[int, int], mapped_ns: int = 0) -> bool:
        """A selected process mapped `path` (inode `ident`) executable at `mapped_ns`: probe it
        if it is this layer's library."""
        return bool(self.probes.consider(pid, path, ident, mapped_ns))

    def describe(self) -> str:
        """How the layer is probed so far (HDF5 and MPI-IO grow as processes map them)."""
        library = self.probes
        how = "uprobes" if library.multi is False else "uprobe_multi links"
        what = f"{how} on {library.functions} functions in {len(library.files)} {self.name} file(s)"
        if library.names:
            what += f" ({library.describe_files()})"
        if self.name != ly.LIBC:
            what += ", probed as processes map them"
        if library.failures:
            what += f" ({len(library.failures)} could not be probed: {next(iter(library.failures.values()))})"
        return what

    def detach(self) -> None:
        """Detach every uprobe, links and perf events (safe to call twice)."""
        self.probes.close()
