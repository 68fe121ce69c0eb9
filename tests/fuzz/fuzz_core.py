"""Fuzzing the compiled core (ioobserve/csrc) with hypothesis: members mutated every way a
disk or a hand could damage them, random text against random templates, batches at the
edges of every column type, and Python stack records and ring blobs cut and flipped. Run by tests/unit/test_core_sanitized.py under AddressSanitizer
and UndefinedBehaviorSanitizer, where any read past a buffer or undefined operation aborts:
a test here passes when the core answers (columns, or one ValueError) and nothing trips."""

from __future__ import annotations

import os

import numpy as np
import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ioobserve import _core
from ioobserve.data import events as ev
from ioobserve.data import schema as s
from ioobserve.data.decode import name_frame
from ioobserve.data.model import Frame, Stack
from ioobserve.trace.lines import event_lines
from ioobserve.trace.read import parse
from tests.fuzz.sanitized import ENV_MODULE
from tests.unit.fake_ring import ring_blob
from tests.event_rows import ROW
from tests.unit.stack_records import CODE, PID, chain_record, code_record

EXAMPLES = int(os.environ.get("IOOBSERVE_FUZZ_EXAMPLES", "400"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
_WIDTH = {"B": 1, "b": 1, "H": 2, "h": 2, "I": 4, "i": 4, "Q": 8, "q": 8, "s": 4}


def test_the_sanitized_core_is_the_one_under_test():
    if os.environ.get(ENV_MODULE):
        assert _core.__file__ == os.environ[ENV_MODULE]
        assert parse._core is _core


def _check(result, kinds: str) -> None:
    """What parse_shape gave is whole: each column holds its rows, each code names a value."""
    rows, columns = result
    assert len(columns) == len(kinds)
    for kind, column in zip(kinds, columns):
        if kind == "s":
            codes, values = column
            assert len(codes) == 4 * rows
            assert not rows or int(np.frombuffer(codes, np.uint32).max()) < len(values)
        else:
            assert len(column) == _WIDTH[kind] * rows


MUTATION = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 1 << 20), st.integers(0, 7)),
    st.tuples(st.just("cut"), st.integers(0, 1 << 20), st.just(0)),
    st.tuples(st.just("insert"), st.integers(0, 1 << 20), st.binary(min_size=1, max_size=8)),
    st.tuples(st.just("delete"), st.integers(0, 1 << 20), st.integers(1, 40)),
    st.tuples(st.just("repeat"), st.integers(0, 1 << 20), st.integers(1, 300)),
)


def _mutate(text: bytes, mutations) -> bytes:
    data = bytearray(text)
    for kind, at, arg in mutations:
        if not data:
            break
        at %= len(data)
        if kind == "flip":
            data[at] ^= 1 << arg
        elif kind == "cut":
            del data[at:]
        elif kind == "insert":
            data[at:at] = arg
        elif kind == "delete":
            del data[at:at + arg]
        else:
            data[at:at] = data[at:at + arg]
    return bytes(data)


@FUZZ
@given(rows=st.lists(ROW, min_size=1, max_size=12), mutations=st.lists(MUTATION, min_size=1, max_size=4),
       precision=st.sampled_from(["us", "ns"]))
def test_damaged_members(rows, mutations, precision):
    for group in event_lines(pl.DataFrame(rows, schema=s.ID_SCHEMA), precision, "0a1b2c3d").values():
        text = bytes(group.text)
        tokens, kinds = parse._template(parse.event_shape(text))
        _check(_core.parse_shape(text, tokens, kinds), kinds)
        try:
            result = _core.parse_shape(_mutate(text, mutations), tokens, kinds)
        except ValueError as exc:
            assert str(exc).startswith("line ")
        else:
            _check(result, kinds)


@FUZZ
@given(text=st.binary(max_size=600), tokens=st.lists(st.binary(max_size=12), min_size=2, max_size=6),
       kinds=st.text(st.sampled_from("BbHhIiQqs"), min_size=5, max_size=5))
def test_random_text_against_random_templates(text, tokens, kinds):
    kinds = kinds[: len(tokens) - 1]
    lines = b"".join(tokens[0] + text[:n] + tokens[-1] + b"\n" for n in range(0, len(text), 97)) + text
    for candidate in (text, lines):
        try:
            result = _core.parse_shape(candidate, tuple(tokens), kinds)
        except ValueError:
            continue
        _check(result, kinds)


@FUZZ
@given(rows=st.lists(ROW, max_size=40), precision=st.sampled_from(["us", "ns"]), prefix=st.text("0123456789abcdef", max_size=64))
def test_batches_at_the_edges_round_trip(rows, precision, prefix):
    frame = pl.DataFrame(rows, schema=s.ID_SCHEMA)
    groups = event_lines(frame, precision, prefix)
    assert sum(group.lines for group in groups.values()) == frame.height
    for group in groups.values():
        text = bytes(group.text)
        assert parse.shape_events(text, parse.event_shape(text)).height == group.lines


