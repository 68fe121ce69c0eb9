"""Python spans from the stacks of I/O events and the levels each shares with the thread's
previous stacked event (ioobserve.python.spans), on a hand-built thread whose calls are known."""

from __future__ import annotations

import polars as pl

from ioobserve.data import schema as s
from ioobserve.python.spans import LEVELS_SCHEMA, PY_SAME, SpanBuilder

MAIN_GETITEM_LOAD, MAIN_GETITEM = 1, 2


def _levels(*stacks: tuple[int, list[str]]) -> pl.DataFrame:
    """LEVELS_SCHEMA rows: (stack id, functions outermost first)."""
    rows = [(stack_id, level, len(names), name, "/w/x.py", 10 + level)
            for stack_id, names in stacks for level, name in enumerate(names)]
    return pl.DataFrame(rows, schema=LEVELS_SCHEMA, orient="row")


LEVELS = _levels((MAIN_GETITEM_LOAD, ["main", "getitem", "load"]), (MAIN_GETITEM, ["main", "getitem"]))


def _events(rows: list[tuple]) -> pl.DataFrame:
    """Enriched events of thread 7 from (ts, stack, same) rows, each 100 ns long."""
    frame = pl.DataFrame([(ts, 100, 7, 7, stack, same) for ts, stack, same in rows], orient="row", schema={
        s.TS: pl.UInt64, s.DUR: pl.UInt64, s.PID: pl.UInt32, s.TID: pl.UInt32, s.PY_STACK: pl.UInt32, PY_SAME: pl.UInt32})
    missing = [pl.lit(None, dtype).alias(name) for name, dtype in s.EVENT_SCHEMA.items() if name not in frame.columns]
    return frame.with_columns(missing).with_columns(pl.lit(s.LAYER_SYSCALL).alias(s.LAYER), pl.lit("read").alias(s.OP)
                                                    ).select(*s.EVENT_SCHEMA, PY_SAME).cast(s.EVENT_SCHEMA)


# main() calls getitem() twice; the first getitem calls load() twice (two reads in the first
# load, one in the second); the second getitem reads through load() once; then a read with
# no Python stack.
DATASET = [(1000, MAIN_GETITEM_LOAD, 0), (2000, MAIN_GETITEM_LOAD, 3), (3000, MAIN_GETITEM_LOAD, 2),
           (4000, MAIN_GETITEM_LOAD, 1), (5000, None, None)]


def _spans(batches: list[list[tuple]]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(events parented, spans) of the batches given one after the other, then the end."""
    builder, events, spans = SpanBuilder(), [], []
    for batch in batches:
        parented, ended = builder.add(_events(batch), LEVELS)
        events.append(parented)
        spans.append(ended)
    spans.append(builder.close())
    return pl.concat(events).sort(s.TS), pl.concat(spans).sort(s.TS, s.PY_FRAME)


def test_spans_nest_by_call_and_parent_the_io():
    events, spans = _spans([DATASET])
    by_end = {(row[s.OP], row[s.TS] + row[s.DUR]): row for row in spans.iter_rows(named=True)}
    assert sorted(by_end) == [
        ("getitem", 3100), ("getitem", 4100), ("load", 2100), ("load", 3100), ("load", 4100), ("main", 4100)]
    main = by_end[("main", 4100)]
    first_getitem, second_getitem = by_end[("getitem", 3100)], by_end[("getitem", 4100)]
    assert main[s.PARENT_TS] is None and main[s.TS] < 1000
    assert first_getitem[s.PARENT_TS] == second_getitem[s.PARENT_TS] == main[s.TS]
    assert by_end[("load", 2100)][s.PARENT_TS] == first_getitem[s.TS] < by_end[("load", 2100)][s.TS] < 1000
    assert by_end[("load", 3100)][s.PARENT_TS] == first_getitem[s.TS]
    assert by_end[("load", 4100)][s.PARENT_TS] == second_getitem[s.TS]
    # A span names its code by its first event's stack and the frame of it (one up from load):
    # its function, file and line are that frame's, named where names are shown (ioobserve.data.naming).
    assert (first_getitem[s.PY_STACK], first_getitem[s.PY_FRAME]) == (MAIN_GETITEM_LOAD, 1)
    assert spans.get_column(s.LAYER).unique().to_list() == [s.LAYER_PYTHON]
    # Each read's parent is its innermost span; the read without a stack keeps none.
    assert events.get_column(s.PARENT_TS).to_list() == [
        by_end[("load", 2100)][s.TS], by_end[("load", 2100)][s.TS], by_end[("load", 3100)][s.TS],
        by_end[("load", 4100)][s.TS], None]
    assert PY_SAME not in events.columns


def test_spans_built_batch_by_batch_are_the_spans_of_the_whole():
    whole = _spans([DATASET])
    one_by_one = _spans([[row] for row in DATASET])
    assert one_by_one[0].equals(whole[0]) and one_by_one[1].equals(whole[1])


def test_an_io_of_the_caller_between_two_same_calls_splits_them():
    """load() twice from one line of getitem, with a read of getitem's own between them: the
    kernel says the third read shares only main and getitem, so there are two load calls."""
    _, spans = _spans([[(1000, MAIN_GETITEM_LOAD, 0), (2000, MAIN_GETITEM, 2), (3000, MAIN_GETITEM_LOAD, 2)]])
    assert sorted(spans.get_column(s.OP).to_list()) == ["getitem", "load", "load", "main"]


def test_a_span_stays_open_until_its_call_is_left_or_its_process_ends():
    builder = SpanBuilder()
    _, ended = builder.add(_events(DATASET[:2]), LEVELS)
    assert ended.is_empty()  # main, getitem and load still hold the thread's last event
    assert builder.close([8]).is_empty()  # another process's end ends none of them
    assert sorted(builder.close([7]).get_column(s.OP).to_list()) == ["getitem", "load", "main"]
    assert builder.close().is_empty()


def test_an_event_with_a_cut_stack_neither_ends_nor_continues_a_span():
    """A read made deeper than --py-depth between two reads of one load() call: its stack has
    no levels and the kernel compared the third read with the first, so load() is one span."""
    _, spans = _spans([[(1000, MAIN_GETITEM_LOAD, 0)], [(2000, 99, 0)], [(3000, MAIN_GETITEM_LOAD, 3)]])
    assert sorted(spans.get_column(s.OP).to_list()) == ["getitem", "load", "main"]
