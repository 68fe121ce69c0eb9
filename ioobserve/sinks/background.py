"""A sink run on a thread of its own: the collector's worker hands it each call and goes on,
so a sink whose work is its own (the summary's group-bys) is off the path every batch takes
to the trace, and on a second core when there is one."""

from __future__ import annotations

import threading

import polars as pl

from ioobserve.data.model import BatchTables, Process
from ioobserve.plumbing.deadline import StopDeadline, grace, join_by
from ioobserve.plumbing.handoff import Handoff
from ioobserve.plumbing.thread_names import name_this_thread
from ioobserve.sinks.base import Sink

# Events queued for the thread before the worker waits for it: a few merged batches
# (reader.MERGED_EVENTS), so a thread that falls behind holds up the worker, never memory.
QUEUED_EVENTS = 1 << 18
_END = object()


class BackgroundSink(Sink):
    """`sink`'s calls, made in order on a thread named `name`; close() waits for them all
    (by its deadline) and raises what the sink raised."""

    def __init__(self, sink: Sink, name: str):
        self.sink = sink
        self._queue = Handoff(QUEUED_EVENTS)
        self._error: BaseException | None = None
        self._abandoned = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        name_this_thread()
        while (item := self._queue.get()) is not _END:
            if self._error is not None or self._abandoned:
                continue  # read on to the end, so that put() never waits on a dead thread
            call, args = item
            try:
                getattr(self.sink, call)(*args)
            except BaseException as exc:  # raised by close(), in the caller's thread
                self._error = exc

    def _put(self, call: str, *args, weight: int = 0) -> None:
        if not self._abandoned:
            self._queue.put((call, args), weight)

    def processes(self, changed: list[Process]) -> None:
        """Processes born, exec'd or first seen, queued."""
        self._put("processes", changed)

    def events(self, frame: pl.DataFrame, tables: BatchTables) -> None:
        """A batch, queued (the worker waits only while QUEUED_EVENTS are)."""
        self._put("events", frame, tables, weight=frame.height)

    def lost(self, ts_ns: int, counts: dict[str, int]) -> None:
        """A loss report, queued."""
        self._put("lost", ts_ns, counts)

    def throttled(self, ts_ns: int, mark: dict) -> None:
        """A throttle's start or end, queued."""
        self._put("throttled", ts_ns, mark)

    def forget(self, pids: list[int]) -> None:
        """Processes long exited, queued."""
        self._put("forget", pids)

    def counters(self, counts: dict[str, int]) -> None:
        """The recording-wide counters, queued."""
        self._put("counters", counts)

    def accounting(self, rows: pl.DataFrame) -> None:
        """Exited processes' accounting, queued."""
        self._put("accounting", rows)

    def abandon(self) -> None:
        """Drop what is queued and what comes; the sink abandons too."""
        self._abandoned = True
        self._queue.abandon()
        self.sink.abandon()

    def close(self, deadline: StopDeadline | None = None) -> None:
        """Wait for every queued call (abandon once the deadline passes), then close the sink."""
        self._queue.put(_END)
        if not join_by([self._thread], deadline):
            self.abandon()
            join_by([self._thread], grace())
        if self._error is not None:
            raise self._error
        self.sink.close(deadline)
