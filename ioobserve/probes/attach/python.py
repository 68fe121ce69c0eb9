"""The Python layer (python_stacks.bpf.c, with uprobes on each interpreter file by calls.bpf.c):
tells the kernel which processes run CPython and how to read each one (ioobserve.python), and
attaches the walk the syscall layer's enter program tail-calls.

Processes are found when the recording starts (every running one), at exec (a python
binary holding the runtime) and when they map libpython (the kernel's report of each new
executable mapping); each interpreter file is read through the process's own mapping of it
(a container's own python), once per inode. Once an interpreter file has been read, the kernel places its runtime
itself in every later process that execs or maps it (py_images), and a forked child
inherits its parent's entry: both are covered from their first call. The kernel knows the
file by each inode a process reaches it by: on overlayfs (a container's root) exec and mmap
see the overlay's inode, one per root, which maps names only from Linux 6.8 on.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ioobserve.context.mappings import MappedFile, mapped_files
from ioobserve.data import events as ev
from ioobserve.probes import layers as ly
from ioobserve.probes.attach.uprobes import LibraryProbes
from ioobserve.probes.build.compile import ProbeError
from ioobserve.probes.kernel.program_kind import ProgramKind
from ioobserve.probes.maps.call_table import PYTHON as PYTHON_CALLS
from ioobserve.python.import_sites import import_sites
from ioobserve.python.interpreters import INTERPRETER_FILE, Interpreter, InterpreterFinder
from ioobserve.python.methods import interpreter_methods

WALK_PROGRAM = "py_walk"
# Tail-called, by index in py_programs: the walk by the syscall layer's enter program (a traced call of a selected
# process), its next steps and the code records by the walk itself.
CHAINED = (("py_frames", 0), ("py_codes", 1), (WALK_PROGRAM, 2))


@dataclass(frozen=True)
class PythonOptions:
    """How much of the Python stack to walk (--py-depth), and on which calls (--py-stacks N)."""

    depth: int = 16  # frames, at most ev.PY_MAX_FRAMES
    sample: int = 1  # walk one traced call in `sample` per thread
    # Calls made inside an import are walked too (--py-stacks all): by default their import's
    # event names the module and the walk would add only importlib's frames.
    walk_imports: bool = False


def _children(pid: int) -> list[int]:
    """The processes `pid`'s threads have forked that are still running."""
    found = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{task}/children") as listing:
                found += [int(child) for child in listing.read().split()]
    return found


