"""The collector: a capture process drains the rings in batches (ioobserve.collect.capture);
a reader thread takes them as they come (ioobserve.collect.reader), and a worker thread
enriches them and hands frames to the sinks, with its housekeeping between batches
(ioobserve.collect.worker, ioobserve.collect.housekeeping), so the drain never waits on
formatting, disks or the GIL.

Stopping has a deadline: what the reader and worker still hold then is dropped and counted
(`dropped_at_stop`), the sinks are told to abandon, and a thread still stuck is left behind."""

from __future__ import annotations

import gc
import time

from ioobserve.collect.accounting import ExitAccounting
from ioobserve.collect.backlog import BacklogLimits
from ioobserve.collect.capture import CaptureProcess
from ioobserve.collect.context_tables import ContextTables
from ioobserve.collect.counters import recording_counters
from ioobserve.collect.enrich import Enricher, monotonic_to_epoch_offset
from ioobserve.collect.housekeeping import Housekeeping, lost_by_name
from ioobserve.collect.reader import BatchReader
from ioobserve.collect.worker import Worker
from ioobserve.context.cgroups import CgroupTable
from ioobserve.context.lifecycle import seed_from_proc
from ioobserve.plumbing.deadline import UNWRITTEN, StopDeadline, grace, join_by
from ioobserve.sinks.base import Sink, Sinks

# The worker keeps many small objects for the whole recording (Python frames and stacks,
# chains, paths), and the interpreter's default thresholds make its cycle collector walk them
# all again and again: 1.8 s of collections, one of 0.6 s with the GIL held, during a 10 s
# PyTorch job (bench/trace_size.py). What exists at start (modules, bcc, the probes) is put out
# of its reach and young objects are collected 70 times less often: our data makes few cycles.
GC_THRESHOLDS = (50_000, 20, 100)


class Collector:
    """One recording's capture process, reader and worker, and the context tables they share."""

    def __init__(self, probes, sinks: list[Sink], poll_interval: float = 0.01, loss_interval: float = 1.0,
                 path_prefixes: list[str] | None = None, backlog: BacklogLimits = BacklogLimits(),
                 capture_nice: int | None = None, accounting: ExitAccounting | None = None,
                 cgroups: CgroupTable | None = None):
        self.probes = probes
        self.sinks = Sinks(sinks)
        self.poll_interval = poll_interval
        self.context = ContextTables(cgroups=cgroups) if cgroups is not None else ContextTables()
        self.enricher = Enricher(self.context, monotonic_to_epoch_offset())
        self.housekeeping = Housekeeping(probes, self.context, self.enricher, self.sinks, accounting, loss_interval)
        self.reader = BatchReader(probes, self.context)
        self._rings = {name: probes.tables.ring(name) for name in ("events", "aux")}
        self._backlog = backlog
        self._capture_nice = capture_nice
        self._capture: CaptureProcess | None = None
        self.worker = Worker(self.reader, self.context, self.enricher, self.sinks, self.housekeeping, path_prefixes or [])

    def account_from_start(self, pid: int) -> None:
        """`pid` was traced from its start though born before the probes attached (the
        recorded command): set its accounting beside what was traced too."""
        self.housekeeping.accounted_roots.add(pid)

    def start(self) -> None:
        """Seed processes alive now, then start draining (call after the probes attach)."""
        gc.freeze()
        gc.set_threshold(*GC_THRESHOLDS)
        self.context.processes.seed_from_proc()
        seed_from_proc(self.context.timeline, list(self.context.processes.by_pid))
        self._capture = CaptureProcess(self._rings, self.poll_interval, self._backlog, self._capture_nice)
        self.probes.tables.exclude_helper(self._capture.pid)
        self._capture.go()
        self.reader.start(self._capture)
        self.worker.thread.start()

    def lost_total(self) -> dict[str, int]:
        """Every loss since the start, by name."""
        return lost_by_name(self.probes.tables.lost_counts())

    def counters(self) -> dict[str, int]:
        """What user space made of the records and what the recording cost (counters.py)."""
        return recording_counters(self.probes, self.context, self.enricher, self.housekeeping.accounting,
                                  self._capture, self.worker.lags_ns)

    @property
    def dropped_at_stop(self) -> int:
        """Events captured but never handed to the sinks because the stop deadline passed."""
        return self.reader.dropped + self.worker.dropped

    @property
    def abandoned(self) -> bool:
        """Whether the stop deadline passed before everything was handed on."""
        return self.worker.abandoned

    def stop(self, deadline: StopDeadline | None = None) -> None:
        """Drain what is left (detach the probes first), flush and close the sinks, by the
        deadline (None: however long it takes); past it, abandon."""
        if self._capture is not None:
            self._capture.stop()
            if self.worker.thread.ident is not None and not join_by([self.worker.thread, self.reader.thread], deadline):
                self._abandon()
            if self.reader.thread.is_alive():  # stuck: the capture process would wait for it forever
                self._capture.kill()
            self._capture.close()
        if self.housekeeping.accounting is not None:
            self.housekeeping.accounting.stop()
        if self.worker.error is None:
            self.housekeeping.report_lost()
            self.housekeeping.report_throttles(final=True)
            if self.dropped_at_stop:  # so the traces' end records count them too
                self.sinks.lost(time.time_ns(), {UNWRITTEN: self.dropped_at_stop})
            if not self.worker.abandoned:
                self.housekeeping.check_accounting(final=True)
            self.sinks.counters(self.counters())
        self.sinks.close(deadline)
        if self.worker.error is not None:
            raise self.worker.error

    def _abandon(self) -> None:
        """Past the deadline: the reader reads the stream out without keeping it, the worker
        drops what is queued, the sinks drop what they hold; both threads get a moment to end."""
        self.worker.abandoned = True
        self.reader.abandon()
        self.sinks.abandon()
        join_by([self.worker.thread, self.reader.thread], grace())
        if self.worker.thread.is_alive():  # stuck: count what it will never take
            self.reader.count_left()
