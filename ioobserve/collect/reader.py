"""The collector's reader thread: it takes the capture process's batches as they come, learns
their new files' paths and cgroups' names, probes the programs processes exec and the libraries
they map, and queues the batches for the worker, which takes them coalesced.

It acts at once, ahead of the worker: a library's calls are seen only once its probes are in,
and the worker may be seconds behind after a burst of events."""

from __future__ import annotations

import contextlib
import queue
import threading
import time

import numpy as np

from ioobserve.collect.capture import CaptureProcess
from ioobserve.collect.context_tables import ContextTables
from ioobserve.data import events as ev
from ioobserve.data.decode import AuxBatch, decode_aux
from ioobserve.plumbing.handoff import Handoff
from ioobserve.plumbing.thread_names import name_this_thread

# Read ahead of the worker up to this many event bytes (beyond it the capture process holds
# the backlog): by bytes, not batches, so that a worker behind on many small batches (a
# burst of process starts) does not hold up the reader, which probes libraries and finds
# interpreters as processes start. 16 MiB: ~140 k events.
QUEUED_BYTES = 16 << 20
# A worker behind takes the queued batches together, up to this many events: each batch has
# a fixed cost (some tens of Polars calls), which a flood of small drains would multiply; and
# no more, since a batch is held as several frames on its way to the disk (memory behind a
# slow disk: 1 << 18 made the recorder's working set twice as large, 1 GB on a 2 M-event flood).
MERGED_EVENTS = 1 << 16
# Below this many events a batch waits up to COALESCE_S for the batches after it: a batch's
# fixed cost is ~10 ms of CPU here (bench/README.md), 1 µs per event at 10 k events, so at a
# steady 100 k events/s batches of 0.1 s cost the recorder half its CPU; 0.5 s stays within
# the writer's flush second and within what a live view shows.
COALESCE_EVENTS, COALESCE_S = MERGED_EVENTS, 0.5
_NOTHING = object()  # no queue item held back (None is one: the stream's end)

Batch = tuple[np.ndarray, AuxBatch]


class BatchReader:
    """Reads one capture process's stream on a thread of its own; take() is the worker's side."""

    def __init__(self, probes, context: ContextTables) -> None:
        self.probes = probes
        self.context = context
        self.dropped = 0  # events read but not kept: past the stop deadline
        self._capture: CaptureProcess | None = None
        self._queue = Handoff(QUEUED_BYTES)
        self._abandoned = False
        self._held: object = _NOTHING  # an item take() looked at but left for the next call
        self._thread = threading.Thread(target=self._read_loop, name="ioobserve-reader", daemon=True)

    @property
    def thread(self) -> threading.Thread:
        """The reader thread (joined by the collector's stop)."""
        return self._thread

    def start(self, capture: CaptureProcess) -> None:
        """Read `capture`'s batches from now on."""
        self._capture = capture
        self._thread.start()

    def _read_loop(self) -> None:
        """Learn and queue each batch; the stream's end (or error) goes last."""
        name_this_thread()
        end: BaseException | None = None
        batches = self._capture.batches()
        try:
            for batch, aux in batches:
                if self._abandoned:
                    self.dropped += batch.size
                    continue
                records = decode_aux(aux)
                self._learn_ahead(records)
                self._queue.put((batch, records), batch.nbytes)
        except BaseException as exc:  # surfaced by the collector's stop() through the worker
            end = exc
            with contextlib.suppress(BaseException):  # the capture process ends only once read out
                for _ in batches:
                    pass
        self._queue.put(end)

    def _learn_ahead(self, records: AuxBatch) -> None:
        """What cannot wait for the worker: new paths (replacements wait for it: ContextTables.apply),
        cgroups' names before a runtime removes a pod's bundle, and the probes of programs
        exec'd and libraries mapped."""
        self.context.files.add_new(records.paths)
        self.context.cgroups.read_names_ahead(records.cgroups)
        for proc in records.procs:
            if proc.kind == ev.PROC_EXEC:
                self.probes.program_started(proc.pid, proc.exe_ident, proc.ts_ns)
        for lib in records.libs:  # its path record came first, in the same ring
            path = self.context.files.by_id.get((lib.dev, lib.ino))
            if path is not None:
                self.probes.library_mapped(lib.pid, path, (lib.dev, lib.ino), lib.ts_ns)

    def take(self) -> Batch | BaseException | None:
        """The next queue item; batches queued behind a batch come with it, merged."""
        item = self._queue.get() if self._held is _NOTHING else self._held
        self._held = _NOTHING
        if not isinstance(item, tuple):
            return item
        batches, records, events = [item[0]], item[1], item[0].size
        # A small batch waits a moment for the next ones: at a steady low rate the capture
        # process drains every 10 ms, and each batch's fixed cost would cost most of a core.
        deadline = time.monotonic() + COALESCE_S
        while events < MERGED_EVENTS:
            wait = deadline - time.monotonic() if events < COALESCE_EVENTS else 0
            try:
                later = self._queue.get(timeout=wait) if wait > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if not isinstance(later, tuple):
                self._held = later  # the stream's end: after this batch
                break
            batches.append(later[0])
            records.extend(later[1])
            events += later[0].size
        if len(batches) == 1:
            return batches[0], records
        # As bytes: numpy promotes the fields of each structured array it concatenates, in Python.
        # One capture stream's batches share their dtype (capture.ring_dtype of events.EVENT).
        return np.concatenate([batch.view(np.uint8) for batch in batches]).view(batches[0].dtype), records

    def abandon(self) -> None:
        """Past the stop deadline: read the stream out without keeping it, and let a worker
        waiting on the queue go."""
        self._abandoned = True
        self._queue.abandon()

    def count_left(self) -> None:
        """Count as dropped what is still queued (the worker is stuck and will never take it)."""
        with contextlib.suppress(queue.Empty):
            while True:
                item = self._queue.get_nowait()
                if isinstance(item, tuple):
                    self.dropped += item[0].size
