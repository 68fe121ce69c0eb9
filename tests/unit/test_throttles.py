"""Flood control's marks from the kernel's per-cgroup counts (ioobserve/collect/throttles.py):
a throttle starts at its first held-back event, lasts while more are held back, and ends with
the last of them once a second passes without one; its end carries its own count."""

from __future__ import annotations

import numpy as np

from ioobserve.collect.throttles import QUIET_NS, ThrottleWatch
from ioobserve.data import events as ev

S = 1_000_000_000
DTYPE = [("cgroup_id", "<u8"), *ev.FLOOD_STATE.descr]


def _states(*rows) -> np.ndarray:
    """(cgroup, dropped, last_drop_ns, throttle_start_ns) rows as TableSet.flood_states() gives them."""
    return np.array([(cgroup, 0, 0, dropped, last, start) for cgroup, dropped, last, start in rows], dtype=DTYPE)


def test_a_throttle_starts_lasts_and_ends_with_its_count():
    watch = ThrottleWatch(limit=1000)
    assert watch.look(_states((7, 0, 0, 0)), 1 * S) == []  # a cgroup counted, nothing held back
    [start] = watch.look(_states((7, 500, 2 * S, int(1.5 * S))), 2 * S)
    assert (start.cgroup_id, start.state, start.ts_ns, start.dropped, start.limit) == (7, "start", int(1.5 * S), 0, 1000)
    assert watch.look(_states((7, 900, 3 * S, int(1.5 * S))), 3 * S) == []  # still held back: still on
    assert watch.look(_states((7, 900, 3 * S, int(1.5 * S))), 3 * S + QUIET_NS // 2) == []  # quiet, not a second yet
    [end] = watch.look(_states((7, 900, 3 * S, int(1.5 * S))), 3 * S + QUIET_NS)
    assert (end.state, end.ts_ns, end.dropped) == ("end", 3 * S, 900)
    # a second throttle of the same cgroup counts only its own
    [again] = watch.look(_states((7, 950, 9 * S, 8 * S)), 9 * S)
    assert (again.state, again.ts_ns) == ("start", 8 * S)
    [last] = watch.end_all()
    assert (last.state, last.ts_ns, last.dropped) == ("end", 9 * S, 50)
    assert watch.total_dropped == 950 and watch.end_all() == []


def test_cgroups_are_throttled_apart():
    watch = ThrottleWatch(limit=10)
    marks = watch.look(_states((1, 5, 2 * S, S), (2, 0, 0, 0), (3, 8, 2 * S, 2 * S)), 2 * S)
    assert sorted((mark.cgroup_id, mark.state) for mark in marks) == [(1, "start"), (3, "start")]
    marks = watch.look(_states((1, 5, 2 * S, S), (3, 9, 4 * S, 2 * S)), 4 * S)
    assert [(mark.cgroup_id, mark.state, mark.dropped) for mark in marks] == [(1, "end", 5)]
    assert [(mark.cgroup_id, mark.dropped) for mark in watch.end_all()] == [(3, 9)]
