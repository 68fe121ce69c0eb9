"""The worker's queue: batches queued behind one are taken with it, merged in order, and the
stream's end (None, or an error) still comes, after them."""

from __future__ import annotations

import numpy as np

from ioobserve.collect.reader import BatchReader
from ioobserve.data import events as ev
from ioobserve.data.decode import AuxBatch, ProcRecord


def _queue_of(*items) -> BatchReader:
    """A reader whose thread never ran, its queue filled (the worker's side of it is pure logic)."""
    reader = BatchReader(probes=None, context=None)
    for item in items:
        reader._queue.put(item, item[0].nbytes if isinstance(item, tuple) else 0)
    return reader


def _batch(first_ts: int, count: int, name: str) -> tuple[np.ndarray, AuxBatch]:
    events = np.zeros(count, dtype=ev.EVENT)
    events["ts_ns"] = np.arange(first_ts, first_ts + count)
    return events, AuxBatch(procs=[ProcRecord(ev.PROC_EXIT, first_ts, 1, 1, 0, 0, 0, 0, name, "", ())])


def test_queued_batches_merge_in_order_and_the_end_follows():
    collector = _queue_of(_batch(0, 3, "a"), _batch(3, 2, "b"), None)
    events, records = collector.take()
    assert events["ts_ns"].tolist() == [0, 1, 2, 3, 4]
    assert [proc.comm for proc in records.procs] == ["a", "b"]
    assert collector._queue.held == 0
    assert collector.take() is None  # held back, not lost


def test_an_error_ends_the_stream_after_the_batches_before_it():
    failure = RuntimeError("capture died")
    collector = _queue_of(_batch(0, 1, "a"), failure)
    assert collector.take()[0].size == 1
    assert collector.take() is failure
