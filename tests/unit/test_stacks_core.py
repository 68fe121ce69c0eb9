"""The compiled core's Python stack side (csrc/linetable.c, stacks.c, aux.c): its record
layout is events.py's, its line tables read as the Python reader they replaced (the oracle in
tests/oracles) and as this interpreter's own co_lines(), and records cut short or damaged are
skipped or refused, never read past."""

from __future__ import annotations

import json.decoder

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ioobserve import _core
from ioobserve.data import events as ev
from ioobserve.data import schema as s
from ioobserve.data.model import NO_LINE, Frame, Stack
from ioobserve.python.stacks import PythonStacks
from tests.oracles.linetable_python import LineTable
from tests.unit.fake_ring import ring_blob, ring_record
from tests.unit.stack_records import CODE, PID, chain_record, code_record


def test_the_core_reads_the_records_as_events_py_lays_them_out():
    layout = _core.LAYOUT
    for name in ("AUX_PY_CHAIN", "AUX_PY_CODE", "PY_MAX_FRAMES", "PY_TRUNCATED", "PY_NAME_BYTES", "PY_FILE_BYTES",
                 "PY_TABLE_BYTES"):
        assert layout[name] == getattr(ev, name), name
    for prefix, dtype in (("chain", ev.PY_CHAIN_RECORD), ("code", ev.PY_CODE_RECORD), ("frame", ev.PY_FRAME)):
        for key, offset in layout.items():
            if key.startswith(prefix + ".") and key != "frame.itemsize":
                assert dtype.fields[key.split(".", 1)[1]][1] == offset, key
    assert layout["frame.itemsize"] == ev.PY_FRAME.itemsize
    assert layout["code.pad"] == ev.PY_CODE_RECORD.fields["version"][1] + 2  # the head read: through version
    for key, offset in layout.items():
        if key.startswith("name.") and key != "name.itemsize":
            assert ev.NAME_RECORD.fields[key.split(".", 1)[1]][1] == offset, key
    assert layout["name.itemsize"] == ev.NAME_RECORD.itemsize
    assert (layout["AUX_NAME"], layout["NAME_LABEL"]) == (ev.AUX_NAME, ev.NAME_LABEL)


@settings(max_examples=300, deadline=None)
@given(table=st.binary(max_size=300), first=st.integers(-(1 << 20), 1 << 20), before_311=st.booleans(),
       offsets=st.lists(st.integers(0, 5000), max_size=40))
def test_line_tables_read_as_the_python_reader_did(table, first, before_311, offsets):
    """Any bytes, as a table cut short or read from memory being changed may be."""
    oracle = LineTable.parse(table, first, (3, 10) if before_311 else (3, 11))
    assert _core.lines_at(table, first, before_311, offsets) == [oracle.line(offset) for offset in offsets]


def _codes_of(module) -> list:
    """The code objects of a module's functions and methods, nested ones included."""
    found, seen = [], set()

    def walk(code) -> None:
        if id(code) not in seen:
            seen.add(id(code))
            found.append(code)
            for const in code.co_consts:
                if hasattr(const, "co_lines"):
                    walk(const)

    for value in list(vars(module).values()) + [v for t in vars(module).values() if isinstance(t, type) for v in vars(t).values()]:
        if getattr(value, "__code__", None):
            walk(value.__code__)
    return found


