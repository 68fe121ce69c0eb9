"""Find the CPython interpreter a process runs: which file holds `_PyRuntime` (the python
binary itself, or libpython), which version it is, and where the runtime lies in the
process's memory."""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass

import numpy as np

from ioobserve.context.mappings import MappedFile, mapped_files
from ioobserve.data import events as ev
from ioobserve.python.elf import ElfError, ElfFile
from ioobserve.python.layouts import LayoutError, debug_offsets_size, full_version, layout_row, version_text

# python3.11, python3.11d, libpython3.11.so.1.0, libpython3.13t.so ...
INTERPRETER_FILE = re.compile(r"^(?:lib)?python(\d)\.(\d+)[a-z]*(?:\.so(?:\.[\d.]+)?)?$")
RUNTIME_SYMBOL = "_PyRuntime"
VERSION_SYMBOL = "Py_Version"  # PY_VERSION_HEX, exported since 3.11


@dataclass(frozen=True)
class Interpreter:
    """A file holding a CPython runtime, and how to read it."""

    path: str  # inside the root of the process it was first found in
    version: tuple[int, int]
    runtime_vaddr: int  # _PyRuntime's link-time address
    executable: bool  # ET_EXEC: no load base to add
    first_vaddr: int
    layout: np.ndarray  # one PY_LAYOUT row
    text_vaddr: int  # the first executable segment's link-time address
    text_offset: int  # ... and its file offset
    inode: tuple[int, int]  # (kernel dev_t, inode number) of the file itself
    inodes: frozenset[tuple[int, int]]  # inode, and the one processes open (overlayfs: the overlay's)
    release: str  # '3.13.18' ('3.10' where the file does not say)
    free_threaded: bool = False
    root: str = "/"  # the root it was first found in (mappings.root_shown)

    def describe(self) -> str:
        """'/usr/bin/python3.13 (CPython 3.13.18)', with 't' for a free-threaded build and
        its root where that is not the recorder's."""
        where = "" if self.root == "/" else f" in {self.root}"
        return f"{self.path} (CPython {self.release}{'t' if self.free_threaded else ''}){where}"


@dataclass(frozen=True)
class RunningInterpreter:
    """A process's interpreter, the address of its runtime and the file as it maps it."""

    pid: int
    interpreter: Interpreter
    runtime: int
    mapped: MappedFile


class InterpreterFinder:
    """Looks at processes' mappings for an interpreter; each file (inode) is read once,
    through the process's own root: the interpreter a container brings, not the host's."""

    def __init__(self):
        self._files: dict[tuple[int, int, int], Interpreter | None] = {}
        self.unsupported: dict[tuple[int, int], tuple[str, str]] = {}  # inode -> (path, why it cannot be read)
        self._lock = threading.Lock()

    def in_process(self, pid: int) -> RunningInterpreter | None:
        """The interpreter `pid` runs, if it maps one (and it is read)."""
        for mapped in mapped_files(pid, INTERPRETER_FILE):
            interpreter = self.in_file(mapped)
            if interpreter is not None:
                base = 0 if interpreter.executable else mapped.start - interpreter.first_vaddr
                return RunningInterpreter(pid, interpreter, base + interpreter.runtime_vaddr, mapped)
        return None

    def in_file(self, mapped: MappedFile) -> Interpreter | None:
        """The interpreter in a mapped file (None if it holds none, or one not supported)."""
        match = INTERPRETER_FILE.match(os.path.basename(mapped.path))
        if not match:
            return None
        try:
            info = os.stat(mapped.opened)
        except OSError:
            return None
        key = (*mapped.ident, info.st_mtime_ns)
        with self._lock:
            if key not in self._files:
                self._files[key] = self._read(mapped, (int(match[1]), int(match[2])))
            return self._files[key]

    def _read(self, mapped: MappedFile, named: tuple[int, int]) -> Interpreter | None:
        try:
            elf = ElfFile(mapped.opened)
        except (OSError, ElfError):
            return None
        runtime = elf.symbol(RUNTIME_SYMBOL)
        if runtime is None:  # a python binary linked to libpython: the library has it
            return None
        version, release = named, version_text(named)
        at = elf.symbol(VERSION_SYMBOL)
        raw = elf.read(at, 4) if at is not None else None
        if raw:
            hexversion = int.from_bytes(raw, "little")
            version, release = (hexversion >> 24, (hexversion >> 16) & 0xFF), full_version(hexversion)
        size = debug_offsets_size(version)
        try:
            layout = layout_row(version, elf.read(runtime, size) if size else None)
        except LayoutError as exc:
            where = "" if mapped.root == "/" else f" in {mapped.root}"
            self.unsupported[mapped.ident] = (f"{mapped.inside} (CPython {release}){where}", str(exc))
            return None
        text = elf.text()
        if text is None:
            return None
        return Interpreter(mapped.inside, version, runtime, elf.is_executable, elf.first_vaddr(), layout, text.vaddr,
                           text.offset, mapped.ident, mapped.idents, release, bool(layout["flags"][0] & ev.PY_FREE_THREADED),
                           mapped.root)
