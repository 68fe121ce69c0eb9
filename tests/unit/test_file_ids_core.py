"""File ids found by the compiled core's rows_by_file (csrc/match.c, through FileIds.assign)
name each event's file as the Polars version it replaced did (tests/oracles)."""

from __future__ import annotations

from collections import Counter

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from ioobserve.collect.enrich import KDEV, NAME, NAME2, FileIds
from ioobserve.data import events as ev
from ioobserve.data import schema as s
from tests.oracles import file_ids_polars

ROW = st.fixed_dictionaries({
    s.FLAGS: st.none() | st.sampled_from([0, ev.F_FILE, ev.F_FILE | ev.F_NAME, ev.F_NAME]),
    KDEV: st.none() | st.integers(1, 3), s.DEV: st.none() | st.integers(0, 2), s.INO: st.none() | st.integers(0, 3),
    NAME: st.none() | st.sampled_from(["/a", "/b", "/c/d", ""]), NAME2: st.none() | st.sampled_from(["/a", "/z"]),
})
SCHEMA = {s.FLAGS: pl.UInt16, KDEV: pl.UInt32, s.DEV: pl.UInt64, s.INO: pl.UInt64, NAME: pl.String, NAME2: pl.String}
KNOWN = pl.DataFrame({"kdev": [1, 1, 2], "ino": [1, 2, 3], "path": ["/k/one", "/k/two", "/k/three"]},
                     schema={"kdev": pl.UInt64, "ino": pl.UInt64, "path": pl.String})


def _named(frame: pl.DataFrame, files: pl.DataFrame, column: str) -> list:
    """Each row's file in `column` as (path, dev, ino), from the files table given with it."""
    by_id = {row[0]: row[1:] for row in files.iter_rows()}
    return [by_id[file_id] if file_id is not None else None for file_id in frame.get_column(column).to_list()]


@settings(max_examples=300, deadline=None)
@given(batches=st.lists(st.lists(ROW, max_size=25), min_size=1, max_size=3))
def test_each_event_names_the_file_the_polars_version_named(batches):
    """Batch after batch (a file met again keeps its id), with and without known paths."""
    ours, theirs = FileIds(), file_ids_polars.FileIds()
    ids: dict[tuple, int] = {}
    for n, rows in enumerate(batches):
        frame = pl.DataFrame(rows, schema=SCHEMA).with_row_index("row")
        known = KNOWN if n % 2 == 0 else None
        got, got_files = ours.assign(frame, known)
        expected, expected_files = theirs.assign(frame, known)
        assert got.columns == expected.columns
        for column in (s.FILE, s.FILE2):
            assert _named(got, got_files, column) == _named(expected, expected_files, column), column
        assert Counter(got_files.select(s.PATH, s.DEV, s.INO).rows()) == Counter(expected_files.select(s.PATH, s.DEV, s.INO).rows())
        for file_id, *file in got_files.iter_rows():  # one id per file, batch after batch
            assert ids.setdefault(tuple(file), file_id) == file_id
