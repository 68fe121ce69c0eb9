"""What the uprobe layers would probe on this node now: each interpreter file and library file
running processes map, by its path inside its root, once per file (`ioobserve doctor`)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ioobserve.context.mappings import mapped_files
from ioobserve.probes import layers as ly
from ioobserve.probes.attach.uprobes import HDF5_FILE, LIBC_FILE, MPI_FILE, TLS_FILE
from ioobserve.python.interpreters import INTERPRETER_FILE, InterpreterFinder

LIBRARY_FILES = {ly.LIBC: LIBC_FILE, ly.HDF5: HDF5_FILE, ly.MPIIO: MPI_FILE, ly.TLS: TLS_FILE}


@dataclass(frozen=True)
class RunningFile:
    """One file a layer would probe: its layer, its name (path inside its root, and that
    root), how many processes map it, and what the layer makes of it."""

    layer: str
    shown: str
    processes: int
    status: str


def running_files(pids: list[int] | None = None) -> list[RunningFile]:
    """The interpreter and library files the processes `pids` (all running ones) map."""
    finder = InterpreterFinder()
    seen: dict[tuple[str, tuple[int, int]], list] = {}  # (layer, inode) -> [shown, processes, status]
    for pid in pids if pids is not None else [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]:
        for mapped in mapped_files(pid, INTERPRETER_FILE):
            interpreter = finder.in_file(mapped)
            refused = finder.unsupported.get(mapped.ident)
            if interpreter is not None:
                status = f"CPython {interpreter.release}{'t' if interpreter.free_threaded else ''}: frames walked"
            elif refused is not None:
                status = f"frames not walked: {refused[1]}"
            else:
                continue  # a python binary whose runtime is in its libpython
            _count(seen, ly.PYTHON, mapped, status)
        for layer, pattern in LIBRARY_FILES.items():
            for mapped in mapped_files(pid, pattern):
                _count(seen, layer, mapped, "probed by file when its layer is on")
    return sorted((RunningFile(layer, *found) for (layer, _), found in seen.items()),
                  key=lambda found: (found.layer, found.shown))


def _count(seen: dict, layer: str, mapped, status: str) -> None:
    found = seen.setdefault((layer, mapped.ident), [mapped.shown, 0, status])
    found[1] += 1
