"""The compiled member parser (ioobserve/csrc/parse.c): the Polars oracle's frames from the
compiled writer's lines, and one clear refusal naming the line for anything else."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ioobserve import _core
from ioobserve.data import schema as s
from ioobserve.trace.lines import event_lines
from ioobserve.trace.read.parse import MalformedMember, Shape, event_shape, shape_events
from tests.oracles import parse_polars
from tests.event_rows import ROW

SHAPE = Shape("SYSCALL", ("name", "pid", "tid", "ts", "dur", "fhash", "ret", "fd"))
GOOD = (b'{"name":"read","cat":"SYSCALL","type":64,"pid":7,"tid":8,"ts":1700000000000001,"dur":3,"ph":1,'
        b'"args":{"fhash":"0a1b2c3d1f","ret":-9,"fd":3}}\n')


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(ROW, min_size=1, max_size=30), precision=st.sampled_from(["us", "ns"]))
def test_members_read_back_as_the_oracle_reads_them(rows, precision):
    """Every group the writer makes (non-ASCII names, extremes of every type, both
    precisions) parses to the oracle's frame, byte for byte of every value."""
    frame = pl.DataFrame(rows, schema=s.ID_SCHEMA)
    for group in event_lines(frame, precision, "0a1b2c3d").values():
        text = bytes(group.text)
        shape = event_shape(text)
        assert shape is not None
        got, expected = shape_events(text, shape), parse_polars.shape_events(text, shape)
        assert got.height == group.lines
        assert got.equals(expected), (got, expected)


def test_some_fields_only():
    got = shape_events(GOOD * 3, SHAPE, ["pid", "ts"])
    assert got.columns == ["pid", "ts"] and got.rows() == [(7, 1700000000000001)] * 3


@pytest.mark.parametrize(("text", "message"), [
    (GOOD + GOOD.replace(b'"tid":8', b'"tid":-8'), "line 2, field 3: not an integer in the field's range"),
    (GOOD + GOOD.replace(b'"tid":8', b'"tid":4294967296'), "line 2, field 3: not an integer"),
    (GOOD.replace(b'"ret":-9', b'"ret":-9223372036854775809'), "line 1, field 7: not an integer"),
    (GOOD.replace(b'"ret":-9', b'"ret":18446744073709551616'), "line 1, field 7: not an integer"),
    (GOOD.replace(b'"ret":-9', b'"ret":123456789012345678901'), "line 1, field 7: not an integer"),
    (GOOD.replace(b'"read"', b'"re\\"ad"'), "line 1, field 1: not a plain string"),
    (GOOD.replace(b'"read"', b'"re\x01ad"'), "line 1, field 1: not a plain string"),
    (GOOD.replace(b'"read"', b'"read'), "line 1"),
    (GOOD * 2 + GOOD.replace(b'"ph":1', b'"ph":4'), "line 3, field 6: the text between values differs"),
    (GOOD + GOOD[:-1], "line 2: the member ends inside the line"),
    (GOOD + GOOD[:40], "line 2"),
    (GOOD.replace(b"}}\n", b"}} \n"), "line 1: the line goes on after its last value"),
    (GOOD + b"\n", "line 2, field 1: the text between values differs"),
    (GOOD.replace(b'"read"', b'"r\xffad"'), "a name value is not UTF-8"),
])
def test_a_line_that_breaks_the_shape_is_refused_by_number(text, message):
    with pytest.raises(MalformedMember, match=message.replace("(", r"\(")):
        shape_events(text, SHAPE)


def test_an_empty_member_has_no_rows():
    assert shape_events(b"", SHAPE).height == 0


@pytest.mark.parametrize(("tokens", "kinds", "error"), [
    ((b"{",), "q", ValueError), ((b"{", b"}"), "", ValueError), ((b"{", b"}"), "x", ValueError),
    ((b"{", "}"), "q", TypeError), ((b"{",) * 34, "q" * 33, ValueError),
])
def test_bad_templates_are_refused(tokens, kinds, error):
    with pytest.raises(error):
        _core.parse_shape(b"{1}\n", tokens, kinds)
