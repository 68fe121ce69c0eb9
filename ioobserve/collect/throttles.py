"""Flood control's marks: from the kernel's per-cgroup counts (flood_states in core.bpf.c),
read about once a second, the start and the end of each cgroup's throttle, with the events
held back in between, for the trace, the summary and the analysis.

A throttle starts at the first event a cgroup's limit held back after a second with none, and
ends with the last one, once a further second has passed without another; the end says how
many were held back over it. A recording that ends with a cgroup still throttled ends its
throttle there."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

QUIET_NS = 1_000_000_000  # a second with nothing held back ends a throttle


@dataclass(frozen=True)
class ThrottleMark:
    """A throttle's start or end (ts_ns: CLOCK_MONOTONIC, as the kernel's)."""

    cgroup_id: int
    state: str  # "start" or "end"
    ts_ns: int
    dropped: int  # at the end: events held back over the throttle (0 at its start)
    limit: int  # events a second


@dataclass
class _Open:
    start_ns: int
    dropped_before: int  # the cgroup's total before this throttle
    last_drop_ns: int


class ThrottleWatch:
    """The throttles open now, turned into marks as the kernel's counts move."""

    def __init__(self, limit: int):
        self.limit = limit
        self._seen: dict[int, int] = {}  # cgroup -> held back in total, at the last look
        self._open: dict[int, _Open] = {}
        self.total_dropped = 0

    def look(self, states: np.ndarray, now_ns: int) -> list[ThrottleMark]:
        """Marks for what changed since the last look (`states`: TableSet.flood_states())."""
        marks = []
        for row in states:
            cgroup, dropped = int(row["cgroup_id"]), int(row["dropped"])
            before = self._seen.get(cgroup, 0)
            if dropped <= before:
                continue
            self._seen[cgroup] = dropped
            self.total_dropped += dropped - before
            last = int(row["last_drop_ns"])
            throttle = self._open.get(cgroup)
            if throttle is None:
                start = int(row["throttle_start_ns"]) or last
                self._open[cgroup] = _Open(start, before, last)
                marks.append(ThrottleMark(cgroup, "start", start, 0, self.limit))
            else:
                throttle.last_drop_ns = last
        for cgroup, throttle in list(self._open.items()):
            if now_ns - throttle.last_drop_ns >= QUIET_NS:
                marks.append(self._end(cgroup))
        return marks

    def end_all(self) -> list[ThrottleMark]:
        """The recording ends: every open throttle ends with its last held-back event."""
        return [self._end(cgroup) for cgroup in list(self._open)]

    def _end(self, cgroup: int) -> ThrottleMark:
        throttle = self._open.pop(cgroup)
        return ThrottleMark(cgroup, "end", throttle.last_drop_ns, self._seen[cgroup] - throttle.dropped_before, self.limit)
