"""Where a recording's batches go: the base every sink derives from, whose calls do nothing
unless a sink overrides them, and the fan-out the collector calls every sink through."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import polars as pl

from ioobserve.data.decode import HeadRecord
from ioobserve.data.model import BatchTables, Process
from ioobserve.data.naming import BatchNamer
from ioobserve.plumbing.deadline import StopDeadline


class Sink:
    """A consumer of the collector's id batches (the trace writer, the summary, the live
    views, serve's job traces and stream); it overrides only the calls it uses. A sink that
    shows names names what it shows with ioobserve.data.naming.BatchNamer (NamingSink)."""

    def processes(self, changed: list[Process]) -> None:
        """Processes born, exec'd or first seen."""

    def events(self, frame: pl.DataFrame, tables: BatchTables) -> None:
        """One batch of events as ids (schema.ID_BATCH_SCHEMA) and the tables naming them."""

    def heads(self, heads: list[HeadRecord]) -> None:
        """The HTTP request and answer heads the kernel copied (kernel time), every one, whether
        or not its event left the kernel (serve counts requests from them)."""

    def lost(self, ts_ns: int, counts: dict[str, int]) -> None:
        """Records lost since the last call, by op or record kind (epoch ns)."""

    def throttled(self, ts_ns: int, mark: dict) -> None:
        """A cgroup's throttle started or ended (epoch ns): flood control kept its events past
        the limit in the kernel. `mark`: throttle ("start"/"end"), cgroup_id, cgroup_path, job, unit,
        dropped (events held back over the throttle, at its end) and limit (events a second)."""

    def forget(self, pids: list[int]) -> None:
        """Processes that exited a while ago: drop what is kept about them."""

    def counters(self, counts: dict[str, int]) -> None:
        """Recording-wide counters (application tags applied and malformed), just before close."""

    def accounting(self, rows: pl.DataFrame) -> None:
        """Exited processes' traced calls and bytes beside the kernel's accounting
        (ioobserve.data.model.ACCOUNTING_SCHEMA)."""

    def abandon(self) -> None:
        """The stop deadline passed (any thread): stop writing, drop and count what is queued,
        and never make the caller wait again."""

    def close(self, deadline: StopDeadline | None = None) -> None:
        """No more data: flush and release, by the deadline (None: however long it takes)."""


class NamingSink(Sink):
    """A sink that shows names: it keeps what names its batches' processes in `namer`."""

    def __init__(self) -> None:
        self.namer = BatchNamer()

    def processes(self, changed: list[Process]) -> None:
        """Kept to name the events."""
        self.namer.processes(changed)

    def forget(self, pids: list[int]) -> None:
        """Exited processes' names are no longer needed."""
        self.namer.forget(pids)


class Sinks(Sink):
    """Every sink of a recording, each call passed to all of them in order."""

    def __init__(self, sinks: Iterable[Sink]):
        self._sinks = list(sinks)
        for sink in self._sinks:
            if not isinstance(sink, Sink):  # a sink missing a call would fail mid-recording
                raise TypeError(f"{type(sink).__name__} is not an ioobserve.sinks.base.Sink")

    def __iter__(self) -> Iterator[Sink]:
        return iter(self._sinks)

    def _each(self, call: str, *args) -> None:
        for sink in self._sinks:
            getattr(sink, call)(*args)

    def processes(self, changed: list[Process]) -> None:
        """Processes born, exec'd or first seen, to every sink."""
        self._each("processes", changed)

    def events(self, frame: pl.DataFrame, tables: BatchTables) -> None:
        """A batch, to every sink."""
        self._each("events", frame, tables)

    def heads(self, heads: list[HeadRecord]) -> None:
        """HTTP heads, to every sink."""
        self._each("heads", heads)

    def lost(self, ts_ns: int, counts: dict[str, int]) -> None:
        """A loss report, to every sink."""
        self._each("lost", ts_ns, counts)

    def throttled(self, ts_ns: int, mark: dict) -> None:
        """A throttle's start or end, to every sink."""
        self._each("throttled", ts_ns, mark)

    def forget(self, pids: list[int]) -> None:
        """Processes long exited, to every sink."""
        self._each("forget", pids)

    def counters(self, counts: dict[str, int]) -> None:
        """The recording-wide counters, to every sink."""
        self._each("counters", counts)

    def accounting(self, rows: pl.DataFrame) -> None:
        """Exited processes' accounting, to every sink."""
        self._each("accounting", rows)

    def abandon(self) -> None:
        """The deadline passed: every sink drops what it holds."""
        self._each("abandon")

    def close(self, deadline: StopDeadline | None = None) -> None:
        """Close every sink by the deadline; once it has passed, the sinks not closed yet
        abandon first, so none of them waits on what it holds."""
        for sink in self._sinks:
            if deadline is not None and deadline.passed():
                sink.abandon()
            sink.close(deadline)
