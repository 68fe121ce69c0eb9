"""Path arguments matched to their events by the compiled core (csrc/match.c, through
Enricher._join_names), as the Polars joins it replaced matched them (tests/oracles)."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ioobserve import _core
from ioobserve.collect.context_tables import ContextTables
from ioobserve.collect.enrich import NAME_WAIT_NS, Enricher
from ioobserve.data import schema as s
from tests.oracles.names_polars import join_names

CALLS = st.tuples(st.integers(1, 4), st.integers(0, 6))  # (tid, ts): few, so that they meet


@settings(max_examples=200, deadline=None)
@given(events=st.lists(CALLS, max_size=30),
       names=st.lists(st.tuples(CALLS, st.sampled_from([0, 1, 2, 3]), st.text(max_size=4)), max_size=30,
                      unique_by=lambda name: (name[0], name[1])))
def test_names_match_as_the_polars_joins_did(events, names):
    frame = pl.DataFrame({"tid": [e[0] for e in events], "ts_ns": [e[1] + NAME_WAIT_NS for e in events],
                          "row": list(range(len(events)))}, schema={"tid": pl.UInt32, "ts_ns": pl.UInt64, "row": pl.UInt32})
    table = pl.DataFrame({"tid": [n[0][0] for n in names], "ts_ns": [n[0][1] + NAME_WAIT_NS for n in names],
                          "index": [n[1] for n in names], "path": [n[2] for n in names]},
                         schema={"tid": pl.UInt32, "ts_ns": pl.UInt64, "index": pl.UInt16, "path": pl.String})
    enricher = Enricher(ContextTables(), 0)
    enricher._names = table  # noqa: SLF001 - the names waiting for their events
    got = enricher._join_names(frame)  # noqa: SLF001
    expected, left = join_names(frame, table)
    columns = ["row", "name_path", "name_path2", s.PY_MODULE]
    assert got.select(columns).sort("row").rows() == expected.select(columns).sort("row").rows()
    assert enricher._names.rows() == left.rows()  # noqa: SLF001 - none is older than NAME_WAIT_NS here


def test_match_names_refuses_columns_of_different_lengths():
    tid, ts = bytes(4), bytes(8)
    with pytest.raises(ValueError, match="differ in length"):
        _core.match_names(tid, ts + ts, tid, ts, bytes(2))
    with pytest.raises(ValueError, match="whole number"):
        _core.match_names(tid + b"x", ts, tid, ts, bytes(2))
