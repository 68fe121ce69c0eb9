"""Where CPython keeps what the stack walk reads, per version (ebpf_probes/python_stacks.bpf.c).

3.10-3.12: offsets taken from each version's own headers (Include/internal/pycore_*.h,
Include/cpython/*.h) by compiling `offsetof` against them; tests/unit/test_python_layouts.py
compiles tests/unit/python_offsets.c against every CPython on the machine and checks these
tables. 3.13+: the interpreter carries them in `_Py_DebugOffsets` at the start of
`_PyRuntime`, so a patch release that moves a field is read right; we only need to know
where each value sits in that struct (its own layout changed in 3.14 and 3.15), which is
also taken from the headers and checked the same way. Each value read is checked against
the size the struct declares for its object: a damaged or misread struct is refused, not
walked.
"""

from __future__ import annotations

import struct

import numpy as np

from ioobserve.data import events as ev

NO_FIELD = ev.PY_NO_FIELD
DEBUG_COOKIE = b"xdebugpy"
# PyASCIIObject.state's bit fields (interned:2, kind:3, compact:1, ascii:1, ...), the same
# from 3.10 on, but for the free-threaded build of 3.14+, whose `interned` is a whole byte.
_UNICODE_STATE = {"unicode_ascii_mask": 0x40, "unicode_kind_mask": 0x1C, "unicode_kind_shift": 2}
_UNICODE_STATE_BYTE_INTERNED = {"unicode_ascii_mask": 0x1000, "unicode_kind_mask": 0x700, "unicode_kind_shift": 8}
# The lowest enum _frameowner value of frames without code of their own, which the walk
# skips: FRAME_OWNED_BY_CSTACK in 3.12 and 3.13; from 3.14 FRAME_OWNED_BY_INTERPRETER
# (3.14 adds CSTACK = 4 above it; 3.15 has INTERPRETER alone).
_OWNER_SHIM = 3
_COMPACT_EXTRA = 16  # PyCompactUnicodeObject after its PyASCIIObject: utf8_length, utf8 (3.12+)

# Offsets per version, from its headers (see the module docstring).
HEADER_TABLES: dict[tuple[int, int], dict[str, int]] = {
    (3, 10): {
        "runtime_interpreters": 32, "interp_next": 0, "interp_threads": 8, "tstate_next": 8,
        "tstate_native_id": 176, "tstate_frame": 24, "cframe_frame": NO_FIELD,  # thread_id: pthread_self()
        "frame_previous": 24, "frame_code": 32, "frame_instr": 96, "frame_owner": NO_FIELD, "frame_localsplus": 352,
        "owner_shim": NO_FIELD, "code_argcount": 16, "code_firstlineno": 40, "code_qualname": 112,  # co_name
        "code_filename": 104, "code_linetable": 120, "code_adaptive": 0, "unicode_length": 16, "unicode_state": 32,
        "unicode_ascii_data": 48, "unicode_compact_data": 72, "bytes_size": 16, "bytes_data": 32,
        "flags": ev.PY_LASTI | ev.PY_PTHREAD_ID,
    },
    (3, 11): {
        "runtime_interpreters": 40, "interp_next": 0, "interp_threads": 16, "tstate_next": 8,
        "tstate_native_id": 160, "tstate_frame": 56, "cframe_frame": 8,
        "frame_previous": 48, "frame_code": 32, "frame_instr": 56, "frame_owner": 69, "frame_localsplus": 72,
        "owner_shim": NO_FIELD, "code_argcount": 56, "code_firstlineno": 72, "code_qualname": 128,
        "code_filename": 112, "code_linetable": 136, "code_adaptive": 184, "unicode_length": 16, "unicode_state": 32,
        "unicode_ascii_data": 48, "unicode_compact_data": 72, "bytes_size": 16, "bytes_data": 32, "flags": 0,
    },
    (3, 12): {
        "runtime_interpreters": 40, "interp_next": 0, "interp_threads": 72, "tstate_next": 8,
        "tstate_native_id": 144, "tstate_frame": 56, "cframe_frame": 0,
        "frame_previous": 8, "frame_code": 0, "frame_instr": 56, "frame_owner": 70, "frame_localsplus": 72,
        "owner_shim": _OWNER_SHIM, "code_argcount": 52, "code_firstlineno": 68, "code_qualname": 128,
        "code_filename": 112, "code_linetable": 136, "code_adaptive": 192, "unicode_length": 16, "unicode_state": 32,
        "unicode_ascii_data": 40, "unicode_compact_data": 56, "bytes_size": 16, "bytes_data": 32, "flags": 0,
    },
}

