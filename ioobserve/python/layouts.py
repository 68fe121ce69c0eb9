"""Where CPython keeps what the stack walk reads, per version (ebpf_probes/python_stacks.bpf.c).

3.10-3.12: offsets taken from each version's own headers (Include/internal/pycore_*.h,
Include/cpython/*.h) by compiling `offsetof` against them; tests/unit/test_python_layouts.py
compiles tests/unit/python_offsets.c against every CPython on the machine and checks these
tables. 3.13+: the interpreter carries them in `_Py_DebugOffsets` at the start of
`_PyRuntime`; we only need to know where each value sits in that struct, which is also
taken from the headers (and checked the same way).
"""

from __future__ import annotations

import struct

import numpy as np

from ioobserve import events as ev

NO_FIELD = ev.PY_NO_FIELD
DEBUG_COOKIE = b"xdebugpy"
# PyASCIIObject.state's bit fields (interned:2, kind:3, compact:1, ascii:1, ...), the same
# from 3.10 to 3.13.
_UNICODE_STATE = {"unicode_ascii_mask": 0x40, "unicode_kind_mask": 0x1C, "unicode_kind_shift": 2}
_OWNER_CSTACK = 3  # enum _frameowner's FRAME_OWNED_BY_CSTACK (3.12+)

# Offsets per version, from its headers (see the module docstring).
HEADER_TABLES: dict[tuple[int, int], dict[str, int]] = {
    (3, 10): {
        "runtime_interpreters": 32, "interp_next": 0, "interp_threads": 8, "tstate_next": 8,
        "tstate_native_id": 176, "tstate_frame": 24, "cframe_frame": NO_FIELD,  # thread_id: pthread_self()
        "frame_previous": 24, "frame_code": 32, "frame_instr": 96, "frame_owner": NO_FIELD, "frame_localsplus": 352,
        "owner_cstack": NO_FIELD, "code_argcount": 16, "code_firstlineno": 40, "code_qualname": 112,  # co_name
        "code_filename": 104, "code_linetable": 120, "code_adaptive": 0, "unicode_length": 16, "unicode_state": 32,
        "unicode_ascii_data": 48, "unicode_compact_data": 72, "bytes_size": 16, "bytes_data": 32,
        "flags": ev.PY_LASTI | ev.PY_PTHREAD_ID,
    },
    (3, 11): {
        "runtime_interpreters": 40, "interp_next": 0, "interp_threads": 16, "tstate_next": 8,
        "tstate_native_id": 160, "tstate_frame": 56, "cframe_frame": 8,
        "frame_previous": 48, "frame_code": 32, "frame_instr": 56, "frame_owner": 69, "frame_localsplus": 72,
        "owner_cstack": NO_FIELD, "code_argcount": 56, "code_firstlineno": 72, "code_qualname": 128,
        "code_filename": 112, "code_linetable": 136, "code_adaptive": 184, "unicode_length": 16, "unicode_state": 32,
        "unicode_ascii_data": 48, "unicode_compact_data": 72, "bytes_size": 16, "bytes_data": 32, "flags": 0,
    },
    (3, 12): {
        "runtime_interpreters": 40, "interp_next": 0, "interp_threads": 72, "tstate_next": 8,
        "tstate_native_id": 144, "tstate_frame": 56, "cframe_frame": 0,
        "frame_previous": 8, "frame_code": 0, "frame_instr": 56, "frame_owner": 70, "frame_localsplus": 72,
        "owner_cstack": _OWNER_CSTACK, "code_argcount": 52, "code_firstlineno": 68, "code_qualname": 128,
        "code_filename": 112, "code_linetable": 136, "code_adaptive": 192, "unicode_length": 16, "unicode_state": 32,
        "unicode_ascii_data": 40, "unicode_compact_data": 56, "bytes_size": 16, "bytes_data": 32, "flags": 0,
    },
}

# 3.13: each value's position in _Py_DebugOffsets (a struct of uint64s), from its header.
DEBUG_POSITIONS: dict[tuple[int, int], dict[str, int]] = {
    (3, 13): {
        "runtime_interpreters": 40, "interp_next": 64, "interp_threads": 72, "tstate_next": 168,
        "tstate_frame": 184, "tstate_native_id": 200, "frame_previous": 232, "frame_code": 240, "frame_instr": 248,
        "frame_localsplus": 256, "frame_owner": 264, "code_filename": 280, "code_qualname": 296,
        "code_linetable": 304, "code_firstlineno": 312, "code_argcount": 320, "code_adaptive": 344,
        "bytes_size": 520, "bytes_data": 528, "unicode_state": 544, "unicode_length": 552, "unicode_ascii_data": 560,
    },
}
DEBUG_VERSION_AT = 8  # _Py_DebugOffsets.version: PY_VERSION_HEX of the interpreter
# What _Py_DebugOffsets does not say: a non-ASCII compact string's characters start after
# PyCompactUnicodeObject (PyASCIIObject + utf8_length + utf8), and shim frames' owner value.
_DEBUG_EXTRA = {(3, 13): {"unicode_compact_data": 56, "owner_cstack": _OWNER_CSTACK, "cframe_frame": NO_FIELD, "flags": 0}}

SUPPORTED = tuple(sorted({*HEADER_TABLES, *DEBUG_POSITIONS}))


class LayoutError(ValueError):
    """An interpreter whose structures this version of ioobserve cannot read."""


def version_text(version: tuple[int, int]) -> str:
    """'3.11' for (3, 11)."""
    return f"{version[0]}.{version[1]}"


def supported(version: tuple[int, int]) -> bool:
    """Whether this ioobserve can walk that CPython's frames."""
    return version in HEADER_TABLES or version in DEBUG_POSITIONS


def layout_row(version: tuple[int, int], debug_offsets: bytes | None = None) -> np.ndarray:
    """One PY_LAYOUT row for CPython `version`; 3.13+ needs the bytes of its _Py_DebugOffsets."""
    if version in HEADER_TABLES:
        values = HEADER_TABLES[version]
    elif version in DEBUG_POSITIONS:
        values = _from_debug_offsets(version, debug_offsets)
    else:
        known = ", ".join(version_text(v) for v in SUPPORTED)
        raise LayoutError(f"Python {version_text(version)} is not supported (supported: {known})")
    row = np.zeros(1, dtype=ev.PY_LAYOUT)
    for name, value in {**_UNICODE_STATE, **values}.items():
        row[name] = value
    row["version"] = version[0] << 8 | version[1]
    return row


def _from_debug_offsets(version: tuple[int, int], data: bytes | None) -> dict[str, int]:
    positions = DEBUG_POSITIONS[version]
    if not data or not data.startswith(DEBUG_COOKIE):
        raise LayoutError(f"Python {version_text(version)}: no _Py_DebugOffsets at the start of _PyRuntime")
    (declared,) = struct.unpack_from("<Q", data, DEBUG_VERSION_AT)
    if (declared >> 24, (declared >> 16) & 0xFF) != version:
        raise LayoutError(f"Python {version_text(version)}: _Py_DebugOffsets says version {declared:#x}")
    values = {name: struct.unpack_from("<Q", data, at)[0] for name, at in positions.items()}
    return {**values, **_DEBUG_EXTRA[version]}


def debug_offsets_size(version: tuple[int, int]) -> int:
    """Bytes of _Py_DebugOffsets to read for `version` (0: its layout comes from a table)."""
    positions = DEBUG_POSITIONS.get(version)
    return max(positions.values()) + 8 if positions else 0
