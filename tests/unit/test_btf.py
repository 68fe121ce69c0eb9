"""The BTF reader: a hand-built blob with nested anonymous members, and the running kernel's."""

from __future__ import annotations

import struct
import pytest

from ioobserve.probes.kernel.btf import VMLINUX_BTF, Btf, BtfError
from ioobserve.probes.kernel.kernel_layout import FIELDS, layout_from_btf
from tests.conftest import in_ci


def _blob() -> bytes:
    """struct outer { int a; union { struct { long b; long c; }; int d; }; struct inner in; } and
    struct inner { int x; int y; }; ids: 1 int, 2 long, 3 anon struct, 4 anon union, 5 inner, 6 outer."""
    strings = b"\0int\0long\0inner\0x\0y\0outer\0a\0b\0c\0d\0in\0"
    off = {name: strings.index(b"\0" + name.encode() + b"\0") + 1 for name in
           ("int", "long", "inner", "x", "y", "outer", "a", "b", "c", "d", "in")}

    def btf_type(name, kind, vlen, size, kind_flag=0):
        return struct.pack("<III", name, (kind_flag << 31) | (kind << 24) | vlen, size)

    def member(name, type_id, bits):
        return struct.pack("<III", name, type_id, bits)

    types = b"".join([
        btf_type(off["int"], 1, 0, 4) + struct.pack("<I", 32),
        btf_type(off["long"], 1, 0, 8) + struct.pack("<I", 64),
        btf_type(0, 4, 2, 16) + member(off["b"], 2, 0) + member(off["c"], 2, 64),
        btf_type(0, 5, 2, 16) + member(0, 3, 0) + member(off["d"], 1, 0),
        btf_type(off["inner"], 4, 2, 8) + member(off["x"], 1, 0) + member(off["y"], 1, 32),
        btf_type(off["outer"], 4, 3, 32) + member(off["a"], 1, 0) + member(0, 4, 64) + member(off["in"], 5, 192),
    ])
    header = struct.pack("<HBBIIIII", 0xEB9F, 1, 0, 24, 0, len(types), len(types), len(strings))
    return header + types + strings


def test_offsets_through_anonymous_members_and_nesting():
    btf = Btf(_blob())
    assert btf.offset("outer", "a") == 0
    assert btf.offset("outer", "b") == 8  # inside an anonymous struct inside an anonymous union
    assert btf.offset("outer", "c") == 16
    assert btf.offset("outer", "d") == 8
    assert btf.offset("outer", "in.y") == 28
    assert btf.struct_size("outer") == 32
    assert btf.has_member("outer", "in.x") and not btf.has_member("outer", "in.z")


def test_missing_struct_or_member_is_an_error():
    btf = Btf(_blob())
    with pytest.raises(BtfError, match="nope"):
        btf.offset("nope", "a")
    with pytest.raises(BtfError, match="no member"):
        btf.offset("outer", "zz")


def test_bad_magic_is_an_error():
    with pytest.raises(BtfError, match="magic"):
        Btf(b"\0" * 64)


def test_running_kernel_has_every_field_the_probes_read():
    if not VMLINUX_BTF.exists():
        if in_ci():
            pytest.fail("CI machines have BTF; ioobserve needs it")
        pytest.skip("kernel without BTF")
    layout = layout_from_btf(Btf.load())
    assert set(FIELDS) <= set(layout.offsets)
    # task_struct is large; fields inside it are far from 0, and distinct fields differ
    assert layout.offsets["TASK_FILES"] != layout.offsets["TASK_FS"]
    assert all(value >= 0 for value in layout.offsets.values())
    assert any(flag.startswith("-DOFF_TASK_TGID=") for flag in layout.cflags())


def test_attach_points_are_found_by_kind_and_name():
    """Types of the same name but another kind are not attach points (a struct is no typedef)."""
    strings = b"\0long\0regs\0sys_pread\0trace_t\0"
    off = {name: strings.index(b"\0" + name.encode() + b"\0") + 1 for name in ("long", "regs", "sys_pread", "trace_t")}
    types = b"".join([
        struct.pack("<III", off["long"], 1 << 24, 8) + struct.pack("<I", 64),  # 1: long
        struct.pack("<III", 0, (13 << 24) | 1, 1) + struct.pack("<II", off["regs"], 1),  # 2: long (long regs)
        struct.pack("<III", off["sys_pread"], 12 << 24, 2),  # 3: function sys_pread, prototype 2
        struct.pack("<III", off["trace_t"], 8 << 24, 2),  # 4: typedef trace_t
        struct.pack("<III", off["sys_pread"], 8 << 24, 1),  # 5: a typedef named like the function
    ])
    header = struct.pack("<HBBIIIII", 0xEB9F, 1, 0, 24, 0, len(types), len(types), len(strings))
    btf = Btf(header + types + strings)
    assert btf.named_ids("function", ["sys_pread", "sys_absent"]) == {"sys_pread": 3}
    assert btf.named_ids("typedef", ["trace_t", "sys_pread"]) == {"trace_t": 4, "sys_pread": 5}
    assert btf.function_proto(3) == 2
    with pytest.raises(BtfError, match="not a function"):
        btf.function_proto(4)
