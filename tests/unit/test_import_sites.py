"""Finding CPython's calls of importlib's _find_and_load in machine code: a call of the
method-call function counts only if the name object is referred to just before it."""

from __future__ import annotations

import struct

from ioobserve.python.import_sites import LOOKBACK, call_sites

BASE = 0x400000
TARGET = 0x401F00  # PyObject_CallMethodObjArgs (or its PLT entry)
OTHER = 0x402F00  # some other function
NAME = 0x9A0000  # &_Py_ID(_find_and_load)
RUNTIME = 0x998000  # _PyRuntime


def _call(at: int, target: int) -> bytes:
    """`call rel32` at address `at`."""
    return b"\xe8" + struct.pack("<i", target - (at + 5))


def _assemble(*parts) -> tuple[bytes, dict[str, int]]:
    """Code from byte strings and (label, callable(address) -> bytes) pieces; label addresses."""
    code, labels = b"", {}
    for part in parts:
        if isinstance(part, tuple):
            labels[part[0]] = BASE + len(code)
            part = part[1](BASE + len(code))
        code += part
    return code, labels


def test_only_calls_preceded_by_the_name_are_sites():
    code, at = _assemble(
        b"\x90" * 8,
        ("rip_lea", lambda a: b"\x48\x8d\x35" + struct.pack("<i", NAME - (a + 7))),  # lea NAME(%rip),%rsi
        ("site_rip", lambda a: _call(a, TARGET)),
        b"\x90" * LOOKBACK,
        ("plain", lambda a: _call(a, TARGET)),  # no reference to the name before it
        b"\xbe" + struct.pack("<I", NAME),  # mov $NAME,%esi (a non-PIE executable)
        ("elsewhere", lambda a: _call(a, OTHER)),  # the name, but another function
        b"\x90" * LOOKBACK,
        b"\x48\x8d\xb0" + struct.pack("<i", NAME - RUNTIME),  # lea (NAME-_PyRuntime)(%rax),%rsi
        ("site_runtime", lambda a: _call(a, TARGET)),
    )
    assert call_sites(BASE, code, {TARGET}, NAME, RUNTIME) == [at["site_rip"], at["site_runtime"]]
    assert call_sites(BASE, code, {TARGET}, NAME, None) == [at["site_rip"]]  # no runtime-relative form
    assert call_sites(BASE, code, {TARGET, OTHER}, NAME, RUNTIME) == [at["site_rip"], at["elsewhere"], at["site_runtime"]]


def test_a_call_at_the_very_end_of_the_text_is_read_whole():
    code, at = _assemble(b"\x48\x8d\x35" + struct.pack("<i", NAME - (BASE + 7)), ("last", lambda a: _call(a, TARGET)))
    assert call_sites(BASE, code, {TARGET}, NAME, None) == [at["last"]]
    assert call_sites(BASE, code[:-1], {TARGET}, NAME, None) == []
