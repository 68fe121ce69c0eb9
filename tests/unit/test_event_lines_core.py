"""The compiled event lines (ioobserve/csrc/lines.c) against the Polars oracle, byte for byte."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ioobserve import _core
from ioobserve.data import events as ev
from ioobserve.data import schema as s
from ioobserve.trace.lines import LAYER_TYPES, event_lines
from tests.event_rows import ROW
from tests.oracles import lines_polars


def _compare(frame: pl.DataFrame, precision: str, prefix: str = "0a1b2c3d") -> None:
    made = event_lines(frame, precision, prefix)
    expected = lines_polars.event_lines(frame, precision, prefix)
    assert list(made) == list(expected)  # the same groups, in the same order
    for key, group in made.items():
        text, rows = expected[key]
        assert bytes(group.text) == text, key
        assert group.ts.tolist() == rows.get_column(s.TS).to_list()
        assert group.pids.tolist() == rows.get_column(s.PID).to_list()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(ROW, max_size=40), precision=st.sampled_from(["us", "ns"]))
def test_lines_are_the_oracles_byte_for_byte(rows, precision):
    _compare(pl.DataFrame(rows, schema=s.ID_SCHEMA), precision)


def test_a_batch_of_many_rows_and_shapes_matches(rng=np.random.default_rng(46)):
    """A batch of the size the collector hands over: many shapes, ties in time, nulls."""
    n = 20_000
    ts = 1_700_000_000_000_000_000 + np.sort(rng.integers(0, 5_000_000, n)).astype(np.uint64)
    rng.shuffle(ts[: n // 3])  # part out of time order, with ties
    null = rng.random(n) < 0.4
    frame = pl.DataFrame({
        s.TS: ts, s.DUR: rng.integers(0, 10_000, n, dtype=np.uint64), s.PID: rng.integers(1, 60, n, dtype=np.uint32),
        s.TID: rng.integers(1, 200, n, dtype=np.uint32), s.UID: pl.Series(rng.integers(0, 3, n, dtype=np.uint32)).set(pl.Series(null), None),
        s.LAYER: rng.choice(sorted(LAYER_TYPES), n), s.OP: rng.choice(["read", "pread64", "openat", "__getitem__"], n),
        s.FILE: pl.Series(rng.integers(0, 500, n, dtype=np.uint32)).set(pl.Series(~null), None),
        s.FILE2: pl.Series(rng.integers(0, 500, n, dtype=np.uint32)).set(pl.Series(rng.random(n) < 0.95), None),
        s.FD: rng.integers(-1, 40, n, dtype=np.int32), s.RET: rng.integers(-5, 5000, n), s.BYTES_REQ: rng.integers(0, 5000, n, dtype=np.uint64),
        s.OFFSET: rng.integers(-1, 1 << 40, n), s.CGROUP: pl.Series(rng.integers(0, 9, n, dtype=np.uint64)).set(pl.Series(~null), None),
        s.ARG: rng.integers(0, 3, n, dtype=np.uint64), s.FLAGS: rng.choice([0, ev.F_FILE, ev.F_PARENT | ev.F_FILE], n).astype(np.uint16),
        s.PARENT_TS: pl.Series(ts - 500).set(pl.Series(rng.random(n) < 0.7), None),
        s.PY_STACK: pl.Series(rng.integers(0, 900, n, dtype=np.uint32)).set(pl.Series(null), None),
        s.PY_FRAME: pl.Series(rng.integers(0, 3, n, dtype=np.uint16)).set(pl.Series(null), None),
        s.PY_MODULE: pl.Series(rng.choice(["torch.nn", "données/x", "a b"], n)).set(pl.Series(rng.random(n) < 0.9), None),
        s.STATUS: pl.Series(rng.choice([200, 206, 404], n).astype(np.uint16)).set(pl.Series(rng.random(n) < 0.9), None),
    }, schema=s.ID_SCHEMA)
    for precision in ("us", "ns"):
        _compare(frame, precision)


def test_the_parent_flag_is_the_events_module():
    assert _core.F_PARENT == ev.F_PARENT


def _arguments(rows: int = 2) -> list:
    columns = (tuple(np.zeros(rows, np.uint64) for _ in range(19)) + (np.full(rows, 0xFFFFFFFF, np.uint32),)  # no module
               + (np.zeros(rows, np.uint16),))  # no status
    return [np.arange(rows, dtype=np.int64), columns, (None,) * 21, [b"read"], [], False, b"ab", lambda layer, shape: (b"{",) * (bin(shape).count("1") + 1)]


@pytest.mark.parametrize(("change", "message"), [
    (lambda a: a.__setitem__(0, np.array([0, 2], np.int64)), "is not a row"),
    (lambda a: a.__setitem__(0, np.array([0, -1], np.int64)), "is not a row"),
    (lambda a: a.__setitem__(1, a[1][:5] + (np.zeros(3, np.uint64),) + a[1][6:]), "not 2 rows"),
    (lambda a: a.__setitem__(1, (np.array([0, 1], np.uint64),) + a[1][1:]), "past the 1 strings"),
    (lambda a: a.__setitem__(2, (np.zeros(3, bool),) + (None,) * 20), "validity bytes"),
    (lambda a: a.__setitem__(1, a[1][:2] + (np.zeros(2, np.float64),) + a[1][3:]), "integer array"),
    (lambda a: a.__setitem__(7, lambda layer, shape: (b"{",)), "must give a tuple"),
    (lambda a: a.__setitem__(6, b"x" * 65), "at most 64 bytes"),
])
def test_inputs_out_of_bounds_are_refused(change, message):
    arguments = _arguments()
    change(arguments)
    with pytest.raises((ValueError, TypeError), match=message):
        _core.event_lines(*arguments)


def test_an_empty_batch_gives_no_groups():
    text, groups, written, pids = _core.event_lines(*_arguments(0))
    assert (text, groups, written, pids) == (b"", [], b"", b"")