# 3.13+: each value's position in _Py_DebugOffsets (a struct of uint64s), from its header;
# a value's struct size beside it where the struct declares one (checked when read).
_POSITIONS_313 = {
    "runtime_interpreters": 40, "interp_next": 64, "interp_threads": 72, "tstate_next": 168,
    "tstate_frame": 184, "tstate_native_id": 200, "frame_previous": 232, "frame_code": 240, "frame_instr": 248,
    "frame_localsplus": 256, "frame_owner": 264, "code_filename": 280, "code_qualname": 296,
    "code_linetable": 304, "code_firstlineno": 312, "code_argcount": 320, "code_adaptive": 344,
    "bytes_size": 520, "bytes_data": 528, "unicode_state": 544, "unicode_length": 552, "unicode_ascii_data": 560,
}
_POSITIONS_314 = {
    "runtime_interpreters": 40, "interp_next": 64, "interp_threads": 72, "tstate_next": 192,
    "tstate_frame": 208, "tstate_native_id": 224, "frame_previous": 256, "frame_code": 264, "frame_instr": 272,
    "frame_localsplus": 280, "frame_owner": 288, "frame_tlbc_index": 304, "code_filename": 320, "code_qualname": 336,
    "code_linetable": 344, "code_firstlineno": 352, "code_argcount": 360, "code_adaptive": 384, "code_tlbc": 392,
    "bytes_size": 600, "bytes_data": 608, "unicode_state": 624, "unicode_length": 632, "unicode_ascii_data": 640,
}
_POSITIONS_315 = {
    "runtime_interpreters": 40, "interp_next": 64, "interp_threads": 72, "tstate_next": 192,
    "tstate_frame": 208, "tstate_native_id": 248, "frame_previous": 320, "frame_code": 328, "frame_instr": 336,
    "frame_localsplus": 344, "frame_owner": 352, "frame_tlbc_index": 368, "code_filename": 384, "code_qualname": 400,
    "code_linetable": 408, "code_firstlineno": 416, "code_argcount": 424, "code_adaptive": 448, "code_tlbc": 456,
    "bytes_size": 696, "bytes_data": 704, "unicode_state": 720, "unicode_length": 728, "unicode_ascii_data": 736,
}
DEBUG_POSITIONS: dict[tuple[int, int], dict[str, int]] = {(3, 13): _POSITIONS_313, (3, 14): _POSITIONS_314,
                                                          (3, 15): _POSITIONS_315}
# Where each struct's declared size sits: (runtime, interpreter, thread state, frame, code, bytes, str).
DEBUG_SIZES_AT = {(3, 13): (24, 48, 152, 224, 272, 512, 536), (3, 14): (24, 48, 176, 248, 312, 592, 616),
             (3, 15): (24, 48, 176, 312, 376, 688, 712)}
