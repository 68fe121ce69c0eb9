"""The library-call entry programs come from the call table alone: one per op, each with the
op's constant of common.h, and none written into the .bpf.c file besides."""

from __future__ import annotations

import re

from ioobserve.data import events as ev
from ioobserve.probes.load.loader import probes_source_dir
from ioobserve.probes.maps.call_table import HDF5, LIBC, MPIIO, PYTHON, TLS, call_entries

ENTRY = re.compile(r"CALL_ENTRY\((\w+), (\w+)\)")


def _enum_constants() -> list[str]:
    """enum ioo_op's names, in order (their values: the position)."""
    header = (probes_source_dir() / "common.h").read_text()
    body = header[header.index("enum ioo_op {"):]
    body = re.sub(r"/\*.*?\*/", "", body[:body.index("};")], flags=re.S)
    return re.findall(r"\b(IOO_OP_\w+)\b", body)


def test_the_generated_entries_are_the_call_table():
    entries = ENTRY.findall(call_entries())
    assert [op for op, _ in entries] == [spec.op for spec in LIBC + HDF5 + MPIIO + TLS + PYTHON]
    constants = _enum_constants()
    for op, constant in entries:
        assert constants.index(constant) == ev.OP_CODES[op], (op, constant)


def test_the_bpf_source_keeps_no_entry_list_of_its_own():
    source = (probes_source_dir() / "calls.bpf.c").read_text()
    assert ENTRY.findall(source) == [("name", "op")]  # only the macro's own definition
    assert "\nIOO_CALL_ENTRIES\n" in source
