"""Python stacks as the collector keeps them (ioobserve.python.stacks): a stack is its frames'
functions and lines, shared by every chain that has them; only the chains used last are kept,
and a forgotten chain the kernel sends again is resolved and announced again."""

from __future__ import annotations

import numpy as np
import polars as pl

from ioobserve import events as ev
from ioobserve import schema as s
from ioobserve.decode import PyChainRecord, PyCodeRecord
from ioobserve.python.stacks import PythonStacks

PID, CODE = 7, 0x1000
CODES = [PyCodeRecord(PID, CODE + n, 10, f"f{n}", "/job/data.py", b"", True, (3, 11)) for n in range(8)]


def _chain(chain: int, code: int | None = None) -> PyChainRecord:
    """One frame: function f<code> (default: f<chain>), chain id `chain`."""
    frames = np.zeros(1, dtype=ev.PY_FRAME)
    frames["code"] = CODE + (chain if code is None else code)
    return PyChainRecord(PID, chain, False, frames)


def _stack_ids(stacks: PythonStacks, *chains: int) -> dict[int, int]:
    frame = stacks.frame(pl.Series(list(chains), dtype=pl.UInt64))
    return dict(zip(frame.get_column("py_chain").to_list(), frame.get_column(s.PY_STACK).to_list()))


def test_the_chains_used_last_are_kept_and_an_older_one_is_resolved_again_when_sent_again():
    stacks = PythonStacks(kept=2)
    stacks.add([_chain(1), _chain(2), _chain(3)], CODES)
    first = _stack_ids(stacks, 1, 2)
    assert first == {1: 1, 2: 2} and set(stacks.take_new()) == {1, 2}
    assert _stack_ids(stacks, 1) == {1: 1}  # chain 1 used again: chain 2 is now the oldest
    assert _stack_ids(stacks, 3) == {3: 3}  # a third: chain 2 is forgotten
    assert _stack_ids(stacks, 1, 3) == {1: 1, 3: 3} and stacks.unknown_chains == 0
    assert _stack_ids(stacks, 2) == {} and stacks.unknown_chains == 1  # the kernel still thinks we know it
    stacks.take_new()
    stacks.add([_chain(2)], [])  # its table forgot it too, so it sends it again
    (again,) = _stack_ids(stacks, 2).values()
    new = stacks.take_new()
    assert list(new) == [again] and new[again].frames[0].function == "f2"  # announced, for sinks that forgot it too


def test_a_chain_record_sent_again_while_still_resolved_is_not_kept_twice():
    stacks = PythonStacks(kept=4)
    stacks.add([_chain(1)], CODES)
    assert _stack_ids(stacks, 1) == {1: 1}
    stacks.take_new()
    stacks.add([_chain(1)], [])
    assert _stack_ids(stacks, 1) == {1: 1} and stacks.take_new() == {}
    assert len(stacks._chains) == 0  # noqa: SLF001 - what would grow for as long as the process runs


def test_chains_with_the_same_frames_share_one_stack_and_give_its_levels():
    """Two chains (other processes' or other calls' of one function) naming the same frames."""
    stacks = PythonStacks()
    stacks.add([_chain(5, code=1), _chain(6, code=1)], CODES)
    ids = _stack_ids(stacks, 5, 6)
    assert ids[5] == ids[6] and len(stacks.take_new()) == 1
    levels = stacks.levels(pl.Series([ids[5], ids[5], None], dtype=pl.UInt32))
    assert levels.rows() == [(ids[5], 0, 1, "f1", "/job/data.py", None)]


def test_a_stack_cut_at_the_depth_walked_has_no_levels():
    """Its levels cannot be counted from the outermost frame, so it makes no spans."""
    stacks = PythonStacks()
    cut = _chain(7, code=2)._replace(truncated=True)
    stacks.add([cut], CODES)
    (stack_id,) = _stack_ids(stacks, 7).values()
    assert stacks.levels(pl.Series([stack_id], dtype=pl.UInt32)).is_empty()