class PythonLayer:
    """The stack walk of one recording, the processes it knows run CPython and the uprobes on
    their interpreter files."""

    name = ly.PYTHON
    unavailable = None  # as the syscall layer's, whose enter program tail-calls the walk

    def __init__(self, bpf, options: PythonOptions, tail_calls, kind: ProgramKind):
        self.bpf = bpf
        self.tail_calls = tail_calls  # tail_calls.TailCalls: py_programs in every prototype group
        self.kind = kind  # the syscall layer's enter program's kind: a tail call stays within one
        self.depth = min(options.depth, ev.PY_MAX_FRAMES)
        self.sample = max(options.sample, 1)
        self.flags = ev.PY_PROC_WALK_IMPORTS if options.walk_imports else 0
        self.finder = InterpreterFinder()
        self._layouts: dict[tuple[int, int], int] = {}  # interpreter file (inode) -> py_layouts index
        self.interpreters: dict[tuple[int, int], Interpreter] = {}  # the files given to the kernel, by inode
        self._image_files: set[tuple[int, int]] = set()  # the inodes in py_image_files
        self.refused: dict[int, str] = {}  # pid -> why its interpreter's frames are not walked
        self.late: dict[tuple[int, int], float] = {}  # inode -> seconds from its first process's start to its reading
        self._walking = False  # the walk is in py_programs, where the enter program calls it
        self.processes = 0  # processes given to the kernel so far
        # Uprobes on each interpreter file: imports, and open() (found without a symbol too).
        self.calls = LibraryProbes(bpf, PYTHON_CALLS, INTERPRETER_FILE, locate=interpreter_methods, sites=import_sites)

    def programs(self) -> list[tuple[str, ProgramKind]]:
        """What attach() loads: the walk and the programs chained to it, as the enter
        program's kind (a tail call stays within one)."""
        return [(WALK_PROGRAM, self.kind), *((name, self.kind) for name, _ in CHAINED)]

    def attach(self, probes) -> str:
        """Attach the walk and read every running process's interpreter; ProbeError if the
        walk does not load."""
        try:
            self._walk_and_find()
        except Exception as exc:  # bcc raises bare Exceptions
            raise ProbeError(f"the Python layer could not attach: {exc}") from exc
        return self.describe()

    def _walk_and_find(self) -> None:
        """Load the walk into py_programs: the syscall layer's enter program tail-calls it once
        a traced syscall's inflight record is written (no program of its own on sys_enter:
        untraced syscalls and processes pay nothing for it)."""
        self.calls.load_programs()
        for name, index in CHAINED:
            self.tail_calls.set("py_programs", index, name, self.kind)
        self._walking = True
        # Every running process, before any command starts: once an interpreter file is
        # read, the kernel places each new process of it from its exec (~0.1 s here).
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                self.consider(int(entry.name))

    def consider(self, pid: int, path: str | None = None, started_ns: int = 0) -> bool:
        """Give the kernel `pid`'s interpreter if it runs one (`path`: a file it just mapped,
        looked at only if its name is an interpreter's; `started_ns`: when it exec'd or
        mapped it, CLOCK_MONOTONIC, to say how late a file new to the recording was read)."""
        if path is not None and not INTERPRETER_FILE.match(os.path.basename(path)):
            return False
        running = self.finder.in_process(pid)
        if running is None:
            self._note_refusal(pid)
            return False
        interpreter = running.interpreter
        new = interpreter.inode not in self._layouts
        index = self._layout_index(interpreter)
        if new and index is not None and started_ns:
            self.late[interpreter.inode] = max(time.monotonic_ns() - started_ns, 0) / 1e9
        if index is None:
            self.refused.setdefault(pid, f"more than {ev.PY_LAYOUTS} interpreter files")
            return False
        self._add_image_files(running.mapped.idents, index)  # a new container's overlay of a known file
        row = np.zeros(1, dtype=ev.PY_PROC)
        row["runtime"] = running.runtime
        row["layout"] = index
        row["depth"] = self.depth
        row["sample"] = self.sample
        row["flags"] = self.flags
        table = self.bpf["py_procs"]
        table[ctypes.c_uint32(pid)] = table.Leaf.from_buffer_copy(row.tobytes())
        self.processes += 1
        self.calls.attach_mapped(running.mapped)  # after the walk is on: the first time, it takes a while
        # Children forked before this entry existed did not inherit it in the kernel.
        for child in _children(pid):
            if ctypes.c_uint32(child) not in table:
                self.consider(child)
        return True

    def wants(self, mapped: MappedFile) -> bool:
        """Whether `mapped` may be an interpreter file not given to the kernel yet."""
        return bool(INTERPRETER_FILE.match(os.path.basename(mapped.inside))) and not (mapped.idents & self._image_files)

    def prepare(self, mapped: MappedFile) -> bool:
        """Give the kernel an interpreter file before any process runs it (the exec gate): the
        kernel then places its runtime in each process that execs or maps it, from its first
        call. False if it holds no supported interpreter."""
        interpreter = self.finder.in_file(mapped)
        if interpreter is None:
            return False
        index = self._layout_index(interpreter)
        if index is None:
            return False
        self._add_image_files(mapped.idents, index)
        self.calls.attach_mapped(mapped)
        return True

    def _layout_index(self, interpreter: Interpreter) -> int | None:
        """The interpreter's py_layouts index; the first time, its layout and file go to the kernel."""
        index = self._layouts.get(interpreter.inode)
        if index is None:
            if len(self._layouts) >= ev.PY_LAYOUTS:
                return None
            index = self._layouts[interpreter.inode] = len(self._layouts)
            self.interpreters[interpreter.inode] = interpreter
            table = self.bpf["py_layouts"]
            table[ctypes.c_int(index)] = table.Leaf.from_buffer_copy(interpreter.layout.tobytes())
            self._add_image(interpreter, index)
        return index

    def _add_image(self, interpreter: Interpreter, layout: int) -> None:
        """Let the kernel place this interpreter's runtime itself in processes that exec it or
        map its text from now on (python_stacks.bpf.c cannot wait for user space to find them)."""
        page = os.sysconf("SC_PAGE_SIZE")
        row = np.zeros(1, dtype=ev.PY_IMAGE)
        row["proc"]["layout"] = layout
        row["proc"]["depth"] = self.depth
        row["proc"]["sample"] = self.sample
        row["proc"]["flags"] = self.flags
        row["text_offset"] = interpreter.text_offset & ~(page - 1)
        row["runtime_from_text_map"] = interpreter.runtime_vaddr - (interpreter.text_vaddr & ~(page - 1))
        row["runtime_from_start_code"] = interpreter.runtime_vaddr - interpreter.text_vaddr
        images = self.bpf["py_images"]
        images[ctypes.c_int(layout)] = images.Leaf.from_buffer_copy(row.tobytes())
        self._add_image_files(interpreter.inodes, layout)

    def _add_image_files(self, inodes, layout: int) -> None:
        """Let the kernel know these inodes as the interpreter of layout `layout`: the file, and
        each overlay's inode that processes exec or map it by (one per container root)."""
        files = self.bpf["py_image_files"]
        for inode in set(inodes) - self._image_files:
            key = np.zeros(1, dtype=ev.FILE_KEY)
            key["dev"], key["ino"] = inode
            try:
                files[files.Key.from_buffer_copy(key.tobytes())] = ctypes.c_uint32(layout)
            except Exception:  # bcc raises bare Exceptions; full: user space places those processes
                return
            self._image_files.add(inode)

    def note_program(self, pid: int, ident: tuple[int, int]) -> None:
        """Process `pid` exec'd or mapped the file `ident`: if that is an interpreter file
        already refused, say so for this process (cheap: once the recording stops too, and
        after the process has gone)."""
        refused = self.finder.unsupported.get(ident)
        if refused is not None:
            self.refused.setdefault(pid, f"{refused[0]}: {refused[1]}")

    def _note_refusal(self, pid: int) -> None:
        """Remember why a process mapping an interpreter file gets no frames, if one was refused."""
        if self.finder.unsupported:
            for mapped in mapped_files(pid, INTERPRETER_FILE):
                self.note_program(pid, mapped.ident)

    def describe(self) -> str:
        """How the layer is probed so far, for the recording's summary: each interpreter file,
        by its path inside its root, and whether its frames are walked."""
        what = f"stack walk on traced syscalls, {self.depth} frames"
        if self.sample > 1:
            what += f", one call in {self.sample}"
        if not self.flags & ev.PY_PROC_WALK_IMPORTS:
            what += " (calls inside an import: named by the import, not walked)"
        walked = sorted(interpreter.describe() + (f" read {self.late[inode] * 1000:.0f} ms after its first process started"
                                                  if inode in self.late else "")
                        for inode, interpreter in self.interpreters.items())
        what += f"; frames walked in {', '.join(walked) if walked else 'no interpreter yet'}"
        if self.finder.unsupported:
            refused = sorted(f"{path}: {why}" for path, why in self.finder.unsupported.values())
            what += f"; frames not walked in {'; '.join(refused)}"
        if self.calls.files:
            how = "uprobes" if self.calls.multi is False else "uprobe_multi links"
            what += f"; imports and open() probed ({how}) in {len(self.calls.files)} interpreter file(s)"
            if self.calls.site_files < len(self.calls.files):  # no _find_and_load call found: every import traps
                what += f" ({len(self.calls.files) - self.calls.site_files} at every import statement)"
        if self.calls.failures:
            path, why = next(iter(self.calls.failures.items()))
            what += f"; imports and open() not probed in {path}: {why}"
        return what

    def detach(self) -> None:
        """Detach the walk and the interpreter uprobes (safe to call twice)."""
        self.calls.close()
        if self._walking:
            self.tail_calls.clear("py_programs", CHAINED[-1][1])
            self._walking = False
