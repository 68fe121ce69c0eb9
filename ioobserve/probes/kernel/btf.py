"""A small reader of kernel BTF: struct member offsets of the running kernel.

The kernel headers on a node often do not match the running kernel (Debian ships 6.1
headers; this kernel is 6.18), so every struct field a probe reads takes its offset from
/sys/kernel/btf/vmlinux instead. Only the parts of the format needed for that are read.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

VMLINUX_BTF = Path("/sys/kernel/btf/vmlinux")

_MAGIC = 0xEB9F
_HEADER = struct.Struct("<HBBIIIII")
_TYPE = struct.Struct("<III")
_MEMBER = struct.Struct("<III")
_PARAM = struct.Struct("<II")  # a function prototype's parameter: name, type

# BTF kinds (include/uapi/linux/btf.h) and the bytes that follow each btf_type record.
_INT, _PTR, _ARRAY, _STRUCT, _UNION, _ENUM, _FWD, _TYPEDEF = 1, 2, 3, 4, 5, 6, 7, 8
_VOLATILE, _CONST, _RESTRICT, _FUNC, _FUNC_PROTO, _VAR, _DATASEC = 9, 10, 11, 12, 13, 14, 15
_FLOAT, _DECL_TAG, _TYPE_TAG, _ENUM64 = 16, 17, 18, 19
_MODIFIERS = {_TYPEDEF, _VOLATILE, _CONST, _RESTRICT, _TYPE_TAG}


class BtfError(Exception):
    """The BTF blob is unreadable or lacks a struct or member we need."""


@dataclass(frozen=True)
class _Type:
    kind: int
    name: str
    size_or_type: int
    vlen: int
    kind_flag: bool
    body: int  # byte offset of the data following the btf_type record


def _extra_bytes(kind: int, vlen: int) -> int:
    if kind in (_INT, _VAR, _DECL_TAG):
        return 4
    if kind == _ARRAY:
        return 12
    if kind in (_STRUCT, _UNION, _DATASEC, _ENUM64):
        return 12 * vlen
    if kind in (_ENUM, _FUNC_PROTO):
        return 8 * vlen
    return 0


class Btf:
    """Type information parsed from a BTF blob; answers struct layout questions."""

    def __init__(self, blob: bytes):
        if len(blob) < _HEADER.size:
            raise BtfError("BTF blob too short")
        magic, _ver, _flags, hdr_len, type_off, type_len, str_off, str_len = _HEADER.unpack_from(blob)
        if magic != _MAGIC:
            raise BtfError(f"bad BTF magic {magic:#x}")
        self._blob = memoryview(blob)
        self._types_start = hdr_len + type_off
        self._strings_start = hdr_len + str_off
        self._strings_end = self._strings_start + str_len
        # Where each type's record starts (type id 0 is void): records are decoded when asked
        # for, as a layout needs a few dozen of a kernel's ~130,000 types.
        self._at: list[int] = [-1]
        self._structs_by_name_offset: dict[int, int] = {}  # first struct of each name (its string's offset)
        # The first typedef and function of each name, likewise: the attach points asked for by
        # name (named_ids), found in the one pass over the types rather than a pass per question.
        self._named_by_kind: dict[int, dict[int, int]] = {_TYPEDEF: {}, _FUNC: {}}
        self._parse_types(self._types_start, self._types_start + type_len)

    @classmethod
    def load(cls, path: Path = VMLINUX_BTF) -> "Btf":
        """Parse the BTF at `path` (the running kernel's by default)."""
        try:
            return cls(Path(path).read_bytes())
        except OSError as exc:
            raise BtfError(f"cannot read {path}: {exc.strerror}") from exc

    def _name(self, offset: int) -> str:
        start = self._strings_start + offset
        end = bytes(self._blob[start : min(start + 256, self._strings_end)]).find(b"\0")
        return bytes(self._blob[start : start + end]).decode()

    def _parse_types(self, pos: int, end: int) -> None:
        blob, unpack, at, structs = self._blob, _TYPE.unpack_from, self._at, self._structs_by_name_offset
        typedefs, functions = self._named_by_kind[_TYPEDEF], self._named_by_kind[_FUNC]
        fixed = [_extra_bytes(kind, 0) for kind in range(32)]
        per_member = [_extra_bytes(kind, 1) - fixed[kind] for kind in range(32)]
        while pos < end:
            name_off, info, _ = unpack(blob, pos)
            kind, vlen = (info >> 24) & 0x1F, info & 0xFFFF
            if name_off:
                named = structs if kind == _STRUCT else functions if kind == _FUNC else typedefs if kind == _TYPEDEF else None
                if named is not None and name_off not in named:
                    named[name_off] = len(at)
            at.append(pos)
            pos += _TYPE.size + fixed[kind] + per_member[kind] * vlen

    def _type(self, type_id: int) -> _Type | None:
        """The record of a type id (None: void)."""
        if not type_id:
            return None
        pos = self._at[type_id]
        name_off, info, size_or_type = _TYPE.unpack_from(self._blob, pos)
        kind = (info >> 24) & 0x1F
        name = self._name(name_off) if kind in (_STRUCT, _UNION) and name_off else ""
        return _Type(kind, name, size_or_type, info & 0xFFFF, bool(info >> 31), pos + _TYPE.size)

    def _struct_id(self, name: str) -> int | None:
        """The type id of the first `struct name` (BTF keeps each distinct string once)."""
        strings = bytes(self._blob[self._strings_start:self._strings_end])
        at = strings.find(b"\0" + name.encode() + b"\0")
        return None if at < 0 else self._structs_by_name_offset.get(at + 1)

    def _resolve(self, type_id: int) -> _Type:
        entry = self._type(type_id)
        while entry is not None and entry.kind in _MODIFIERS:
            entry = self._type(entry.size_or_type)
        if entry is None:
            raise BtfError(f"type {type_id} resolves to void")
        return entry

    def _members(self, entry: _Type):
        for i in range(entry.vlen):
            name_off, type_id, offset = _MEMBER.unpack_from(self._blob, entry.body + i * _MEMBER.size)
            bit_offset = offset & 0xFFFFFF if entry.kind_flag else offset
            yield (self._name(name_off) if name_off else ""), type_id, bit_offset

    def _find_member(self, entry: _Type, name: str) -> tuple[int, int] | None:
        """(bit offset, type id) of `name` in a struct/union, searching anonymous members."""
        for member_name, type_id, bit_offset in self._members(entry):
            if member_name == name:
                return bit_offset, type_id
            if not member_name:
                inner = self._resolve(type_id)
                if inner.kind in (_STRUCT, _UNION):
                    found = self._find_member(inner, name)
                    if found:
                        return bit_offset + found[0], found[1]
        return None

    def has_struct(self, name: str) -> bool:
        """True if the kernel defines `struct name`."""
        return self._struct_id(name) is not None

    def struct_size(self, name: str) -> int:
        """sizeof(struct name)."""
        return self._struct(name).size_or_type

    def _struct(self, name: str) -> _Type:
        type_id = self._struct_id(name)
        if type_id is None:
            raise BtfError(f"struct {name} not in BTF")
        return self._type(type_id)

    def offset(self, struct_name: str, member_path: str) -> int:
        """Byte offset of a dotted member path, e.g. offset("file", "f_path.dentry")."""
        entry, total_bits = self._struct(struct_name), 0
        for part in member_path.split("."):
            if entry.kind not in (_STRUCT, _UNION):
                raise BtfError(f"{struct_name}.{member_path}: {part} is not inside a struct")
            found = self._find_member(entry, part)
            if found is None:
                raise BtfError(f"struct {struct_name} has no member {member_path}")
            bits, type_id = found
            total_bits += bits
            entry = self._resolve(type_id)
        if total_bits % 8:
            raise BtfError(f"{struct_name}.{member_path} is a bitfield")
        return total_bits // 8

    def has_member(self, struct_name: str, member_path: str) -> bool:
        """True if the dotted member path exists."""
        try:
            self.offset(struct_name, member_path)
        except BtfError:
            return False
        return True

    def named_ids(self, kind: str, names: list[str]) -> dict[str, int]:
        """{name: type id} of the `kind` ("typedef" or "function") types named in `names`
        that the kernel has: the attach points of BTF programs (tp_btf, fentry)."""
        named = self._named_by_kind[{"typedef": _TYPEDEF, "function": _FUNC}[kind]]
        strings = bytes(self._blob[self._strings_start:self._strings_end])
        found = {}
        for name in names:
            at = strings.find(b"\0" + name.encode() + b"\0")  # BTF keeps each distinct string once
            if at >= 0 and at + 1 in named:
                found[name] = named[at + 1]
        return found

    def function_proto(self, function_id: int) -> int:
        """The type id of a function's prototype (programs tail-calling each other must
        attach to functions of one prototype)."""
        entry = self._type(function_id)
        if entry is None or entry.kind != _FUNC:
            raise BtfError(f"type {function_id} is not a function")
        return entry.size_or_type

    def tracepoint_args(self, tracepoint: str) -> list[str] | None:
        """The C types of a tracepoint's arguments as a raw or tp_btf program gets them
        ("struct io_kiocb *", "void *", "bool", ...), from its btf_trace_<name> typedef; None
        if the kernel has no such tracepoint."""
        found = self.named_ids("typedef", [f"btf_trace_{tracepoint}"])
        if not found:
            return None
        proto = self._resolve(next(iter(found.values())))
        if proto.kind == _PTR:
            proto = self._resolve(proto.size_or_type)
        if proto.kind != _FUNC_PROTO:
            raise BtfError(f"btf_trace_{tracepoint} is no function pointer")
        params = [_PARAM.unpack_from(self._blob, proto.body + i * _PARAM.size)[1] for i in range(proto.vlen)]
        return [self._c_type(type_id) for type_id in params[1:]]  # the first is the probe's own data

    def _c_type(self, type_id: int) -> str:
        """A type as C spells it, modifiers left out."""
        entry = self._type(type_id)
        while entry is not None and entry.kind in _MODIFIERS:
            entry = self._type(entry.size_or_type)
        if entry is None:
            return "void"
        if entry.kind == _PTR:
            return f"{self._c_type(entry.size_or_type)} *"
        name_off = _TYPE.unpack_from(self._blob, entry.body - _TYPE.size)[0]
        name = self._name(name_off) if name_off else "?"
        return {_STRUCT: f"struct {name}", _UNION: f"union {name}", _ENUM: f"enum {name}"}.get(entry.kind, name)

    def function_args(self, function: str) -> list[str] | None:
        """The C types of a kernel function's arguments, from its BTF prototype; None if the
        kernel's BTF has no such function (inlined, renamed, or absent)."""
        found = self.named_ids("function", [function])
        if not found:
            return None
        proto = self._resolve(self.function_proto(next(iter(found.values()))))
        params = [_PARAM.unpack_from(self._blob, proto.body + i * _PARAM.size)[1] for i in range(proto.vlen)]
        return [self._c_type(type_id) for type_id in params]
