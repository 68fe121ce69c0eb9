"""The collector: a capture process drains the rings in batches (ioobserve.collect.capture);
a reader thread takes them as they come, and a worker thread decodes, enriches and hands
frames to the sinks, so the drain never waits on formatting, disks or the GIL.

Stopping has a deadline: what the reader and worker still hold then is dropped and counted
(`dropped_at_stop`), the sinks are told to abandon, and a thread still stuck is left behind.

The reader learns new files' paths and probes the libraries processes map (HDF5, MPI) at once:
a library's calls are seen only once its probes are in, and the worker may be seconds
behind after a burst of events."""

from __future__ import annotations

import contextlib
import gc
import queue
import threading
import time

import numpy as np
import polars as pl

from ioobserve import events as ev
from ioobserve import schema as s
from ioobserve.collect.accounting import (
    DROP,
    TAKE,
    WAIT,
    AccountingCheck,
    ExitAccounting,
)
from ioobserve.collect.backlog import BacklogLimits
from ioobserve.collect.capture import CaptureProcess
from ioobserve.collect.context_tables import ContextTables
from ioobserve.collect.enrich import Enricher, monotonic_to_epoch_offset
from ioobserve.collect.throttles import ThrottleWatch
from ioobserve.context.cgroups import CgroupTable
from ioobserve.context.lifecycle import apply_lifecycle, seed_from_proc
from ioobserve.deadline import UNWRITTEN, StopDeadline, grace, join_by
from ioobserve.decode import AuxBatch, decode_aux
from ioobserve.handoff import Handoff
from ioobserve.model import BatchTables
from ioobserve.sink import Sink, Sinks
from ioobserve.thread_names import name_this_thread

FORGET_EXITED_NS = 60_000_000_000  # late events of an exited process arrive well within this
COMPACT_CONTEXT_NS = 10_000_000_000  # context changes older than this are folded together
ACCOUNTING_WAIT_S = 30.0  # an exit not matched to a process traced from its start by then is dropped
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
# The worker keeps many small objects for the whole recording (Python frames and stacks,
# chains, paths), and the interpreter's default thresholds make its cycle collector walk them
# all again and again: 1.8 s of collections, one of 0.6 s with the GIL held, during a 10 s
# PyTorch job (bench/trace_size.py). What exists at start (modules, bcc, the probes) is put out
# of its reach and young objects are collected 70 times less often: our data makes few cycles.
GC_THRESHOLDS = (50_000, 20, 100)


BLOCK_NO_ORIGIN = "block_no_origin"  # block requests whose submitter was never seen (not attributed)
THROTTLED = "throttled"  # events a cgroup's flood limit kept in the kernel (marked in the trace)


def lost_by_name(counts: np.ndarray) -> dict[str, int]:
    """Per-op / per-record-kind loss counts with names, zeros left out."""
    names = list(ev.OP_NAMES) + [f"op{i}" for i in range(len(ev.OP_NAMES), ev.MAX_OPS)]
    names += list(ev.AUX_KIND_NAMES) + [f"aux{i}" for i in range(len(ev.AUX_KIND_NAMES), ev.AUX_KINDS)]
    names += [BLOCK_NO_ORIGIN, THROTTLED]
    return {names[i]: int(c) for i, c in enumerate(counts) if c}


def _outside_prefixes(prefixes: list[str], files: pl.DataFrame) -> pl.Expr:
    """Events named by a relative path argument that resolves outside every --path-prefix, or
    by none at all (files: the batch's, FILE_ROW_SCHEMA).

    The kernel decides the path filter for open files (by directory inode) and for absolute
    path arguments; a relative one is only complete once joined to its base directory here."""
    path = pl.col(s.PATH)
    inside = pl.any_horizontal(*((path == p) | path.str.starts_with(p.rstrip("/") + "/") for p in prefixes))
    outside = files.filter(~inside).get_column(s.FILE)
    return ((pl.col(s.FLAGS) & ev.F_NAME) != 0) & (pl.col(s.FILE).is_null() | pl.col(s.FILE).is_in(outside.implode()))


