"""Hypothesis strategies for rows of the event lines' id-columns frame (schema.ID_SCHEMA): every
field at its edges and defaults, for the compiled writer's and parser's tests."""

from __future__ import annotations

from hypothesis import strategies as st

from ioobserve.data import events as ev
from ioobserve.data import schema as s
from ioobserve.trace.lines import LAYER_TYPES


U64 = (1 << 64) - 1


I64 = 1 << 63


# Op names are syscall names or Python function names: identifiers, non-ASCII ones included.
NAMES = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789éßπ字"), min_size=1, max_size=12)


MODULES = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)  # cleaned to name characters


def edges(low: int, high: int, *special: int):
    """Integers in [low, high], their edges and the fields' defaults drawn often."""
    return st.one_of(st.sampled_from([low, high, 0, 1, 999, 1000, 1001, *special]), st.integers(low, high))


def nullable(values):
    """The values, or None."""
    return st.one_of(st.none(), values)


ROW = st.fixed_dictionaries({
    s.TS: edges(0, U64, 1_700_000_000_000_001_000), s.DUR: edges(0, U64), s.PID: edges(0, (1 << 32) - 1),
    s.TID: edges(0, (1 << 32) - 1), s.UID: nullable(edges(0, (1 << 32) - 1)), s.LAYER: st.sampled_from(sorted(LAYER_TYPES)),
    s.OP: NAMES, s.FILE: nullable(edges(0, (1 << 32) - 1)), s.FILE2: nullable(edges(0, (1 << 32) - 1)),
    s.FD: edges(-(1 << 31), (1 << 31) - 1, -1), s.RET: edges(-I64, I64 - 1, -1), s.BYTES_REQ: edges(0, U64),
    s.OFFSET: edges(-I64, I64 - 1, -1), s.CGROUP: nullable(edges(0, U64)), s.ARG: edges(0, U64),
    s.FLAGS: st.one_of(st.sampled_from([0, ev.F_PARENT, ev.F_PARENT | ev.F_FILE]), edges(0, (1 << 16) - 1)),
    s.PARENT_TS: nullable(edges(0, U64 - 1, 1_700_000_000_000_002_000)), s.PY_STACK: nullable(edges(0, (1 << 32) - 1)),
    s.PY_FRAME: nullable(edges(0, (1 << 16) - 1)), s.PY_MODULE: nullable(MODULES), s.STATUS: nullable(st.integers(1, (1 << 16) - 1)),  # 0 means none
})