def _stack_records(draw_codes: list[tuple[int, bytes, int]], chains: list[list[int]]) -> list[bytes]:
    """Code records (code number, line table, version) and chains through them."""
    records = [code_record(CODE + n, f"f{n}", table=table, version=(3, minor)) for n, table, minor in draw_codes]
    return records + [chain_record(i + 1, codes, instrs=[c * 7 for c in codes]) for i, codes in enumerate(chains)]


@FUZZ
@given(codes=st.lists(st.tuples(st.integers(0, 6), st.binary(max_size=80), st.sampled_from([10, 11, 13])), max_size=6),
       chains=st.lists(st.lists(st.integers(0, 8), max_size=ev.PY_MAX_FRAMES), max_size=6),
       depth=st.integers(0, (1 << 32) - 1), mutations=st.lists(MUTATION, max_size=4), kept=st.integers(1, 4))
def test_damaged_stack_records(codes, chains, depth, mutations, kept):
    """Chain and code records cut, flipped and shuffled, a chain claiming any depth: the core
    keeps what it can read and resolves the chains (a stack, or unknown), or refuses a blob
    whose records run past it."""
    records = [_mutate(record, mutations) for record in _stack_records(codes, chains)]
    if chains:  # the first chain's depth, whatever its record holds
        at = ev.PY_CHAIN_RECORD.fields["depth"][1]
        records[len(codes)] = records[len(codes)][:at] + depth.to_bytes(4, "little") + records[len(codes)][at + 4:]
    table = _core.Stacks(kept, 3, Frame, Stack)
    try:
        table.add(ring_blob(records))
    except ValueError as exc:
        assert "runs past" in str(exc)
    ids = np.frombuffer(table.resolve(np.arange(1, len(chains) + 2, dtype=np.uint64)), np.uint32)
    assert len(ids) == len(chains) + 1
    new = table.take_new()
    assert set(ids[ids != 0].tolist()) <= set(new)  # each resolved chain's stack goes to the sinks
    table.forget([PID])


@FUZZ
@given(blob=st.binary(max_size=400), mutations=st.lists(MUTATION, max_size=4))
def test_damaged_ring_blobs(blob, mutations):
    """Any bytes as a ring blob: split, or one ValueError; and what is committed of it."""
    name = ev.AUX_NAME.to_bytes(4, "little")
    for candidate in (blob, _mutate(ring_blob([blob[:40], blob[40:]]), mutations),
                      _mutate(ring_blob([name + blob[:60], name + blob[60:], name]), mutations)):
        assert 0 <= _core.ring_committed(candidate) <= len(candidate)
        try:
            records, python, names = _core.aux_split(candidate)
        except ValueError as exc:
            assert "runs past" in str(exc)
        else:
            assert isinstance(records, list) and len(python) % 8 == 0
            _core.Stacks(2, 4, Frame, Stack).add(python)
            if names is not None:
                assert name_frame([names]).height == len(names[-1])


@FUZZ
@given(table=st.binary(max_size=2100), first=st.integers(-(1 << 31), (1 << 31) - 1), before_311=st.booleans(),
       offsets=st.lists(st.integers(0, (1 << 33)), max_size=20))
def test_any_line_table(table, first, before_311, offsets):
    assert len(_core.lines_at(table, first, before_311, offsets)) == len(offsets)


@FUZZ
@given(columns=st.lists(st.binary(max_size=64), min_size=5, max_size=5))
def test_match_names_on_any_columns(columns):
    """Any bytes as the five columns: matched rows within the names, or one ValueError."""
    try:
        *rows, matched = _core.match_names(*columns)
    except ValueError:
        return
    names = len(columns[2]) // 4
    assert len(matched) == names
    for row in rows:
        assert all(-1 <= value < names for value in np.frombuffer(row, dtype=np.int32).tolist())


@FUZZ
@given(data=st.data(), rows=st.integers(0, 40), wrong=st.integers(-1, 6), nones=st.tuples(st.booleans(), st.booleans()))
def test_rows_by_file_on_any_columns(data, rows, wrong, nones):
    """Columns of any bytes (one of them, `wrong`, maybe of another length): groups within the
    rows, or one ValueError."""
    widths = (1, 4, 1, 8, 8, 8, 1)
    args = [data.draw(st.binary(min_size=rows * width + (column == wrong), max_size=rows * width + (column == wrong)))
            for column, width in enumerate(widths)]
    args[2] = None if nones[0] else args[2]
    args[6] = None if nones[1] else args[6]
    try:
        which, firsts = _core.rows_by_file(*args)
    except ValueError as exc:
        assert wrong >= 0 and "rows of" in str(exc)
        return
    groups = np.frombuffer(firsts, dtype=np.uint32)
    assert len(which) == 4 * len(args[0]) and all(0 <= g < len(groups) for g in np.frombuffer(which, np.uint32).tolist())
