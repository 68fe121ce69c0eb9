"""Fuzzing the compiled core (ioobserve/csrc) with hypothesis: members mutated every way a
disk or a hand could damage them, random text against random templates, and batches at the
edges of every column type. Run by tests/unit/test_core_sanitized.py under AddressSanitizer
and UndefinedBehaviorSanitizer, where any read past a buffer or undefined operation aborts:
a test here passes when the core answers (columns, or one ValueError) and nothing trips."""

from __future__ import annotations

import os

import numpy as np
import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ioobserve import _core
from ioobserve import schema as s
from ioobserve.trace import parse
from ioobserve.trace.lines import event_lines
from tests.fuzz.sanitized import ENV_MODULE
from tests.unit.test_event_lines_core import ROW

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