class Collector:
    """Owns the drain loop and the context tables for one recording."""

    def __init__(self, probes, sinks: list[Sink], poll_interval: float = 0.01, loss_interval: float = 1.0,
                 path_prefixes: list[str] | None = None, backlog: BacklogLimits = BacklogLimits(),
                 capture_nice: int | None = None, accounting: ExitAccounting | None = None,
                 cgroups: CgroupTable | None = None):
        self.probes = probes
        self.sinks = Sinks(sinks)
        self.poll_interval = poll_interval
        self.loss_interval = loss_interval
        self.context = ContextTables(cgroups=cgroups) if cgroups is not None else ContextTables()
        self.enricher = Enricher(self.context, monotonic_to_epoch_offset())
        self._rings = {name: probes.tables.ring(name) for name in ("events", "aux")}
        self._backlog = backlog
        self._capture_nice = capture_nice
        self._capture: CaptureProcess | None = None
        self._lost_seen = np.zeros(ev.LOST_SLOTS, dtype=np.uint64)
        limit = getattr(getattr(probes, "tables", None), "flood_limit", 0)
        self._throttles = ThrottleWatch(limit) if limit else None  # flood control's marks
        self.records = 0
        self._path_prefixes = path_prefixes or []
        self._announced: set[int] = set()
        self._accounting = accounting
        self._accounting_check = AccountingCheck()
        self._accounted_roots: set[int] = set()
        self.error: BaseException | None = None
        self._queue = Handoff(QUEUED_BYTES)
        self._abandoned = False
        self._dropped_by_reader = self._dropped_by_worker = 0
        self._held: object = _NOTHING  # an item _take looked at but left for the next call
        self._lags_ns: list[int] = []  # per batch handed to the sinks: now minus its oldest call's end
        self._reader = threading.Thread(target=self._read_loop, name="ioobserve-reader", daemon=True)
        self._worker = threading.Thread(target=self._work_loop, name="ioobserve-worker", daemon=True)

    def account_from_start(self, pid: int) -> None:
        """`pid` was traced from its start though born before the probes attached (the
        recorded command): set its accounting beside what was traced too."""
        self._accounted_roots.add(pid)

    def start(self) -> None:
        """Seed processes alive now, then start draining (call after the probes attach)."""
        gc.freeze()
        gc.set_threshold(*GC_THRESHOLDS)
        self.context.processes.seed_from_proc()
        seed_from_proc(self.context.timeline, list(self.context.processes.by_pid))
        self._capture = CaptureProcess(self._rings, self.poll_interval, self._backlog, self._capture_nice)
        self.probes.tables.exclude_helper(self._capture.pid)
        self._capture.go()
        self._reader.start()
        self._worker.start()

    def _read_loop(self) -> None:
        """Take batches off the capture stream, learn their paths, probe newly mapped
        libraries, and queue them for the worker; the stream's end (or error) goes last."""
        name_this_thread()
        end: BaseException | None = None
        batches = self._capture.batches()
        try:
            for batch, aux in batches:
                if self._abandoned:
                    self._dropped_by_reader += batch.size
                    continue
                records = decode_aux(aux)
                self.context.files.add_new(records.paths)  # replacements wait for the worker: see _process
                self.context.cgroups.read_names_ahead(records.cgroups)  # before the runtime removes a pod's bundle
                for proc in records.procs:
                    if proc.kind == ev.PROC_EXEC:
                        self.probes.program_started(proc.pid, proc.exe_ident, proc.ts_ns)
                for lib in records.libs:  # its path record came first, in the same ring
                    path = self.context.files.by_id.get((lib.dev, lib.ino))
                    if path is not None:
                        self.probes.library_mapped(lib.pid, path, (lib.dev, lib.ino), lib.ts_ns)
                self._queue.put((batch, records), batch.nbytes)
        except BaseException as exc:  # surfaced by stop() through the worker
            end = exc
            with contextlib.suppress(BaseException):  # the capture process ends only once read out
                for _ in batches:
                    pass
        self._queue.put(end)

    def _take(self) -> tuple[np.ndarray, AuxBatch] | BaseException | None:
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

    def _work_loop(self) -> None:
        name_this_thread()
        next_loss = time.monotonic() + self.loss_interval
        while (item := self._take()) is not None:
            if isinstance(item, BaseException):
                self.error = self.error or item
                break
            if self.error is not None:
                continue  # after a failure the stream is still read to its end
            if self._abandoned:
                self._dropped_by_worker += item[0].size
                continue
            try:
                self._process(*item)
                if time.monotonic() >= next_loss:
                    self._report_lost()
                    self._report_throttles()
                    gone = self.context.forget_exited(time.monotonic_ns() - FORGET_EXITED_NS)
                    self._hand_over(*self.enricher.end_spans(gone))  # their calls have ended
                    self._announced.difference_update(gone)
                    self._accounting_check.forget(gone)
                    self._check_accounting()
                    self.context.timeline.compact(time.monotonic_ns() - COMPACT_CONTEXT_NS)
                    self.sinks.forget(gone)
                    next_loss = time.monotonic() + self.loss_interval
            except BaseException as exc:  # surfaced by stop()
                self.error = exc
        if self.error is None and not self._abandoned:
            try:
                self._hand_over(*self.enricher.end_spans())  # the calls still open when the recording ends
            except BaseException as exc:
                self.error = exc

    def _hand_over(self, frame: pl.DataFrame, tables: BatchTables) -> None:
        """Events made here rather than drained (ended Python spans), to every sink."""
        if frame.height or tables.stacks:
            self.sinks.events(frame, tables)

    def _process(self, batch: np.ndarray, records: AuxBatch) -> None:
        self.context.cgroups.learn(records.cgroups)  # before this batch's events are named
        # A new file with a deleted one's inode is named anew from here on: the batches before
        # this one, named already, keep the name they had (a renamed one: Enricher._named).
        self.context.files.add(records.paths)
        changed = self.context.processes.apply(records.procs)
        apply_lifecycle(self.context.timeline, self.context.workers, records.procs, records.envs)
        self.enricher.add_names(records.names)
        self.enricher.add_heads(records.heads)
        self.context.stacks.add(records.python)
        if batch.size:
            # Processes are announced when they first do I/O (or fork/exec under a filter).
            fresh = set(np.unique(batch["pid"]).tolist()) - self._announced
            changed += [self.context.processes.get(pid) for pid in sorted(fresh)]
        if changed:
            self._announced.update(p.pid for p in changed)
            self.sinks.processes(changed)
        if batch.size:
            self.records += len(batch)
            frame, tables = self.enricher.frame(batch)
            if self._path_prefixes:
                frame = frame.filter(~_outside_prefixes(self._path_prefixes, tables.files))
            self.sinks.events(frame, tables)
            # How far behind the calls this batch was handed on: from its oldest call's end.
            self._lags_ns.append(time.monotonic_ns() - int((batch["ts_ns"] + batch["dur_ns"]).min()))
            if self._accounting is not None:
                self._accounting_check.add_events(frame)

    def _check_accounting(self, final: bool = False) -> None:
        """Hand the sinks the accounting of exited processes traced from their start (seen
        forking, or the recorded command) once their exit record, and so their last events,
        have been drained; the others' is dropped after ACCOUNTING_WAIT_S (or at the end)."""
        if self._accounting is None:
            return
        now = time.monotonic()
        self._accounting_check.add_exits(self._accounting.take(), now)

        def verdict(pid: int, received: float) -> str:
            process = self.context.processes.by_pid.get(pid)
            from_start = pid in self._accounted_roots or (process is not None and process.start_ns is not None)
            if from_start:  # ours: wait for its exit record (the worker may lag behind the kernel)
                return TAKE if final or process is None or process.exit_ns is not None else WAIT
            # Not (yet) known as ours: its fork record may still be in the backlog.
            return DROP if final or now - received > ACCOUNTING_WAIT_S else WAIT

        rows = self._accounting_check.ready(verdict)
        if rows.height:
            self.sinks.accounting(rows)

    def _report_lost(self) -> None:
        counts = self.probes.tables.lost_counts()
        delta = counts - self._lost_seen
        self._lost_seen = counts
        if delta.any():
            now = time.time_ns()
            self.sinks.lost(now, lost_by_name(delta))

    def _report_throttles(self, final: bool = False) -> None:
        """Mark in the sinks each cgroup's throttle that started or ended (flood control)."""
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

    def lost_total(self) -> dict[str, int]:
        """Every loss since the start, by name."""
        return lost_by_name(self.probes.tables.lost_counts())

    def counters(self) -> dict[str, int]:
        """Counts of what user space made of the records (beyond events and losses), and what
        the recording cost: how far behind the calls the sinks got them, and the probes' own
        run time and runs per program while the kernel's BPF stats were on."""
        counts = {"tags_applied": self.context.timeline.tags_applied, "tags_malformed": self.context.timeline.tags_malformed,
                  "py_chains_unknown": self.context.stacks.unknown_chains, "requests_garbled": self.enricher.requests.garbled}
        if self._accounting is not None:
            counts["accounting_overruns"] = self._accounting.overruns
        if self._capture is not None and self._capture.spilled_peak:
            counts["capture_spilled_peak_bytes"] = self._capture.spilled_peak
        if self._lags_ns:
            counts["writer_lag_max_us"] = max(self._lags_ns) // 1000
            counts["writer_lag_median_us"] = int(np.median(self._lags_ns)) // 1000
        gate = getattr(self.probes, "gate", None)
        if gate is not None:
            counts["exec_gate_held"] = gate.report.held
            counts["exec_gate_longest_us"] = int(gate.report.longest_s * 1e6)
            counts["exec_gate_ran_on"] = len(gate.report.ran_on)
        stats = {name: ran for name, ran in self.probes.run_stats().items() if ran[1]}
        if stats:
            counts["probe_run_ns"] = sum(run_ns for run_ns, _ in stats.values())
            counts["probe_runs"] = sum(runs for _, runs in stats.values())
            for name, (run_ns, runs) in sorted(stats.items()):
                counts[f"probe_run_ns.{name}"], counts[f"probe_runs.{name}"] = run_ns, runs
        return counts

    @property
    def dropped_at_stop(self) -> int:
        """Events captured but never handed to the sinks because the stop deadline passed."""
        return self._dropped_by_reader + self._dropped_by_worker

    @property
    def abandoned(self) -> bool:
        """Whether the stop deadline passed before everything was handed on."""
        return self._abandoned

    def stop(self, deadline: StopDeadline | None = None) -> None:
        """Drain what is left (detach the probes first), flush and close the sinks, by the
        deadline (None: however long it takes); past it, abandon."""
        if self._capture is not None:
            self._capture.stop()
            if self._worker.ident is not None and not join_by([self._worker, self._reader], deadline):
                self._abandon()
            if self._reader.is_alive():  # stuck: the capture process would wait for it forever
                self._capture.kill()
            self._capture.close()
        if self._accounting is not None:
            self._accounting.stop()
        if self.error is None:
            self._report_lost()
            self._report_throttles(final=True)
            if self.dropped_at_stop:  # so the traces' end records count them too
                self.sinks.lost(time.time_ns(), {UNWRITTEN: self.dropped_at_stop})
            if not self._abandoned:
                self._check_accounting(final=True)
            self.sinks.counters(self.counters())
        self.sinks.close(deadline)
        if self.error is not None:
            raise self.error

    def _abandon(self) -> None:
        """Past the deadline: the reader reads the stream out without keeping it, the worker
        drops what is queued, the sinks drop what they hold; both threads get a moment to end."""
        self._abandoned = True
        self._queue.abandon()
        self.sinks.abandon()
        join_by([self._worker, self._reader], grace())
        if self._worker.is_alive():  # stuck: count what it will never take
            with contextlib.suppress(queue.Empty):
                while True:
                    item = self._queue.get_nowait()
                    if isinstance(item, tuple):
                        self._dropped_by_reader += item[0].size