def test_frames_name_the_lines_this_interpreter_gives_its_own_code():
    """Code records of real code objects (json.decoder's), chains through each instruction
    that has a line: each resolved frame's line is co_lines()'s."""
    stacks = PythonStacks()
    expected, records, chain = {}, [], 0
    for n, code in enumerate(_codes_of(json.decoder)):
        table = code.co_linetable[: ev.PY_TABLE_BYTES]  # what the kernel copies of a longer one
        records.append(code_record(CODE + n, code.co_qualname, file=code.co_filename, table=table, first=code.co_firstlineno))
        full = len(code.co_linetable) <= ev.PY_TABLE_BYTES
        for start, end, line in code.co_lines():
            if full and line is not None:
                chain += 1
                records.append(chain_record(chain, [n], instrs=[start // 2]))
                expected[chain] = (code.co_qualname, line)
    stacks.add([ring_blob(records)])
    ids = stacks.ids(pl.Series(list(expected), dtype=pl.UInt64))
    kept = stacks._table.stacks  # noqa: SLF001
    got = {chain: (kept[stack].frames[0].function, kept[stack].frames[0].line)
           for chain, stack in zip(expected, ids.to_list())}
    assert got == expected and len(expected) > 200


def test_names_in_each_of_cpythons_string_kinds():
    """PyUnicode's 1-, 2- and 4-byte kinds (latin-1, UTF-16, UTF-32, little-endian)."""
    stacks = PythonStacks()
    wide = np.zeros(1, dtype=ev.PY_CODE_RECORD)
    wide["kind"], wide["code"], wide["pid"], wide["version"] = ev.AUX_PY_CODE, CODE, PID, 3 << 8 | 12
    name, file = "λ_load", "/données/🐍.py"
    wide["name_kind"], wide["name_len"], wide["name"] = 2, len(name.encode("utf-16-le")), name.encode("utf-16-le")
    wide["file_kind"], wide["file_len"], wide["file"] = 4, len(file.encode("utf-32-le")), file.encode("utf-32-le")
    stacks.add([ring_blob([wide.tobytes(), chain_record(1, [0])])])
    stacks.ids(pl.Series([1], dtype=pl.UInt64))
    (stack,) = stacks.take_new().values()
    assert stack.frames[0][:2] == (name, file) and stack.frames[0].line == NO_LINE


def test_records_cut_short_or_damaged_are_skipped_and_counted_as_unknown():
    stacks = PythonStacks()
    whole = chain_record(1, [0, 1, 2])
    records = [
        whole[:20],  # shorter than a chain's head: skipped
        chain_record(2, [0, 1, 2])[:32 + ev.PY_FRAME.itemsize + 5],  # depth 3, one whole frame sent
        code_record(CODE, "f0")[:30],  # shorter than a code's head: skipped
        code_record(CODE + 1, "f1", table=b"\x80\x00\x01")[:ev.PY_CODE_RECORD.fields["name"][1] + 1],  # names cut
        b"\x07\0",  # a kind but nothing else
    ]
    stacks.add([ring_blob(records)])
    ids = dict(zip([1, 2], stacks.ids(pl.Series([1, 2], dtype=pl.UInt64)).to_list()))
    assert ids[1] is None and stacks.unknown_chains == 1
    frames = stacks._table.stacks[ids[2]].frames  # noqa: SLF001
    assert [frame.function for frame in frames] == ["<unknown>"]  # code CODE's record was too short to keep


def test_a_blob_whose_record_runs_past_its_end_is_refused():
    blob = ring_record(chain_record(1, [0]))
    with pytest.raises(ValueError, match="runs past"):
        _core.Stacks(4, 8, Frame, Stack).add(blob[:-9])
    with pytest.raises(ValueError, match="runs past"):
        _core.aux_split(blob[:-9])


def test_aux_split_keeps_the_stack_records_in_one_blob_in_their_order():
    """Each record kind goes to its reader: here the others stay bytes, in order."""
    chain, code, name = chain_record(1, [0]), code_record(CODE, "f0"), b"\x02\0\0\0name"
    other = b"\x01\0\0\0path"
    records, python, names = _core.aux_split(ring_blob([other, chain, other, code]))
    assert records == [other, other] and python == ring_blob([chain, code]) and names is None


def test_each_event_gets_its_chains_stack_id_and_each_chain_is_resolved_once():
    """A batch's chains as its events carry them: repeated, in runs and not, and none (0)."""
    stacks = PythonStacks()
    stacks.add([ring_blob([code_record(CODE + n, f"f{n}") for n in range(3)]
                          + [chain_record(chain, [chain - 1]) for chain in (1, 2, 3)])])
    events = [0, 1, 1, 2, 0, 1, 9, 3, 3, 2, 9]  # 9: a chain whose record never came
    ids = stacks.ids(pl.Series(events, dtype=pl.UInt64)).to_list()
    by_chain = {chain: stack for chain, stack in zip(events, ids)}
    assert [by_chain[chain] for chain in events] == ids  # one id per chain, whatever the order
    assert by_chain[0] is None and by_chain[9] is None and len({by_chain[c] for c in (1, 2, 3)}) == 3
    assert stacks.unknown_chains == 1  # counted once per batch, not per event
    new = stacks.take_new()
    assert [new[by_chain[chain]].frames[0].function for chain in (1, 2, 3)] == ["f0", "f1", "f2"]


def test_forgotten_processes_lose_their_code_objects_and_pending_chains():
    stacks = PythonStacks()
    stacks.add([ring_blob([code_record(CODE, "f0"), chain_record(1, [0]), chain_record(2, [0], pid=PID + 1)])])
    stacks.forget([PID])
    assert stacks._table.pending == 1  # noqa: SLF001 - the other process's
    stacks.add([ring_blob([chain_record(3, [0])])])
    ids = dict(zip([1, 3], stacks.ids(pl.Series([1, 3], dtype=pl.UInt64)).to_list()))
    assert ids[1] is None and [f.function for f in stacks._table.stacks[ids[3]].frames] == ["<unknown>"]  # noqa: SLF001
