"""Where `top` gets its snapshots: a live capture (probes, collector and sinks on a worker
thread) or a recorded trace replayed under a time cursor. Both answer `snapshot()`; the UI
never learns which it has, beyond `live`."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import polars as pl

from ioobserve.data import schema as s
from ioobserve.data.model import BatchTables
from ioobserve.data.operations import KERNEL_VIEW
from ioobserve.live.window_totals import (
    HISTORY,
    PROCESS_NAMES,
    STREAM_COLUMNS,
    Snapshot,
    WindowAggregator,
    process_sums,
    rates_of_seconds,
    rates_per_second,
    syscall_calls,
)
from ioobserve.sinks.base import NamingSink
from ioobserve.sinks.base import Sinks

if TYPE_CHECKING:
    from ioobserve.collect.options import RecordingOptions
    from ioobserve.collect.recording import RecordingResult
    from ioobserve.probes.load.loader import Probes
    from ioobserve.probes.maps.filters import KernelFilters
    from ioobserve.trace.write.writer import TraceWriter

REPLAY_STEP_S = 1.0  # the cursor moves this far per step and per tick of play
# What a replay shows; the rest is dropped.
REPLAY_COLUMNS = list(dict.fromkeys([*STREAM_COLUMNS, *PROCESS_NAMES, s.LAYER, s.FLAGS, s.COUNTED, s.PATH2]))
# The layers `top` shows: the kernel's view, and the network tab's (NET and HTTP).
TOP_LAYERS = [*KERNEL_VIEW, s.LAYER_NET, s.LAYER_HTTP]
NS = 1_000_000_000
SECOND = "_second"  # a call's whole second since the trace's first call
SUM_ROWS = 1 << 18  # calls summed at a time in the background (whole seconds of them, about)


@dataclass
class Outcome:
    """How a source ended, for the command to report once the UI is gone."""

    error: BaseException | None = None  # why the capture or the stream stopped early
    result: RecordingResult | None = None  # a live capture's, once it stopped
    writer: TraceWriter | None = None  # the trace a live capture also wrote (top --record)


class Source(Protocol):
    """What the UI reads."""

    live: bool
    unavailable: dict[str, str]  # layer -> why it cannot be shown
    ready: threading.Event  # set once events can arrive (live: the probes are attached)
    outcome: Outcome  # filled in as the source ends

    def start(self) -> None:
        """Begin (a live source attaches its probes)."""

    def snapshot(self) -> Snapshot:
        """The window since the last snapshot (live) or at the cursor (replay)."""

    def stop(self) -> None:
        """End and release everything (a live source detaches its probes and closes its sinks)."""


class AggregatingSink(NamingSink):
    """A collector sink feeding a WindowAggregator: it names only the kernel's view, which is
    what `top` shows."""

    def __init__(self, aggregator: WindowAggregator) -> None:
        super().__init__()
        self.aggregator = aggregator

    def events(self, frame: pl.DataFrame, tables: BatchTables) -> None:
        """A batch's calls, named and folded in."""
        calls = frame.filter(pl.col(s.LAYER).is_in(TOP_LAYERS))
        if calls.height:
            self.aggregator.add(self.namer.name(calls, tables))
        else:
            self.namer.keep(tables)

    def lost(self, ts_ns: int, counts: dict[str, int]) -> None:
        """Losses, counted in the window."""
        self.aggregator.lost(sum(counts.values()))


class LiveSource:
    """A recording on a worker thread: the capture never waits on the UI (its sink only folds
    batches into the aggregator) and the UI never waits on the capture."""

    live = True

    def __init__(self, probes: Probes, filters: KernelFilters, options: RecordingOptions,
                 writer: TraceWriter | None = None, missing: dict[str, str] | None = None) -> None:
        """`writer`: the trace --record writes, or None; `missing`: layers asked for that this
        kernel cannot give, and why."""
        from ioobserve.collect.recording import Recording

        self.aggregator = WindowAggregator(time.time_ns())
        self.recording = Recording(probes, filters, Sinks([AggregatingSink(self.aggregator), *([writer] if writer else [])]),
                                   options)
        self.outcome = Outcome(writer=writer)
        self.ready = threading.Event()  # set once the probes are attached
        self.missing = missing or {}
        self._thread = threading.Thread(target=self._run, name="ioobserve-capture", daemon=True)

    def _run(self) -> None:
        try:
            self.outcome.result = self.recording.run(on_start=self.ready.set)
        except BaseException as exc:  # shown by the CLI; the thread must not die silently
            self.outcome.error = exc
            self.ready.set()

    @property
    def unavailable(self) -> dict[str, str]:
        """Layers asked for but not captured: refused up front, or that did not attach."""
        probes = self.recording.probes
        failed = {layer: probes.unavailable_layers.get(layer, "did not attach") for layer in sorted(probes.layers)
                  if self.ready.is_set() and layer not in probes.attached_layers}
        return {**self.missing, **failed}

    def start(self) -> None:
        """Attach and capture until stop()."""
        self._thread.start()

    def snapshot(self) -> Snapshot:
        """What arrived since the last call."""
        return self.aggregator.take(time.time_ns())

    def stop(self) -> None:
        """Detach the probes, flush the sinks (a parallel --record loses nothing) and wait;
        again is harmless."""
        self.recording.request_stop("top")
        if self._thread.is_alive():
            self._thread.join()


