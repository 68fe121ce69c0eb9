"""Where CPython loads a module it has not imported yet: the call sites of importlib's
`_find_and_load` in its import code (x86-64), probed instead of every `import` statement.

`import x` runs PyImport_ImportModuleLevelObject, which returns a module already in
sys.modules at once and calls the static import_find_and_load only for one it must load.
That function is inlined wherever we have looked (3.10-3.13, Debian's and pyenv's builds), so
it has no address of its own. Its body calls the `_find_and_load` method,
PyObject_CallMethodObjArgs(importlib, &_Py_ID(_find_and_load), abs_name, import_func, NULL)
(3.10: _PyObject_CallMethodIdObjArgs with a _Py_Identifier), and such a call is found by
scanning the text for calls of that function (directly or through its PLT entry) that a
reference to the name object shortly precedes. A probe on the call and one on the next
instruction give a load's start, its absolute name (the third argument) and its end with
the module or NULL; a cached import reaches neither. A build whose sites cannot be found
keeps the probe on PyImport_ImportModuleLevelObject (ioobserve.probes.maps.call_table).
"""

from __future__ import annotations

import struct

import numpy as np

from ioobserve.python.elf import ElfError, ElfFile
from ioobserve.python.layouts import LayoutError, debug_offsets_size, layout_row

METHOD = b"_find_and_load"
CALLERS = {"3.11+": "PyObject_CallMethodObjArgs", "3.10": "_PyObject_CallMethodIdObjArgs"}
CALL_REL32 = 0xE8
CALL_LENGTH = 5
# How far before a call its argument registers are loaded: the name object is referred to
# within the few instructions before it (measured: 8-30 bytes in the builds above).
LOOKBACK = 48
RUNTIME_BYTES = 1 << 20  # _PyRuntime's initial value holds the static strings (~100-300 KB in)


def import_sites(path: str) -> dict[int, str]:
    """{address of a `_find_and_load` call: "py_import"} in an interpreter file; empty if the
    file cannot be read or its calls cannot be found."""
    try:
        elf = ElfFile(path)
    except (OSError, ElfError):
        return {}
    name = _name_object(elf)
    callee = CALLERS["3.11+"] if elf.symbol("Py_Version") is not None else CALLERS["3.10"]
    target = elf.symbol(callee)
    text = elf.section(".text")
    if name is None or target is None or text is None:
        return {}
    runtime = elf.symbol("_PyRuntime")
    return {site: "py_import" for site in call_sites(text[0], text[1], {target} | elf.plt_stubs(callee), name, runtime)}


def _name_object(elf: ElfFile) -> int | None:
    """The address of the object naming the method: 3.11+, the static str inside _PyRuntime;
    3.10, the _Py_Identifier whose string it is."""
    version_at = elf.symbol("Py_Version")
    if version_at is None:
        return _identifier(elf)
    raw, runtime = elf.read(version_at, 4), elf.symbol("_PyRuntime")
    if raw is None or runtime is None:
        return None
    hexversion = int.from_bytes(raw, "little")
    version = (hexversion >> 24, hexversion >> 16 & 0xFF)
    size = debug_offsets_size(version)
    try:  # an ASCII str's characters follow its header: sizeof(PyASCIIObject)
        layout = layout_row(version, elf.read(runtime, size) if size else None)
    except LayoutError:
        return None
    header, length_at = int(layout["unicode_ascii_data"][0]), int(layout["unicode_length"][0])
    window = elf.read_to_segment_end(runtime, RUNTIME_BYTES)
    at = window.find(METHOD + b"\0")
    while at >= header:
        length = struct.unpack_from("<q", window, at - header + length_at)[0]
        if length == len(METHOD):  # the str object's own length: not a stray copy of the text
            return runtime + at - header
        at = window.find(METHOD + b"\0", at + 1)
    return None


def _identifier(elf: ElfFile) -> int | None:
    """3.10's `_Py_IDENTIFIER(_find_and_load)`: {const char *string; Py_ssize_t index = -1}."""
    text = elf.find(b"\0" + METHOD + b"\0")
    if text is None:
        return None
    for slot in elf.pointers_to(text + 1):
        index = elf.read(slot + 8, 8)
        if index == b"\xff" * 8:
            return slot
    return None


def call_sites(base: int, code: bytes, targets: set[int], name: int, runtime: int | None) -> list[int]:
    """Addresses of the `call rel32` instructions in `code` (loaded at `base`) that reach one
    of `targets` and are preceded within LOOKBACK bytes by a 4-byte reference to `name`: an
    absolute address, an offset from _PyRuntime (a register holding it), or RIP-relative."""
    raw = np.frombuffer(code, dtype=np.uint8)
    at = np.flatnonzero(raw[:len(raw) - CALL_LENGTH + 1] == CALL_REL32)
    rel = sum(raw[at + 1 + i].astype(np.uint32) << (8 * i) for i in range(4)).view(np.int32)
    reached = base + at.astype(np.int64) + CALL_LENGTH + rel
    calls = at[np.isin(reached, np.array(sorted(targets), dtype=np.int64))]
    return [base + int(call) for call in calls if _refers_to(code, base, int(call), name, runtime)]


def _refers_to(code: bytes, base: int, call_at: int, name: int, runtime: int | None) -> bool:
    for at in range(max(0, call_at - LOOKBACK), call_at - 3):
        value = struct.unpack_from("<i", code, at)[0]
        if value == name or base + at + 4 + value == name or (runtime is not None and value == name - runtime):
            return True
    return False