DEBUG_SIZED_BY = {"runtime": 0, "interp": 1, "tstate": 2, "frame": 3, "code": 4, "bytes": 5, "unicode": 6}
DEBUG_VERSION_AT = 8  # _Py_DebugOffsets.version: PY_VERSION_HEX of the interpreter
DEBUG_FREE_THREADED_AT = 16  # _Py_DebugOffsets.free_threaded
DEBUG_SIZE = {(3, 13): 584, (3, 14): 760, (3, 15): 888}  # sizeof(_Py_DebugOffsets): the bytes to read
_MAX_OBJECT = 1 << 20  # no CPython struct the walk reads is near this size: a larger one is misread

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
        values = {**_UNICODE_STATE, "frame_tlbc_index": NO_FIELD, "code_tlbc": NO_FIELD, **HEADER_TABLES[version]}
    elif version in DEBUG_POSITIONS:
        values = _from_debug_offsets(version, debug_offsets)
    else:
        known = ", ".join(version_text(v) for v in SUPPORTED)
        raise LayoutError(f"Python {version_text(version)} is not supported (supported: {known})")
    row = np.zeros(1, dtype=ev.PY_LAYOUT)
    for name, value in values.items():
        row[name] = value
    row["version"] = version[0] << 8 | version[1]
    return row


def _from_debug_offsets(version: tuple[int, int], data: bytes | None) -> dict[str, int]:
    """The layout _Py_DebugOffsets gives, each value checked against its struct's size."""
    name = f"Python {version_text(version)}"
    if not data or not data.startswith(DEBUG_COOKIE) or len(data) < DEBUG_SIZE[version]:
        raise LayoutError(f"{name}: no _Py_DebugOffsets at the start of _PyRuntime")
    (declared, free_threaded) = struct.unpack_from("<QQ", data, DEBUG_VERSION_AT)
    if (declared >> 24, (declared >> 16) & 0xFF) != version:
        raise LayoutError(f"{name}: its _Py_DebugOffsets says version {declared:#x}")
    if free_threaded not in (0, 1):
        raise LayoutError(f"{name}: its _Py_DebugOffsets is damaged (free_threaded = {free_threaded})")
    sizes = [struct.unpack_from("<Q", data, at)[0] for at in DEBUG_SIZES_AT[version]]
    values = {field: struct.unpack_from("<Q", data, at)[0] for field, at in DEBUG_POSITIONS[version].items()}
    for field, value in values.items():
        size = sizes[DEBUG_SIZED_BY[field.split("_")[0]]]
        if field.endswith(("_tlbc", "_tlbc_index")) and not free_threaded:
            values[field] = NO_FIELD  # the default build has no thread-local bytecode (the struct says 0)
        elif not 0 < size < _MAX_OBJECT or value >= size:
            raise LayoutError(f"{name}: its _Py_DebugOffsets is damaged ({field} = {value} in a struct of {size} bytes)")
    unicode_state = _UNICODE_STATE_BYTE_INTERNED if free_threaded and version >= (3, 14) else _UNICODE_STATE
    if version == (3, 13):  # thread-local bytecode came in 3.14
        values["frame_tlbc_index"] = values["code_tlbc"] = NO_FIELD
    return {**values, **unicode_state, "unicode_compact_data": values["unicode_ascii_data"] + _COMPACT_EXTRA,
            "owner_shim": _OWNER_SHIM, "cframe_frame": NO_FIELD,
            "flags": ev.PY_FREE_THREADED if free_threaded else 0}


def debug_offsets_size(version: tuple[int, int]) -> int:
    """Bytes of _Py_DebugOffsets to read for `version` (0: its layout comes from a table)."""
    return DEBUG_SIZE.get(version, 0)


def full_version(hexversion: int) -> str:
    """'3.14.10' for PY_VERSION_HEX 0x030e0af0 (a release level other than final is added: '3.15.0b1')."""
    major, minor, micro = hexversion >> 24, (hexversion >> 16) & 0xFF, (hexversion >> 8) & 0xFF
    level, serial = (hexversion >> 4) & 0xF, hexversion & 0xF
    text = f"{major}.{minor}.{micro}"
    return text + {0xA: f"a{serial}", 0xB: f"b{serial}", 0xC: f"rc{serial}"}.get(level, "")
