"""The oracle for the compiled core's line tables (csrc/linetable.c): the Python reader it
replaced. Line numbers from a code object's line table, as CPython itself computes them (the
ranges `code.co_lines()` yields): Objects/lnotab_notes.txt for 3.10, Objects/locations.md
for 3.11+. Offsets are in bytes of bytecode."""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from functools import lru_cache

NO_LINE = -1
_NO_LINE_310 = -128
_INFO_NONE, _INFO_NO_COLUMNS, _INFO_LONG = 15, 13, 14
_INFO_ONE_LINE0 = 10


def ranges_310(table: bytes, firstlineno: int) -> Iterator[tuple[int, int, int]]:
    """(start, end, line) ranges of a 3.10 table: (bytecode delta, signed line delta) pairs."""
    start = end = 0
    line = firstlineno
    for at in range(0, len(table) - 1, 2):
        start, end = end, end + table[at]
        delta = table[at + 1] - 256 if table[at + 1] > 127 else table[at + 1]
        if delta == _NO_LINE_310:
            current = NO_LINE
        else:
            line += delta
            current = line
        if end > start:
            yield start, end, current


def _varint(table: bytes, at: int) -> tuple[int, int]:
    byte = table[at]
    value, shift = byte & 63, 0
    while byte & 64:
        at += 1
        byte = table[at]
        shift += 6
        value |= (byte & 63) << shift
    return value, at + 1


def _line_delta(table: bytes, at: int) -> int:
    code = (table[at] >> 3) & 15
    if code in (_INFO_NO_COLUMNS, _INFO_LONG):
        value, _ = _varint(table, at + 1)
        return -(value >> 1) if value & 1 else value >> 1
    if _INFO_ONE_LINE0 <= code < _INFO_NO_COLUMNS:
        return code - _INFO_ONE_LINE0
    return 0


def ranges_311(table: bytes, firstlineno: int) -> Iterator[tuple[int, int, int]]:
    """(start, end, line) ranges of a 3.11+ location table."""
    end = 0
    line = firstlineno
    at = 0
    try:
        while at < len(table):
            first = table[at]
            line += _line_delta(table, at)
            start, end = end, end + ((first & 7) + 1) * 2
            yield start, end, NO_LINE if (first >> 3) & 15 == _INFO_NONE else line
            at += 1
            while at < len(table) and not table[at] & 128:
                at += 1
    except IndexError:  # a table cut short: the ranges read so far stand
        return


class LineTable:
    """Byte offset -> line for one code object, its table read only as far as asked: a
    module's body is long, and the imports a stack passes through sit at its top."""

    def __init__(self, ranges: Iterator[tuple[int, int, int]]):
        self._pending = ranges
        self._starts: list[int] = []
        self._ranges: list[tuple[int, int, int]] = []
        self._end = 0  # ranges read cover [0, _end)

    @classmethod
    @lru_cache(maxsize=16384)
    def parse(cls, table: bytes, firstlineno: int, version: tuple[int, int]) -> LineTable:
        """The line table of a code object of CPython `version`: one for every process that
        runs the same code (each DataLoader worker imports the same modules)."""
        return cls(ranges_310(table, firstlineno) if version < (3, 11) else ranges_311(table, firstlineno))

    def line(self, offset: int) -> int:
        """The line of the instruction at `offset` bytes (NO_LINE if the table does not say)."""
        while offset >= self._end and self._pending is not None:
            found = next(self._pending, None)
            if found is None:
                self._pending = None
                break
            self._starts.append(found[0])
            self._ranges.append(found)
            self._end = found[1]
        index = bisect.bisect_right(self._starts, offset) - 1
        if index < 0:
            return NO_LINE
        start, end, line = self._ranges[index]
        return line if start <= offset < end else NO_LINE
