"""The kernel's Python chains and code objects as named frames and stack ids.

The collector's worker adds each batch's records, then resolves the chains of its events
(once per chain) into stack ids: all of a batch's chains in one call into the compiled
core (ioobserve._core.Stacks, csrc/stacks.c), which keeps the records, the line tables and
the frame numbers in hash tables. A stack is its frames' code and line, innermost first:
which call a frame is does not make another stack (the kernel says it per event, for the
spans of ioobserve.python.spans), so identical stacks of any process share one id. Stack ids
count from 1 per recording; the trace writes each stack's frames once per file, before the
first event using it.

Only the KEPT_CHAINS chains used last are kept: a chain's record is needed only to resolve
it, and the kernel sends a chain again once its own table (py_chains_seen in
python_stacks.bpf.c, KERNEL_CHAINS_SEEN) has forgotten it, so keeping twice as many by last
use leaves a chain unresolved only if the kernel's approximate LRU kept one far older than
ours (counted in unknown_chains).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from ioobserve import _core
from ioobserve.data import schema as s
from ioobserve.data.model import KEPT_CHAINS, NO_LINE, Frame, Stack
from ioobserve.python.spans import LEVELS_SCHEMA

MAX_FRAMES_KEPT = 1 << 20  # distinct frames numbered before the numbering starts over


class PythonStacks:
    """Chains and code objects by process; stacks by id (used by one thread)."""

    def __init__(self, kept: int = KEPT_CHAINS):
        self._table = _core.Stacks(kept, MAX_FRAMES_KEPT, Frame, Stack)

    @property
    def unknown_chains(self) -> int:
        """Events' chains asked for whose record was lost."""
        return self._table.unknown_chains

    def add(self, records: list[bytes]) -> None:
        """Chain and code records from the kernel: ring blobs (decode.AuxBatch.python)."""
        for blob in records:
            self._table.add(blob)

    def forget(self, pids: list[int]) -> None:
        """Processes gone a while ago: their code objects will not be seen again."""
        if pids:
            self._table.forget(sorted(set(pids)))

    def ids(self, chains: pl.Series) -> pl.Series:
        """The stack id of each event's chain (py_chain, 0: none), null where it has none or
        its record was lost: each distinct chain resolved once, the events given their ids
        in the same call (no join)."""
        column = chains.cast(pl.UInt64).to_numpy()
        ids = pl.Series(s.PY_STACK, np.frombuffer(self._table.resolve(np.ascontiguousarray(column)), dtype=np.uint32))
        return ids.replace(0, None)

    def levels(self, stack_ids: pl.Series) -> pl.DataFrame:
        """LEVELS_SCHEMA rows of the distinct stacks among `stack_ids` (a batch's few); none for
        a stack cut at the depth walked, whose levels cannot be counted from the outermost."""
        columns: dict[str, list] = {name: [] for name in LEVELS_SCHEMA}
        ids, levels, depths, functions, files, lines = columns.values()
        kept = self._table.stacks
        for stack_id in stack_ids.drop_nulls().unique().to_list():
            stack = kept.get(stack_id)
            if stack is None or stack.truncated:
                continue
            frames = stack.frames[::-1]  # outermost first
            depth = len(frames)
            ids += [stack_id] * depth
            levels += range(depth)
            depths += [depth] * depth
            functions += [frame.function for frame in frames]
            files += [frame.file for frame in frames]
            lines += [frame.line if frame.line != NO_LINE else None for frame in frames]
        return pl.DataFrame(columns, schema=LEVELS_SCHEMA)

    def take_new(self) -> dict[int, Stack]:
        """Stacks resolved since the last call (for the sinks, before their events)."""
        return self._table.take_new()
