"""The collector's worker thread: each batch's records applied to the context tables, its
events enriched and handed to every sink, and the housekeeping run between batches."""

from __future__ import annotations

import threading
import time

import numpy as np
import polars as pl

from ioobserve.collect.context_tables import ContextTables
from ioobserve.collect.enrich import Enricher
from ioobserve.collect.housekeeping import Housekeeping
from ioobserve.collect.reader import BatchReader
from ioobserve.data import events as ev
from ioobserve.data import schema as s
from ioobserve.data.decode import AuxBatch
from ioobserve.data.model import BatchTables
from ioobserve.plumbing.thread_names import name_this_thread
from ioobserve.sinks.base import Sinks


def outside_prefixes(prefixes: list[str], files: pl.DataFrame) -> pl.Expr:
    """Events named by a relative path argument that resolves outside every --path-prefix, or
    by none at all (files: the batch's, FILE_ROW_SCHEMA).

    The kernel decides the path filter for open files (by directory inode) and for absolute
    path arguments; a relative one is only complete once joined to its base directory here."""
    path = pl.col(s.PATH)
    inside = pl.any_horizontal(*((path == p) | path.str.starts_with(p.rstrip("/") + "/") for p in prefixes))
    outside = files.filter(~inside).get_column(s.FILE)
    return ((pl.col(s.FLAGS) & ev.F_NAME) != 0) & (pl.col(s.FILE).is_null() | pl.col(s.FILE).is_in(outside.implode()))


class Worker:
    """Takes the reader's batches until the stream ends; stop() of the collector joins it."""

    def __init__(self, reader: BatchReader, context: ContextTables, enricher: Enricher, sinks: Sinks,
                 housekeeping: Housekeeping, path_prefixes: list[str]) -> None:
        self.reader = reader
        self.context = context
        self.enricher = enricher
        self.sinks = sinks
        self.housekeeping = housekeeping
        self.path_prefixes = path_prefixes
        self.records = 0  # events handed on
        self.error: BaseException | None = None  # what ended the stream or failed here, first
        self.abandoned = False  # past the stop deadline: batches are counted, not handled
        self.dropped = 0
        self.lags_ns: list[int] = []  # per batch handed to the sinks: now minus its oldest call's end
        self._announced: set[int] = set()
        self.thread = threading.Thread(target=self._loop, name="ioobserve-worker", daemon=True)

    def _loop(self) -> None:
        name_this_thread()
        while (item := self.reader.take()) is not None:
            if isinstance(item, BaseException):
                self.error = self.error or item
                break
            if self.error is not None:
                continue  # after a failure the stream is still read to its end
            if self.abandoned:
                self.dropped += item[0].size
                continue
            try:
                self.process(*item)
                if self.housekeeping.due():
                    self._announced.difference_update(self.housekeeping.run(self.hand_over))
            except BaseException as exc:  # surfaced by the collector's stop()
                self.error = exc
        if self.error is None and not self.abandoned:
            try:
                self.hand_over(*self.enricher.end_spans())  # the calls still open when the recording ends
            except BaseException as exc:
                self.error = exc

    def hand_over(self, frame: pl.DataFrame, tables: BatchTables) -> None:
        """Events made here rather than drained (ended Python spans), to every sink."""
        if frame.height or tables.stacks:
            self.sinks.events(frame, tables)

    def process(self, batch: np.ndarray, records: AuxBatch) -> None:
        """One batch: its records first (they name its events), then its events, to every sink."""
        changed = self.context.apply(records)
        self.enricher.add_names(records.names)
        if records.heads:
            self.enricher.add_heads(records.heads)
            self.sinks.heads(records.heads)
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
            if self.path_prefixes:
                frame = frame.filter(~outside_prefixes(self.path_prefixes, tables.files))
            self.sinks.events(frame, tables)
            # How far behind the calls this batch was handed on: from its oldest call's end.
            self.lags_ns.append(time.monotonic_ns() - int((batch["ts_ns"] + batch["dur_ns"]).min()))
            self.housekeeping.saw(frame)
