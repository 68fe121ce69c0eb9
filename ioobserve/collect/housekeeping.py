"""What the collector's worker does between batches once an interval, and once more at the end:
losses and flood control's throttles told to the sinks, exited processes forgotten (their open
Python spans ended first), the kernel's accounting of exits matched to what was traced, and the
context's old changes folded together."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import polars as pl

from ioobserve.collect.accounting import DROP, TAKE, WAIT, AccountingCheck, ExitAccounting
from ioobserve.collect.context_tables import ContextTables
from ioobserve.collect.enrich import Enricher
from ioobserve.collect.throttles import ThrottleWatch
from ioobserve.data import events as ev
from ioobserve.sinks.base import Sinks

FORGET_EXITED_NS = 60_000_000_000  # late events of an exited process arrive well within this
COMPACT_CONTEXT_NS = 10_000_000_000  # context changes older than this are folded together
ACCOUNTING_WAIT_S = 30.0  # an exit not matched to a process traced from its start by then is dropped
BLOCK_NO_ORIGIN = "block_no_origin"  # block requests whose submitter was never seen (not attributed)
THROTTLED = "throttled"  # events a cgroup's flood limit kept in the kernel (marked in the trace)


def lost_by_name(counts: np.ndarray) -> dict[str, int]:
    """Per-op / per-record-kind loss counts with names, zeros left out."""
    names = list(ev.OP_NAMES) + [f"op{i}" for i in range(len(ev.OP_NAMES), ev.MAX_OPS)]
    names += list(ev.AUX_KIND_NAMES) + [f"aux{i}" for i in range(len(ev.AUX_KIND_NAMES), ev.AUX_KINDS)]
    names += [BLOCK_NO_ORIGIN, THROTTLED]
    return {names[i]: int(c) for i, c in enumerate(counts) if c}


class Housekeeping:
    """One recording's housekeeping, run by its worker thread."""

    def __init__(self, probes, context: ContextTables, enricher: Enricher, sinks: Sinks,
                 accounting: ExitAccounting | None, interval_s: float = 1.0) -> None:
        self.probes = probes
        self.context = context
        self.enricher = enricher
        self.sinks = sinks
        self.accounting = accounting
        self.interval_s = interval_s
        self.accounted_roots: set[int] = set()  # traced from their start though born before the probes
        self._check = AccountingCheck()
        self._lost_seen = np.zeros(ev.LOST_SLOTS, dtype=np.uint64)
        limit = getattr(getattr(probes, "tables", None), "flood_limit", 0)
        self._throttles = ThrottleWatch(limit) if limit else None
        self._next = time.monotonic() + interval_s

    def saw(self, frame: pl.DataFrame) -> None:
        """A batch's events as handed on: what exited processes' accounting is set beside."""
        if self.accounting is not None:
            self._check.add_events(frame)

    def due(self) -> bool:
        """Whether an interval has passed since the last run."""
        return time.monotonic() >= self._next

    def run(self, hand_over: Callable[[pl.DataFrame, object], None]) -> list[int]:
        """One interval's work; `hand_over(frame, tables)` takes the events made here (the
        forgotten processes' ended spans). Returns the pids forgotten."""
        self.report_lost()
        self.report_throttles()
        gone = self.context.forget_exited(time.monotonic_ns() - FORGET_EXITED_NS)
        hand_over(*self.enricher.end_spans(gone))  # their calls have ended
        self._check.forget(gone)
        self.check_accounting()
        self.context.timeline.compact(time.monotonic_ns() - COMPACT_CONTEXT_NS)
        self.sinks.forget(gone)
        self._next = time.monotonic() + self.interval_s
        return gone

    def report_lost(self) -> None:
        """Tell the sinks the losses since the last report."""
        counts = self.probes.tables.lost_counts()
        delta = counts - self._lost_seen
        self._lost_seen = counts
        if delta.any():
            self.sinks.lost(time.time_ns(), lost_by_name(delta))

    def report_throttles(self, final: bool = False) -> None:
        """Mark in the sinks each cgroup's throttle that started or ended (flood control);
        `final`: the ones still on end here."""
        if self._throttles is None:
            return
        marks = self._throttles.look(self.probes.tables.flood_states(), time.monotonic_ns())
        if final:
            marks += self._throttles.end_all()
        if not marks:
            return
        named = self.context.cgroups.lookup({mark.cgroup_id for mark in marks})
        offset = self.enricher.clock_offset_ns
        for mark in marks:
            where = named.get(mark.cgroup_id)
            # keys no other record of the trace uses with another type (a PR record's cgroup is its id)
            self.sinks.throttled(mark.ts_ns + offset, {
                "throttle": mark.state, "cgroup_id": mark.cgroup_id, "cgroup_path": where.path if where else None,
                "job": where.job or where.pod if where else None, "unit": where.unit if where else None,
                "dropped": mark.dropped, "limit": mark.limit})

    def check_accounting(self, final: bool = False) -> None:
        """Hand the sinks the accounting of exited processes traced from their start (seen
        forking, or the recorded command) once their exit record, and so their last events,
        have been drained; the others' is dropped after ACCOUNTING_WAIT_S (or at the end)."""
        if self.accounting is None:
            return
        now = time.monotonic()
        self._check.add_exits(self.accounting.take(), now)

        def verdict(pid: int, received: float) -> str:
            process = self.context.processes.by_pid.get(pid)
            from_start = pid in self.accounted_roots or (process is not None and process.start_ns is not None)
            if from_start:  # ours: wait for its exit record (the worker may lag behind the kernel)
                return TAKE if final or process is None or process.exit_ns is not None else WAIT
            # Not (yet) known as ours: its fork record may still be in the backlog.
            return DROP if final or now - received > ACCOUNTING_WAIT_S else WAIT

        rows = self._check.ready(verdict)
        if rows.height:
            self.sinks.accounting(rows)
