"""The page cache layer (cache.bpf.c): pages added to a file's cache (the misses) and the
readahead that asked for them, by classic tracepoints whose record fields are read at the
offsets of this kernel's format files (they move between kernels)."""

from __future__ import annotations

from pathlib import Path

from ioobserve.probes import layers as ly
from ioobserve.probes.attach import Attachments
from ioobserve.probes.kernel.program_kind import TRACEPOINT, ProgramKind
from ioobserve.probes.kernel.tracepoint_format import FILEMAP_ADD, READAHEAD, absent_flags

# (the fields read, [(tracepoint, program)]); readahead is a bonus: filemap alone gives the misses
ATTACHMENTS = (
    (FILEMAP_ADD, (("filemap:mm_filemap_add_to_page_cache", "on_filemap_add"),)),
    (READAHEAD, (("readahead:page_cache_sync_ra", "on_readahead_sync"),
                 ("readahead:page_cache_async_ra", "on_readahead_async"))),
)


class CacheLayer:
    """The page cache tracepoints this kernel has with the fields the probes read."""

    name = ly.CACHE

    def __init__(self, tracefs: Path | None):
        self.fields = {spec.macro: spec.offsets(tracefs) for spec, _ in ATTACHMENTS}
        self.unavailable = None if self.fields[FILEMAP_ADD.macro] is not None else (
            "no filemap:mm_filemap_add_to_page_cache tracepoint with the fields the probes read")
        self._attached: Attachments | None = None

    def cflags(self) -> list[str]:
        """-D flags of the fields' offsets (-1 where absent: the program compiles, unattached)."""
        flags: dict[str, int] = {}
        for spec, _ in ATTACHMENTS:
            flags.update(self.fields[spec.macro] or absent_flags(spec))
        return [f"-D{name}={value}" for name, value in sorted(flags.items())]

    def programs(self) -> list[tuple[str, ProgramKind]]:
        """What attach() loads."""
        return [(program, TRACEPOINT) for spec, pairs in ATTACHMENTS if self.fields[spec.macro] is not None
                for _, program in pairs]

    def describe(self) -> str:
        """The tracepoints this kernel has with the fields the probes read."""
        return "tracepoints " + ", ".join(tracepoint.split(":")[1] for spec, pairs in ATTACHMENTS
                                          if self.fields[spec.macro] is not None for tracepoint, _ in pairs)

    def attach(self, probes) -> str:
        """Attach the tracepoints; a readahead one the kernel refuses is left out."""
        attached = self._attached = Attachments(probes.bpf)
        names = []
        for spec, pairs in ATTACHMENTS:
            if self.fields[spec.macro] is None:
                continue
            for tracepoint, program in pairs:
                try:
                    attached.tracepoint(tracepoint, program)
                except Exception:  # bcc raises bare Exceptions; refused here: the layer goes on without it
                    continue
                names.append(tracepoint.split(":")[1])
        if not any("filemap" in name for name in names):
            self.detach()
            self.unavailable = "the filemap tracepoint did not attach"
            return ""
        return "tracepoints " + ", ".join(names)

    def detach(self) -> None:
        """Detach (safe to call twice)."""
        if self._attached is not None:
            self._attached.detach()
