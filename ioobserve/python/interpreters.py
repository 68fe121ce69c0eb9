"""Find the CPython interpreter a process runs: which file holds `_PyRuntime` (the python
binary itself, or libpython), which version it is, and where the runtime lies in the
process's memory."""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass

import numpy as np

from ioobserve.python.elf import ElfError, ElfFile
from ioobserve.python.layouts import LayoutError, debug_offsets_size, layout_row

# python3.11, python3.11d, libpython3.11.so.1.0, libpython3.13t.so ...
INTERPRETER_FILE = re.compile(r"^(?:lib)?python(\d)\.(\d+)[a-z]*(?:\.so(?:\.[\d.]+)?)?$")
RUNTIME_SYMBOL = "_PyRuntime"
VERSION_SYMBOL = "Py_Version"  # PY_VERSION_HEX, exported since 3.11


@dataclass(frozen=True)
class Interpreter:
    """A file holding a CPython runtime, and how to read it."""

    path: str
    version: tuple[int, int]
    runtime_vaddr: int  # _PyRuntime's link-time address
    executable: bool  # ET_EXEC: no load base to add
    first_vaddr: int
    layout: np.ndarray  # one PY_LAYOUT row
    text_vaddr: int  # the first executable segment's link-time address
    text_offset: int  # ... and its file offset
    inode: tuple[int, int]  # (kernel dev_t, inode number): how the kernel names the file


@dataclass(frozen=True)
class RunningInterpreter:
    """A process's interpreter and the address of its runtime."""

    pid: int
    interpreter: Interpreter
    runtime: int


class InterpreterFinder:
    """Looks at processes' mappings for an interpreter; files are read once (by inode)."""

    def __init__(self):
        self._files: dict[tuple[int, int, int], Interpreter | None] = {}
        self.unsupported: dict[str, str] = {}  # path -> why its interpreter cannot be read
        self._lock = threading.Lock()

    def in_process(self, pid: int) -> RunningInterpreter | None:
        """The interpreter `pid` runs, if it maps one (and it is read)."""
        starts = _file_mappings(pid)
        for path, start in starts.items():
            interpreter = self.in_file(pid, path)
            if interpreter is not None:
                base = 0 if interpreter.executable else start - interpreter.first_vaddr
                return RunningInterpreter(pid, interpreter, base + interpreter.runtime_vaddr)
        return None

    def in_file(self, pid: int, path: str) -> Interpreter | None:
        """The interpreter in `path` as process `pid` sees it (None if it holds none)."""
        match = INTERPRETER_FILE.match(os.path.basename(path))
        if not match:
            return None
        real = f"/proc/{pid}/root{path}"  # the process's own mount namespace
        try:
            info = os.stat(real)
        except OSError:
            return None
        key = (info.st_dev, info.st_ino, info.st_mtime_ns)
        with self._lock:
            if key not in self._files:
                inode = ((os.major(info.st_dev) << 20) | os.minor(info.st_dev), info.st_ino)
                self._files[key] = self._read(real, path, (int(match[1]), int(match[2])), inode)
            return self._files[key]

    def _read(self, real: str, path: str, named: tuple[int, int], inode: tuple[int, int]) -> Interpreter | None:
        try:
            elf = ElfFile(real)
        except (OSError, ElfError):
            return None
        runtime = elf.symbol(RUNTIME_SYMBOL)
        if runtime is None:  # a python binary linked to libpython: the library has it
            return None
        version = named
        at = elf.symbol(VERSION_SYMBOL)
        raw = elf.read(at, 4) if at is not None else None
        if raw:
            hexversion = int.from_bytes(raw, "little")
            version = (hexversion >> 24, (hexversion >> 16) & 0xFF)
        size = debug_offsets_size(version)
        try:
            layout = layout_row(version, elf.read(runtime, size) if size else None)
        except LayoutError as exc:
            self.unsupported[path] = str(exc)
            return None
        text = elf.text()
        if text is None:
            return None
        return Interpreter(path, version, runtime, elf.is_executable, elf.first_vaddr(), layout, text.vaddr, text.offset,
                           inode)


def _file_mappings(pid: int) -> dict[str, int]:
    """Each file `pid` maps, with the start of its mapping at file offset 0 (interpreter-like
    names only)."""
    starts: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/maps") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)
                if len(fields) < 6 or int(fields[2], 16) != 0:
                    continue
                path = fields[5].rstrip("\n")
                if path.startswith("/") and INTERPRETER_FILE.match(os.path.basename(path)):
                    starts.setdefault(path, int(fields[0].split("-")[0], 16))
    except OSError:
        pass
    return starts
