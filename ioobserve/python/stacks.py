"""The kernel's Python chains and code objects as named frames and stack ids.

The collector's worker adds each batch's records, then resolves the chains of its events
(once per chain) into a stack id and its innermost frame: all of a batch's new chains at
once, their frames numbered by content through a join on (pid, code, instruction), so that a
stack is the tuple of its frames' numbers; line tables are parsed when a line is first
asked of them. A stack is its frames' code and line, innermost first: which
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

import numpy as np
import polars as pl

from ioobserve import events as ev
from ioobserve import schema as s
from ioobserve.decode import PyChainRecord, PyCodeRecord
from ioobserve.model import KEPT_CHAINS, Frame, Stack
from ioobserve.python.linetable import NO_LINE, LineTable
from ioobserve.python.spans import LEVELS_SCHEMA

UNKNOWN = "<unknown>"  # a code object whose record was lost
_UNKNOWN_FRAME = Frame(UNKNOWN, "", NO_LINE)
MAX_FRAMES_KEPT = 1 << 20  # distinct frames numbered before the numbering starts over


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


_FRAME_KEY = {"pid": pl.UInt32, "code": pl.UInt64, "instr": pl.UInt32}
_KNOWN_SCHEMA = {**_FRAME_KEY, "number": pl.UInt32}  # a frame met before: its number
STACK_FRAME_SCHEMA = {"py_chain": pl.UInt64, s.PY_STACK: pl.UInt32, s.PY_FUNCTION: pl.String, s.PY_FILE: pl.String,
                      s.PY_LINE: pl.Int32}



class PythonStacks:
    """Chains and code objects by process; stacks by id (used by one thread)."""

    def __init__(self, kept: int = KEPT_CHAINS):
        self._kept = kept
        self._codes: dict[tuple[int, int], _Code] = {}
        # Frames by content, numbered: a stack is the numbers of its frames. (pid, code,
        # instruction) -> number, as a table a batch's frames are joined with: the stacks of a
        # process share most frames (an import's outer frames, a training loop's).
        self._frame_numbers: dict[Frame, int] = {}
        self._frame_list: list[Frame] = []
        self._known = pl.DataFrame(schema=_KNOWN_SCHEMA)
        self._chains: OrderedDict[int, PyChainRecord] = OrderedDict()  # records not resolved yet, oldest first
        # chain -> (stack id, innermost frame), and stack -> id: least recently used first
        self._resolved: OrderedDict[int, tuple[int, Frame]] = OrderedDict()
        self._ids: OrderedDict[tuple[tuple[int, ...], bool], int] = OrderedDict()
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
            self._known = self._known.filter(~pl.col("pid").is_in(sorted(gone)))
            self._chains = OrderedDict((key, chain) for key, chain in self._chains.items() if chain.pid not in gone)

    def frame(self, chains: pl.Series) -> pl.DataFrame:
        """py_chain -> stack id, function, file and line of the innermost frame, for the
        distinct non-zero chains of a batch (unknown chains get nulls)."""
        rows, waiting = [], []
        for chain in chains.unique().to_list():
            if not chain:
                continue
            resolved = self._resolved.get(chain)
            if resolved is not None:
                self._resolved.move_to_end(chain)
                rows.append((chain, *resolved))
            elif (record := self._chains.pop(chain, None)) is not None and len(record.frames):
                waiting.append(record)
            else:
                self.unknown_chains += 1
        for record, resolved in zip(waiting, self._resolve(waiting), strict=True):
            self._resolved[record.chain] = resolved
            rows.append((record.chain, *resolved))
        self._trim()
        return pl.DataFrame(
            [(chain, stack_id, top.function, top.file, top.line if top.line != NO_LINE else None)
             for chain, stack_id, top in rows], schema=STACK_FRAME_SCHEMA, orient="row")

    def _trim(self) -> None:
        """Forget the chains and stacks used least recently, beyond the kept number."""
        for table in (self._resolved, self._ids, self._chains):
            for _ in range(len(table) - self._kept):
                key, value = table.popitem(last=False)
                if table is self._ids:
                    self._stacks.pop(value, None)
        for _ in range(len(self._stacks) - 2 * self._kept):  # stacks whose keys went when the numbering started over
            del self._stacks[next(iter(self._stacks))]

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

    def _resolve(self, records: list[PyChainRecord]) -> list[tuple[int, Frame]]:
        """(stack id, innermost frame) of each chain: its frames numbered all at once (a join),
        then one dictionary lookup per chain."""
        if not records:
            return []
        if len(self._frame_list) > MAX_FRAMES_KEPT:  # numbering starts over, and so do the stack keys made of it
            self._frame_numbers.clear()
            self._frame_list.clear()
            self._ids.clear()
            self._known = self._known.clear()
        lengths = [len(record.frames) for record in records]
        # As bytes: numpy promotes the fields of each structured array it concatenates, in Python.
        frames = np.frombuffer(b"".join([record.frames.tobytes() for record in records]), dtype=ev.PY_FRAME)
        pids = np.repeat(np.array([record.pid for record in records], dtype=np.uint32), lengths)
        numbers = self._frame_numbers_of(pids, frames["code"], frames["instr"]).tolist()
        resolved, start = [], 0
        for record, length in zip(records, lengths, strict=True):
            key = (tuple(numbers[start : start + length]), record.truncated)
            start += length
            stack_id = self._ids.get(key)
            if stack_id is None:
                stack_id = self._ids[key] = self._next_id
                self._stacks[stack_id] = Stack(tuple(self._frame_list[n] for n in key[0]), record.truncated)
                self._next_id += 1
            else:
                self._ids.move_to_end(key)
            # Given to the sinks even when known: a sink keeping only the stacks used last may
            # have forgotten one that a new chain of the same frames brings back.
            self._new[stack_id] = self._stacks[stack_id]
            resolved.append((stack_id, self._frame_list[key[0][0]]))
        return resolved

    def _frame_numbers_of(self, pids: np.ndarray, codes: np.ndarray, instrs: np.ndarray) -> np.ndarray:
        """The number of each (pid, code, instruction)'s frame. Frames met for the first time
        are read from their code object; one whose code record was lost (or comes later) is
        the unknown frame, and not kept."""
        asked = pl.DataFrame({"pid": pids, "code": codes, "instr": instrs}).cast(_FRAME_KEY)
        found = asked.join(self._known, on=list(_FRAME_KEY), how="left", maintain_order="left")
        new = found.filter(pl.col("number").is_null()).select(*_FRAME_KEY).unique()
        if new.is_empty():
            return found.get_column("number").to_numpy()
        numbers, kept = [], []
        for pid, code_address, instr in new.iter_rows():
            code = self._codes.get((pid, code_address))
            frame = _UNKNOWN_FRAME if code is None else Frame(code.function, code.file, code.line(instr))
            numbers.append(self._number(frame))
            kept.append(code is not None)
        new = new.with_columns(pl.Series("number", numbers, dtype=pl.UInt32))
        self._known = pl.concat([self._known, new.filter(pl.Series(kept, dtype=pl.Boolean))],
                                rechunk=self._known.n_chunks() > 64)
        return found.join(new.rename({"number": "learned"}), on=list(_FRAME_KEY), how="left", maintain_order="left") \
            .select(pl.coalesce("number", "learned")).to_series().to_numpy()

    def _number(self, frame: Frame) -> int:
        number = self._frame_numbers.get(frame)
        if number is None:
            number = self._frame_numbers[frame] = len(self._frame_list)
            self._frame_list.append(frame)
        return number

    def take_new(self) -> dict[int, Stack]:
        """Stacks resolved since the last call (for the sinks, before their events)."""
        new, self._new = self._new, {}
        return new
