"""The program arrays through which the syscall layer's programs tail-call (the fentry stubs
their bodies, the bodies the Python walk and the AIO programs), one set per prototype group.

A kernel that lets a program array hold tracing programs of one prototype only (6.13, and
the stable kernels it was backported to: Debian's 6.1 and 6.12) refuses a fentry body
loaded for one syscall function's prototype in an array another prototype's stubs call.
Group 0 uses the compiled arrays; each further group gets copies of them, and every program
that calls through them is loaded again with the copies in place.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import struct
from collections.abc import Callable

from ioobserve.probes.kernel.bpf_syscall import map_delete, map_update
from ioobserve.probes.kernel.program_kind import ProgramKind

ARRAYS = ("syscall_enter_body", "syscall_exit_body", "py_programs", "aio_programs")


class TailCalls:
    """Fills and empties one program array slot in every group's copy at once."""

    def __init__(self, bpf, entry, load: Callable[[str, ProgramKind, int], int]):
        """`entry`: the syscall layer's way in (attach.syscall.SyscallEntry)."""
        self.bpf = bpf
        self.entry = entry
        self._load = load  # (program, kind, group) -> fd
        self.groups: list[dict[str, int]] = [{}]  # per group: array name -> fd of its copy ({}: the compiled ones)
        try:
            for _ in entry.anchors[1:]:
                self.groups.append({name: bpf.clone_map(name) for name in ARRAYS})
        except BaseException:
            self.close()
            raise

    def maps(self, group: int) -> dict[str, int]:
        """The arrays of a group, by name, to load its programs with (empty for group 0)."""
        return self.groups[group]

    def set(self, array: str, index: int, program: str, kind: ProgramKind) -> None:
        """Put `program` (loaded as `kind`, group 0's) at `index` of `array` in every group."""
        for group, copies in enumerate(self.groups):
            fd = self._load(program, self.entry.in_group(kind, group), group)
            if group == 0:
                self.bpf[array][ctypes.c_int(index)] = ctypes.c_int(fd)
            else:
                map_update(copies[array], struct.pack("<I", index), struct.pack("<I", fd))

    def clear(self, array: str, index: int) -> None:
        """Empty `index` of `array` in every group (nothing tail-called there from now on)."""
        for group, copies in enumerate(self.groups):
            with contextlib.suppress(KeyError, OSError):
                if group == 0:
                    del self.bpf[array][ctypes.c_int(index)]
                else:
                    map_delete(copies[array], struct.pack("<I", index))

    def close(self) -> None:
        """Close the copies."""
        for copies in self.groups[1:]:
            for fd in copies.values():
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.groups = [{}]