class ReplaySource:
    """Recorded traces under a time cursor: each snapshot is the window ending at the cursor.
    The traces are read lazily through their copies (sorted by time): a window reads only the
    row groups it spans, so memory stays a window's whatever the traces' size. Each process's
    sums are kept per second of the trace (found in the background: the first screen needs
    none), so a snapshot costs its window, not the trace before it."""

    live = False

    def __init__(self, events: pl.LazyFrame | pl.DataFrame, window_s: float = REPLAY_STEP_S) -> None:
        """`events`: the traces' events, lazily (in memory for traces without copies)."""
        self.calls = events.lazy().select(REPLAY_COLUMNS).filter(pl.col(s.LAYER).is_in(TOP_LAYERS))
        self.unavailable: dict[str, str] = {}
        self.outcome = Outcome()
        self.window_ns = int(window_s * 1e9)
        first, last = self.calls.select(pl.col(s.TS).min().alias("first"), pl.col(s.TS).max().alias("last")).collect().row(0)
        self.first_ns = int(first) if first is not None else 0
        self.last_ns = int(last) + 1 if last is not None else 1
        self.cursor_ns = min(self.first_ns + self.window_ns, self.last_ns)
        self.playing = False
        self.ready = threading.Event()
        self.ready.set()
        self._per_second: pl.DataFrame | None = None
        self._summed = threading.Event()
        threading.Thread(target=self._sum_seconds, name="ioo-replay-sums", daemon=True).start()

    def _sum_seconds(self) -> None:
        """Each process's sums per second, a span of whole seconds of about SUM_ROWS calls at a
        time: Polars' streaming engine held the whole trace's names to find each one's last."""
        try:
            by = [((pl.col(s.TS) - self.first_ns) // NS).alias(SECOND)]
            calls = self.calls.select(pl.len()).collect().item()
            seconds = -(-(self.last_ns - self.first_ns) // NS)
            span = max(1, seconds * SUM_ROWS // max(calls, 1))
            self._per_second = pl.concat(
                [process_sums(syscall_calls(self._between(self.first_ns + at * NS, self.first_ns + (at + span) * NS)), by=by)
                 for at in range(0, seconds, span)] or [process_sums(syscall_calls(self.calls.head(0).collect()), by=by)])
        finally:
            self._summed.set()

    def per_second(self) -> pl.DataFrame:
        """Each process's sums per whole second of the trace (waiting for them if need be)."""
        self._summed.wait()
        if self._per_second is None:
            raise RuntimeError("the traces' per-second sums could not be computed")
        return self._per_second

    @classmethod
    def from_traces(cls, paths: Sequence[Path]) -> ReplaySource:
        """The traces' events (read as ioobserve.scan reads them; a corrupt trace raises its TraceError)."""
        from ioobserve.trace.read.reader import Selection, file_events

        return cls(pl.concat([file_events(Path(path), Selection()) for path in paths]))

    def start(self) -> None:
        """Nothing runs in the background: the cursor moves when asked."""

    def stop(self) -> None:
        """Nothing to release."""

    def step(self, seconds: float) -> None:
        """Move the cursor (negative: back), within the trace."""
        self.cursor_ns = max(self.first_ns, min(self.last_ns, self.cursor_ns + int(seconds * 1e9)))

    def jump(self, fraction: float) -> None:
        """Put the cursor at a fraction (0 to 1) of the trace."""
        self.cursor_ns = self.first_ns + int((self.last_ns - self.first_ns) * min(max(fraction, 0.0), 1.0))

    def tick(self) -> None:
        """One refresh while playing: the cursor advances by a step."""
        if self.playing:
            self.step(REPLAY_STEP_S)
            self.playing = self.cursor_ns < self.last_ns

    def _between(self, start_ns: int, end_ns: int) -> pl.DataFrame:
        """The calls starting in [start_ns, end_ns), in time order."""
        if end_ns <= start_ns:
            return self.calls.head(0).collect()
        return self.calls.filter((pl.col(s.TS) >= start_ns) & (pl.col(s.TS) < end_ns)).collect().sort(s.TS, maintain_order=True)

    def snapshot(self) -> Snapshot:
        """The window [cursor - window, cursor); processes' totals count from the trace's start
        (whole seconds from the per-second sums, the rest from the calls)."""
        start = max(self.first_ns, self.cursor_ns - self.window_ns)
        whole = (start - self.first_ns) // NS
        boundary = self.first_ns + whole * NS
        before = self.per_second().filter(pl.col(SECOND) < whole) if whole else None  # the first screen needs none
        aggregator = WindowAggregator(boundary, totals=before)
        earlier, window = self._between(boundary, start), self._between(start, self.cursor_ns)
        aggregator.add(earlier)
        aggregator.take(start)
        aggregator.add(window)
        snapshot = aggregator.take(self.cursor_ns)
        # The sparklines: whole seconds of the trace, those before the window's from the
        # per-second sums (reading HISTORY seconds of calls was most of a busy trace's memory).
        recent = rates_per_second(pl.concat([earlier, window]), boundary, self.cursor_ns)
        older = rates_of_seconds(before, SECOND, max(0, whole - HISTORY + len(recent["iops"])), whole) \
            if before is not None else {}
        snapshot.history = {name: [*older.get(name, []), *values][-HISTORY:] for name, values in recent.items()}
        return snapshot
