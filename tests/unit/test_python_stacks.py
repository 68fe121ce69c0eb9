"""Python stacks as the collector keeps them (ioobserve.python.stacks over the compiled
core's _core.Stacks): a stack is its frames' functions and lines, shared by every chain that
has them; only the chains used last are kept, and a forgotten chain the kernel sends again is
resolved and announced again. Records are made as the kernel writes them."""

from __future__ import annotations

import polars as pl

from ioobserve.data.model import KEPT_CHAINS
from ioobserve.python import stacks as python_stacks
from ioobserve.python.stacks import PythonStacks
from tests.unit.fake_ring import ring_blob
from tests.unit.stack_records import CODE, PID, chain_record, code_record

CODES = [code_record(CODE + n, f"f{n}") for n in range(8)]


def _add(stacks: PythonStacks, *records: bytes) -> None:
    stacks.add([ring_blob(list(records))])


def _chain(chain: int, code: int | None = None) -> bytes:
    """One frame: function f<code> (default: f<chain>), chain id `chain`."""
    return chain_record(chain, [chain if code is None else code])


def _stack_ids(stacks: PythonStacks, *chains: int) -> dict[int, int]:
    """Each chain's stack id, asked as one batch's events."""
    return dict(zip(chains, stacks.ids(pl.Series(list(chains), dtype=pl.UInt64)).to_list()))


def test_the_chains_used_last_are_kept_and_an_older_one_is_resolved_again_when_sent_again():
    stacks = PythonStacks(kept=2)
    _add(stacks, _chain(1), _chain(2), _chain(3), *CODES)
    first = _stack_ids(stacks, 1, 2)
    assert first == {1: 1, 2: 2} and set(stacks.take_new()) == {1, 2}
    assert _stack_ids(stacks, 1) == {1: 1}  # chain 1 used again: chain 2 is now the oldest
    assert _stack_ids(stacks, 3) == {3: 3}  # a third: chain 2 is forgotten
    assert _stack_ids(stacks, 1, 3) == {1: 1, 3: 3} and stacks.unknown_chains == 0
    assert _stack_ids(stacks, 2) == {2: None} and stacks.unknown_chains == 1  # the kernel still thinks we know it
    stacks.take_new()
    _add(stacks, _chain(2))  # its table forgot it too, so it sends it again
    (again,) = _stack_ids(stacks, 2).values()
    new = stacks.take_new()
    assert list(new) == [again] and new[again].frames[0].function == "f2"  # announced, for sinks that forgot it too


def test_a_chain_record_sent_again_while_still_resolved_is_not_kept_twice():
    stacks = PythonStacks(kept=4)
    _add(stacks, _chain(1), *CODES)
    assert _stack_ids(stacks, 1) == {1: 1}
    stacks.take_new()
    _add(stacks, _chain(1))
    assert _stack_ids(stacks, 1) == {1: 1} and stacks.take_new() == {}
    assert stacks._table.pending == 0  # noqa: SLF001 - what would grow for as long as the process runs


def test_chains_with_the_same_frames_share_one_stack_and_give_its_levels():
    """Two chains (other processes' or other calls' of one function) naming the same frames."""
    stacks = PythonStacks()
    _add(stacks, _chain(5, code=1), _chain(6, code=1), *CODES)
    ids = _stack_ids(stacks, 5, 6)
    assert ids[5] == ids[6] and len(stacks.take_new()) == 1
    levels = stacks.levels(pl.Series([ids[5], ids[5], None], dtype=pl.UInt32))
    assert levels.rows() == [(ids[5], 0, 1, "f1", "/job/data.py", None)]


def test_a_stack_cut_at_the_depth_walked_has_no_levels():
    """Its levels cannot be counted from the outermost frame, so it makes no spans."""
    stacks = PythonStacks()
    _add(stacks, chain_record(7, [2], truncated=True), *CODES)
    (stack_id,) = _stack_ids(stacks, 7).values()
    assert stacks.levels(pl.Series([stack_id], dtype=pl.UInt32)).is_empty()


def test_a_batch_of_chains_is_resolved_frame_by_frame_whatever_the_process():
    stacks = PythonStacks()
    other = [code_record(CODE + 0x100 + n, f"f{n}", pid=PID + 1) for n in range(8)]  # another process's code addresses
    _add(stacks, chain_record(1, [0, 1, 2]), chain_record(2, [1, 2]), chain_record(3, [0, 1, 2]),
         chain_record(4, [0x100, 0x101, 0x102], pid=PID + 1), *CODES, *other)
    ids = _stack_ids(stacks, 1, 2, 3, 4)
    assert ids[1] == ids[3] == ids[4] != ids[2]  # the same frames, whichever call or process made them
    new = stacks.take_new()
    assert [f.function for f in new[ids[1]].frames] == ["f0", "f1", "f2"]
    assert [f.function for f in new[ids[2]].frames] == ["f1", "f2"]


def test_a_frame_whose_code_record_comes_later_is_named_once_it_has():
    stacks = PythonStacks()
    _add(stacks, chain_record(1, [0, 5]), *CODES[:1])
    (first,) = _stack_ids(stacks, 1).values()
    assert [f.function for f in stacks.take_new()[first].frames] == ["f0", "<unknown>"]
    _add(stacks, chain_record(2, [0, 5]), *CODES[5:6])
    (second,) = _stack_ids(stacks, 2).values()
    assert second != first and [f.function for f in stacks.take_new()[second].frames] == ["f0", "f5"]


def test_stacks_stay_right_when_the_frame_numbering_starts_over(monkeypatch):
    monkeypatch.setattr(python_stacks, "MAX_FRAMES_KEPT", 2)
    stacks = PythonStacks()
    _add(stacks, *[chain_record(chain, [chain % 8, (chain + 1) % 8]) for chain in range(1, 30)], *CODES)
    for chain in range(1, 30):  # one at a time: each batch may start the numbering over
        (stack_id,) = _stack_ids(stacks, chain).values()
        assert [f.function for f in stacks._table.stacks[stack_id].frames] == [f"f{chain % 8}", f"f{(chain + 1) % 8}"]  # noqa: SLF001
    assert len(stacks._table.stacks) <= 2 * KEPT_CHAINS  # noqa: SLF001
