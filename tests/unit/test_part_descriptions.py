"""A part's descriptions (ioobserve.trace.write.format_thread), without the writer's threads: each id is
described once per part, before its events, and the event columns show what the lines say."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from ioobserve.data import schema as s
from ioobserve.data.model import Frame, Stack
from ioobserve.trace.lines import StackLines, metadata_line
from ioobserve.trace.write.format_thread import PartDescriptions
from tests.batches import Batches
from tests.sample_trace import PY_STACKS, sample_frame


def _names(lines: list[bytes]) -> list[str]:
    return [json.loads(line)["name"] for line in lines]


def test_each_id_is_described_once_per_part():
    batches, descriptions = Batches(), PartDescriptions(1, "0" * 16)
    descriptions.keep_stacks(PY_STACKS)
    frame, tables = batches(sample_frame(), PY_STACKS)
    _, first = descriptions.describe(frame.select(list(s.ID_SCHEMA)), tables)
    # pid 10's context changes three times (its tags), pid 13 has one, pid 12 none
    assert sorted(_names(first)) == sorted(["PS", "FH", "FH", "CG", "CG", "US", "PC", "PC", "PC", "PC"])
    _, again = descriptions.describe(frame.select(list(s.ID_SCHEMA)), tables)
    # files, cgroups, users and stacks are described in this part already (the contexts go back
    # from the last event's to the first's: changes, so PC lines again)
    assert set(_names(again)) <= {"PC"}
    prefix = descriptions.file_prefix
    descriptions.new_part()
    _, next_part = descriptions.describe(frame.select(list(s.ID_SCHEMA)), tables)
    assert sorted(_names(next_part)) == sorted(_names(first))  # a part stands alone
    assert descriptions.file_prefix != prefix  # file ids of different parts never meet
    fh = [json.loads(line)["args"]["value"] for line in next_part if json.loads(line)["name"] == "FH"]
    assert all(value.startswith(descriptions.file_prefix) for value in fh)


def test_the_frame_shows_what_the_lines_say():
    """Files the tables do not name are null; uid and cgroup are null where the process's
    first PR line in the part says the same."""
    batches, descriptions = Batches(), PartDescriptions(1, "0" * 16)
    frame, tables = batches(sample_frame(), PY_STACKS)
    ids = frame.select(list(s.ID_SCHEMA))
    descriptions.process_line(10, 0, 1)  # pid 10 as its events have it
    descriptions.process_line(12, 0, 0)  # pid 12's cgroup differs from its PR line's
    shown, _ = descriptions.describe(ids, tables.__class__(**{**tables.__dict__, "files": tables.files.head(1)}))
    by_pid = {pid: rows for pid, rows in shown.group_by(s.PID)}
    assert by_pid[(10,)].get_column(s.UID).null_count() == by_pid[(10,)].height
    assert by_pid[(10,)].get_column(s.CGROUP).null_count() == by_pid[(10,)].height
    assert by_pid[(12,)].get_column(s.CGROUP).to_list() == [1]
    named = tables.files.head(1).get_column(s.FILE).to_list()
    assert set(shown.get_column(s.FILE).drop_nulls().to_list()) <= set(named)
    assert shown.get_column(s.FILE2).drop_nulls().to_list() == []  # the rename's target is not in the head(1) tables


def test_a_stack_used_but_unknown_is_counted_not_described():
    batches, descriptions = Batches(), PartDescriptions(1, "0" * 16)
    frame, tables = batches(sample_frame())  # stack 1 used, never kept
    _, lines = descriptions.describe(frame.select(list(s.ID_SCHEMA)), tables)
    assert "PS" not in _names(lines)
    assert descriptions.stacks_missing == 1


_FRAMES = st.builds(Frame, st.text(max_size=12), st.text(max_size=12), st.integers(-1, 1 << 40))


@given(stacks=st.lists(st.builds(Stack, st.lists(_FRAMES, max_size=6).map(tuple), st.booleans()), max_size=8),
       pid=st.integers(0, 1 << 31), stack_id=st.integers(1, 1 << 31))
def test_stack_lines_are_byte_for_byte_the_metadata_lines(stacks, pid, stack_id):
    """A PS line made from frames' cached JSON, as json.dumps makes the whole record."""
    made = StackLines()
    for stack in stacks + stacks:  # the second time from the cache
        frames = [{"function": f.function, "file": f.file, "line": f.line} for f in stack.frames]
        expected = metadata_line("PS", pid, pid, {"hhash": "ab12", "stack": stack_id, "frames": frames,
                                                  "truncated": stack.truncated})
        assert made.line(pid, "ab12", stack_id, stack) == expected
