"""Python spans from the call ids of I/O events' stacks (ioobserve.python.spans), on a
hand-built thread whose calls are known."""

from __future__ import annotations

import polars as pl

from ioobserve import schema as s
from ioobserve.python.spans import STACK_TABLE_SCHEMA, with_python_spans


def _frames(*calls: tuple[str, int]) -> list[dict]:
    """Innermost first: (function, call id)."""
    return [{"function": name, "file": "/w/x.py", "line": 10 + i, "call": call} for i, (name, call) in enumerate(calls)]


# main() calls getitem() twice; the first getitem calls load() twice (two reads in the
# first load, one in the second); the second getitem reads through load() once.
STACKS = pl.DataFrame({"stack": [1, 2, 3], "frames": [
    _frames(("load", 2), ("getitem", 1), ("main", 9)),
    _frames(("load", 4), ("getitem", 1), ("main", 9)),
    _frames(("load", 6), ("getitem", 5), ("main", 9)),
]}, schema=STACK_TABLE_SCHEMA)


def _events() -> pl.DataFrame:
    rows = [(1000, 100, 1), (2000, 100, 1), (3000, 100, 2), (4000, 100, 3), (5000, 100, None)]
    frame = pl.DataFrame([(ts, dur, 7, 7, stack) for ts, dur, stack in rows], orient="row",
                         schema={s.TS: pl.UInt64, s.DUR: pl.UInt64, s.PID: pl.UInt32, s.TID: pl.UInt32, s.PY_STACK: pl.UInt32})
    missing = [pl.lit(None, dtype).alias(name) for name, dtype in s.EVENT_SCHEMA.items() if name not in frame.columns]
    return frame.with_columns(missing).with_columns(pl.lit(s.LAYER_SYSCALL).alias(s.LAYER), pl.lit("read").alias(s.OP)
                                                    ).select(list(s.EVENT_SCHEMA)).cast(s.EVENT_SCHEMA)


def test_spans_nest_by_call_and_parent_the_io():
    out = with_python_spans(_events(), STACKS)
    spans = out.filter(pl.col(s.LAYER) == s.LAYER_PYTHON)
    by_start = {(row[s.OP], row[s.TS] + row[s.DUR]): row for row in spans.iter_rows(named=True)}
    assert sorted((op, end) for op, end in by_start) == [
        ("getitem", 3100), ("getitem", 4100), ("load", 2100), ("load", 3100), ("load", 4100), ("main", 4100)]
    main = by_start[("main", 4100)]
    first_getitem, second_getitem = by_start[("getitem", 3100)], by_start[("getitem", 4100)]
    assert main[s.PARENT_TS] is None and main[s.TS] < 1000
    assert first_getitem[s.PARENT_TS] == second_getitem[s.PARENT_TS] == main[s.TS]
    assert by_start[("load", 2100)][s.PARENT_TS] == first_getitem[s.TS] < by_start[("load", 2100)][s.TS] < 1000
    assert by_start[("load", 3100)][s.PARENT_TS] == first_getitem[s.TS]
    assert by_start[("load", 4100)][s.PARENT_TS] == second_getitem[s.TS]
    assert first_getitem[s.PY_FUNCTION] == "getitem" and first_getitem[s.PY_LINE] == 11
    # Each read's parent is its innermost span; the unstacked read keeps none.
    reads = out.filter(pl.col(s.LAYER) == s.LAYER_SYSCALL).sort(s.TS)
    assert reads.get_column(s.PARENT_TS).to_list() == [
        by_start[("load", 2100)][s.TS], by_start[("load", 2100)][s.TS], by_start[("load", 3100)][s.TS],
        by_start[("load", 4100)][s.TS], None]
    assert out.schema == pl.Schema(s.EVENT_SCHEMA)


def test_an_io_of_the_caller_between_two_same_calls_splits_them():
    """Two load(2) runs with a getitem-level read between them are two calls."""
    stacks = pl.DataFrame({"stack": [1, 2], "frames": [
        _frames(("load", 2), ("getitem", 1)), _frames(("getitem", 1))]}, schema=STACK_TABLE_SCHEMA)
    events = _events().head(3).with_columns(pl.Series(s.PY_STACK, [1, 2, 1], pl.UInt32))
    spans = with_python_spans(events, stacks).filter(pl.col(s.LAYER) == s.LAYER_PYTHON)
    assert sorted(spans.get_column(s.OP).to_list()) == ["getitem", "load", "load"]
