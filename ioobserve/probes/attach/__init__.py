"""Each layer's way in, one module per layer as ebpf_probes/ has a file per layer.

A layer module chooses its way in from what this kernel has (tracefs, BTF, a trial load;
never its version number), says why where it has none, lists the programs it loads (for the
loader's early verification) and attaches and detaches them. Every layer, kernel (lineage,
syscall, aio, io_uring, block, cache, vfs) or uprobe (python, libraries), has the same
interface, so the loader attaches them in one loop and detaches them in one:

- `name`: the layer's name (one of probes.layers, or "lineage");
- `unavailable`: why this kernel cannot give the layer (None if it can);
- `programs()`: the (program, ProgramKind) pairs attach() loads;
- `attach(probes)`: attach, returning how the layer is probed (ProbeError if it cannot and
  the recording must not go on; `unavailable` set and "" if it goes on without the layer);
- `detach()`: undo it, safe to call twice.

`probes` is the loader's Probes: its bpf object, tail_calls and load_program(). The uprobe
layers also probe files as processes map them (the loader's scan_running(), library_mapped()
and program_started()); uprobes.py and uprobe_multi.py attach their probes, and inventory.py
lists the files they would probe now (the doctor).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

from ioobserve.probes.kernel.program_kind import RAW, ProgramKind


class Attachments:
    """What one layer attached, undone in reverse order by detach()."""

    def __init__(self, bpf) -> None:
        self.bpf = bpf
        self._undo: list[Callable[[], None]] = []

    def raw_tracepoint(self, tracepoint: str, program: str) -> None:
        """Attach a program (loaded by bcc) to a raw tracepoint."""
        self.bpf.attach_raw_tracepoint(tp=tracepoint.encode(), fn_name=program.encode())
        self._undo.append(lambda: self.bpf.detach_raw_tracepoint(tp=tracepoint.encode()))

    def raw_tracepoints(self, pairs: list[tuple[str, str]]) -> str | None:
        """Attach every (tracepoint, program) or none: why one did not attach (None if all did)."""
        for tracepoint, program in pairs:
            try:
                self.raw_tracepoint(tracepoint, program)
            except Exception as exc:  # bcc raises bare Exceptions
                self.detach()
                return f"{tracepoint} did not attach: {exc}"
        return None

    def tracepoint(self, tracepoint: str, program: str) -> None:
        """Attach a program to a classic tracepoint ("group:name")."""
        self.bpf.attach_tracepoint(tp=tracepoint.encode(), fn_name=program.encode())
        self._undo.append(lambda: self.bpf.detach_tracepoint(tp=tracepoint.encode()))

    def kprobe(self, function: str, program: str, returns: bool = False) -> None:
        """Attach a program to a kernel function's entry (or return)."""
        if returns:
            self.bpf.attach_kretprobe(event=function.encode(), fn_name=program.encode())
            self._undo.append(lambda: self.bpf.detach_kretprobe(event=function.encode()))
        else:
            self.bpf.attach_kprobe(event=function.encode(), fn_name=program.encode())
            self._undo.append(lambda: self.bpf.detach_kprobe(event=function.encode()))

    def link(self, fd: int) -> None:
        """Keep a BPF link's fd (tp_btf, fentry): closing it detaches."""
        self._undo.append(lambda: os.close(fd))

    def detach(self) -> None:
        """Undo every attachment, the last first (safe to call twice)."""
        while self._undo:
            with contextlib.suppress(Exception):  # bcc raises bare Exceptions
                self._undo.pop()()

    def __bool__(self) -> bool:
        return bool(self._undo)


class RawTracepointLayer:
    """A layer of raw tracepoints, attached all or none: a subclass chooses `tracepoints`
    ([(tracepoint, program)]) or says why it cannot (`unavailable`)."""

    name = ""
    tracepoints: list[tuple[str, str]] = []
    unavailable: str | None = None
    _attached: Attachments | None = None

    def programs(self) -> list[tuple[str, ProgramKind]]:
        """What attach() loads."""
        return [(program, RAW) for _, program in self.tracepoints]

    def describe(self) -> str:
        """How the layer is probed here."""
        return "raw tracepoints " + ", ".join(name for name, _ in self.tracepoints)

    def attach(self, probes) -> str:
        """Attach every tracepoint, or none: if one does not attach, the layer is unavailable
        (its reason in `unavailable`) and the recording goes on without it."""
        self._attached = Attachments(probes.bpf)
        self.unavailable = self._attached.raw_tracepoints(self.tracepoints)
        return "" if self.unavailable else self.describe()

    def detach(self) -> None:
        """Detach (safe to call twice)."""
        if self._attached is not None:
            self._attached.detach()
