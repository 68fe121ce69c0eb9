"""The kernel's Python chains and code objects as named frames and stack ids.

The collector's worker adds each batch's records, then resolves the chains of its events
(once per chain) into a stack id and its innermost frame; line tables are parsed when a
line is first asked of them. A stack is its frames' code and line, innermost first: which
call a frame is does not make another stack (the kernel says it per event, for the spans of
ioobserve.python.spans), so identical stacks of any process share one id. Stack ids count
from 1 per recording; the trace writes each stack's frames once per file, before the first
event using it.

Only the KEPT_CHAINS chains used last are kept: a chain's record is needed only to resolve
it, and the kernel sends a chain again once its own table (py_chains_seen in
python_stacks.bpf.c, KERNEL_CHAINS_SEEN) has forgotten it, so keeping twice as many by last
use leaves a chain unresolved only if the kernel's approximate LRU kept one far older than
ours (counted in unknown_chains).
"""

from __future__ import annotations

from collections import OrderedDict

import polars as pl

from ioobserve import schema as s
from ioobserve.decode import PyChainRecord, PyCodeRecord
from ioobserve.model import KEPT_CHAINS, Frame, Stack
from ioobserve.python.linetable import NO_LINE, LineTable
from ioobserve.python.spans import LEVELS_SCHEMA

UNKNOWN = "<unknown>"  # a code object whose record was lost
MAX_FRAMES_KEPT = 1 << 20  # distinct frames remembered (processes gone are forgotten sooner)


class _Code:
    """A code object's names, and its line table parsed on first use."""

    def __init__(self, record: PyCodeRecord):
        self.function = record.name or UNKNOWN
        self.file = record.file
        self._record = record
        self._lines: LineTable | None = None

    def line(self, instr: int) -> int:
        """The line of the instruction `instr` code units in (NO_LINE if unknown)."""
        if self._lines is None:
            record = self._record
            self._lines = LineTable.parse(record.table, record.firstlineno, record.version)
        return self._lines.line(instr * 2)


STACK_FRAME_SCHEMA = {"py_chain": pl.UInt64, s.PY_STACK: pl.UInt32, s.PY_FUNCTION: pl.String, s.PY_FILE: pl.String,
                      s.PY_LINE: pl.Int32}



class PythonStacks:
    """Chains and code objects by process; stacks by id (used by one thread)."""

    def __init__(self, kept: int = KEPT_CHAINS):
        self._kept = kept
        self._codes: dict[tuple[int, int], _Code] = {}
        # (pid, code, instruction) -> its Frame: the stacks of a process share most frames (an
        # import's outer frames, a training loop's), and a frame's line costs a table lookup.
        self._frames: dict[tuple[int, int, int], Frame] = {}
        self._chains: OrderedDict[int, PyChainRecord] = OrderedDict()  # records not resolved yet, oldest first
        # chain -> (stack id, innermost frame), and stack -> id: least recently used first
        self._resolved: OrderedDict[int, tuple[int, Frame]] = OrderedDict()
        self._ids: OrderedDict[Stack, int] = OrderedDict()
        self._stacks: dict[int, Stack] = {}  # id -> stack, for the ids in _ids
        self._next_id = 1
        self._new: dict[int, Stack] = {}
        self.unknown_chains = 0  # events whose chain record was lost

    def add(self, chains: list[PyChainRecord], codes: list[PyCodeRecord]) -> None:
        """Records from the kernel."""
        for code in codes:
            self._codes[(code.pid, code.code)] = _Code(code)
        for chain in chains:
            if chain.chain not in self._resolved:  # else the kernel forgot it before we did
                self._chains[chain.chain] = chain

    def forget(self, pids: list[int]) -> None:
        """Processes gone a while ago: their code objects will not be seen again."""
        gone = set(pids)
        if gone:
            self._codes = {key: code for key, code in self._codes.items() if key[0] not in gone}
            self._frames = {key: frame for key, frame in self._frames.items() if key[0] not in gone}
            self._chains = OrderedDict((key, chain) for key, chain in self._chains.items() if chain.pid not in gone)

    def frame(self, chains: pl.Series) -> pl.DataFrame:
        """py_chain -> stack id, function, file and line of the innermost frame, for the
        distinct non-zero chains of a batch (unknown chains get nulls)."""
        rows = []
        for chain in chains.unique().to_list():
            if not chain:
                continue
            resolved = self._resolved.get(chain)
            if resolved is None:
                resolved = self._resolve(chain)
                if resolved is None:
                    self.unknown_chains += 1
                    continue
            else:
                self._resolved.move_to_end(chain)
            stack_id, top = resolved
            rows.append((chain, stack_id, top.function, top.file, top.line if top.line != NO_LINE else None))
        self._trim()
        return pl.DataFrame(rows, schema=STACK_FRAME_SCHEMA, orient="row")

    def _trim(self) -> None:
        """Forget the chains and stacks used least recently, beyond the kept number."""
        for table in (self._resolved, self._ids, self._chains):
            for _ in range(len(table) - self._kept):
                key, value = table.popitem(last=False)
                if table is self._ids:
                    self._stacks.pop(value, None)

    def levels(self, stack_ids: pl.Series) -> pl.DataFrame:
        """LEVELS_SCHEMA rows of the distinct stacks among `stack_ids` (a batch's few); none for
        a stack cut at the depth walked, whose levels cannot be counted from the outermost."""
        rows = []
        for stack_id in stack_ids.drop_nulls().unique().to_list():
            stack = self._stacks.get(stack_id)
            if stack is None or stack.truncated:
                continue
            depth = len(stack.frames)
            for level, frame in enumerate(reversed(stack.frames)):
                rows.append((stack_id, level, depth, frame.function, frame.file, frame.line if frame.line != NO_LINE else None))
        return pl.DataFrame(rows, schema=LEVELS_SCHEMA, orient="row")

    def _resolve(self, chain: int) -> tuple[int, Frame] | None:
        record = self._chains.pop(chain, None)
        if record is None:
            return None
        pid, known, frames = record.pid, self._frames, []
        if len(known) > MAX_FRAMES_KEPT:
            known.clear()
        for code_addr, instr in zip(record.frames["code"].tolist(), record.frames["instr"].tolist()):
            frame = known.get((pid, code_addr, instr))
            if frame is None:
                code = self._codes.get((pid, code_addr))
                if code is None:  # its record was lost, or comes later: not kept
                    frame = Frame(UNKNOWN, "", NO_LINE)
                else:
                    frame = known[(pid, code_addr, instr)] = Frame(code.function, code.file, code.line(instr))
            frames.append(frame)
        stack = Stack(tuple(frames), record.truncated)
        stack_id = self._ids.get(stack)
        if stack_id is None:
            stack_id = self._ids[stack] = self._next_id
            self._stacks[stack_id] = stack
            self._next_id += 1
        else:
            self._ids.move_to_end(stack)
        # Given to the sinks even when known: a sink keeping only the stacks used last may
        # have forgotten one that a new chain of the same frames brings back.
        self._new[stack_id] = stack
        self._resolved[chain] = (stack_id, frames[0])
        return self._resolved[chain]

    def take_new(self) -> dict[int, Stack]:
        """Stacks resolved since the last call (for the sinks, before their events)."""
        new, self._new = self._new, {}
        return new
