"""The capture process: drains the ring buffers and streams batches to the recorder.

A separate process, not a thread, because the drain must never wait: a thread shares the
GIL with the worker and writer, and when those run niced (the observed applications come
first) a preempted GIL holder would stall the drain until the rings overflow. The child
runs above the jobs' priority (ioobserve.collect.priority.drain_priority), holds only the
ring fds, two pipes and the spill file, buffers a burst (up to the backlog's total bytes: in
memory, then in the spill file, collect.backlog) when the recorder falls behind, and stops
reading the rings beyond that, so the kernel counts the loss.

Stream format, per message: u64 event bytes, u64 aux bytes, u64 the most the spill file
has held so far (bytes), then the fixed-size event
records as they lay in the ring (each after its 8-byte ring header: ring_dtype),
then the auxiliary records as they lay in the ring too (RingReader.read_blob). A
message with both sizes zero ends the stream.

The rings are read through their memory mapping, in batches, without a callback per record.
A BPF_MAP_TYPE_RINGBUF map is mapped as: one consumer page (read-write), one producer page
(read-only), then the data area mapped twice in a row so a record that wraps is contiguous.
Each record starts with an 8-byte header (RING_HEADER): u32 length with BUSY (bit 31) and
DISCARD (bit 30) flags, u32 page offset; records are 8-byte aligned. bcc's ring_buffer_poll
calls Python once per record (~300k records/s here); reading the mapping directly lets a batch
of fixed-size records become one numpy array, and a batch of variable-size ones one blob.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import mmap
import os
import select
import signal
import struct
import time

import numpy as np

from ioobserve import _core
from ioobserve.collect.backlog import Backlog, BacklogLimits, SpillFile, open_spill
from ioobserve.collect.priority import drain_priority
from ioobserve.data import events as ev
from ioobserve.plumbing.memory import keep_freed_buffers
from ioobserve.plumbing.thread_names import name_this_thread

# The rings, read through their memory mapping.

BUSY = 1 << 31
DISCARD = 1 << 30
RING_HEADER = 8
PAGE = os.sysconf("SC_PAGE_SIZE")


def _stride(record_size: int) -> int:
    return (record_size + RING_HEADER + 7) & ~7


@functools.lru_cache(maxsize=8)
def ring_dtype(dtype: np.dtype) -> np.dtype:
    """`dtype`'s fields as records lie in the ring: after their header, 8-byte aligned."""
    fields = dtype.fields
    return np.dtype({"names": list(dtype.names), "formats": [fields[name][0] for name in dtype.names],
                     "offsets": [fields[name][1] + RING_HEADER for name in dtype.names], "itemsize": _stride(dtype.itemsize)})


def records_of(raw, dtype: np.dtype) -> np.ndarray:
    """The records of read_raw's bytes (any bytes-like) as an array of ring_dtype(dtype),
    without a copy, less those the kernel discarded."""
    records = np.frombuffer(raw, dtype=ring_dtype(dtype))
    if not records.size:
        return records
    headers = np.ndarray((records.size,), dtype=np.uint32, buffer=records.data, strides=(records.itemsize,))
    discarded = (headers & DISCARD) != 0
    return records[~discarded] if discarded.any() else records


class RingReader:
    """Consumer side of one ring buffer map."""

    def __init__(self, map_fd: int, size: int):
        if size & (size - 1):
            raise ValueError("ring buffer size must be a power of two")
        self.size = size
        self._mask = size - 1
        self._consumer_map = mmap.mmap(map_fd, PAGE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=0)
        self._data_map = mmap.mmap(map_fd, PAGE + 2 * size, mmap.MAP_SHARED, mmap.PROT_READ, offset=PAGE)
        # Aligned 8-byte loads and stores through numpy views are single instructions.
        self._consumer = np.frombuffer(self._consumer_map, dtype=np.uint64, count=1)
        self._producer = np.frombuffer(self._data_map, dtype=np.uint64, count=1)
        self._data = np.frombuffer(self._data_map, dtype=np.uint8, offset=PAGE)

    def pending_bytes(self) -> int:
        """Bytes produced but not yet consumed."""
        return int(self._producer[0]) - int(self._consumer[0])

    def read_raw(self, dtype: np.dtype, limit: int | None = None) -> bytes:
        """Consume committed records that all have the size of `dtype` (at most `limit`), as
        they lie in the ring, headers included: one copy (records_of reads them)."""
        cons = int(self._consumer[0])
        prod = int(self._producer[0])
        stride = _stride(dtype.itemsize)
        count = (prod - cons) // stride
        if limit is not None:
            count = min(count, limit)
        if count <= 0:
            return b""
        start = cons & self._mask
        window = self._data[start : start + count * stride]
        headers = np.ndarray((count,), dtype=np.uint32, buffer=window, strides=(stride,))
        busy = np.flatnonzero(headers & BUSY)
        if busy.size:
            count = int(busy[0])  # stop at the first record still being written
        raw = window[: count * stride].tobytes()
        self._consumer[0] = cons + count * stride
        return raw

    def read_fixed(self, dtype: np.dtype, limit: int | None = None) -> np.ndarray:
        """Consume committed records that all have the size of `dtype`, as an array."""
        return records_of(self.read_raw(dtype, limit), dtype)

    def read_blob(self, limit_bytes: int | None = None) -> bytes:
        """Consume committed variable-size records as they lie in the ring, headers included
        (discarded ones too), up to the first still being written: one copy, and no Python
        object per record (decode.decode_aux reads them)."""
        cons = int(self._consumer[0])
        prod = int(self._producer[0])
        end = prod if limit_bytes is None else min(prod, cons + limit_bytes)
        if end <= cons:
            return b""
        start = cons & self._mask
        window = self._data[start : start + (end - cons)]  # the data area is mapped twice: no wrap
        committed = _core.ring_committed(window)
        raw = window[:committed].tobytes()
        self._consumer[0] = cons + committed
        return raw

    def close(self) -> None:
        """Unmap the buffer."""
        del self._consumer, self._producer, self._data
        self._consumer_map.close()
        self._data_map.close()


# The capture process.

HEADER = struct.Struct("<QQQ")
F_SETPIPE_SZ = 1031
PIPE_BYTES = 1 << 20
PR_SET_PDEATHSIG = 1
# Records taken from the ring at a time (about 2 MiB): the kernel gets the space back as each
# chunk is copied, not after a whole ring's worth.
DRAIN_RECORDS = 1 << 14
RECORD_STRIDE = ring_dtype(ev.EVENT).itemsize


def encode(raw_events: bytes, aux_blob: bytes, spilled_peak: int = 0) -> list[bytes]:
    """One stream message, as the pieces to write (written one after the other, not joined:
    the records are copied only from the ring, then by the kernel into the pipe)."""
    return [HEADER.pack(len(raw_events), len(aux_blob), spilled_peak), raw_events, aux_blob]


def decode(events_blob, aux_blob) -> tuple[np.ndarray, memoryview]:
    """A message's payload (bytes-like) back into an event array (ring_dtype of
    events.EVENT, no copy) and the auxiliary records' ring blob (decode.decode_aux reads it)."""
    return records_of(events_blob, ev.EVENT), memoryview(aux_blob)


def _read_exactly(fd: int, size: int) -> bytearray | None:
    """`size` bytes from the pipe, read straight into one buffer (a batch is copied once on
    its way here, by the kernel); None if the stream ends first."""
    buffer = bytearray(size)
    view, got = memoryview(buffer), 0
    while got < size:
        n = os.readv(fd, [view[got:]])  # releases the GIL while it waits
        if not n:
            return None
        got += n
    return buffer


class CaptureProcess:
    """Parent side: start the drain child, read its batches, stop it."""

    def __init__(self, rings: dict[str, tuple[int, int]], poll_interval: float, limits: BacklogLimits,
                 nice: int | None = None):
        spill_fd = None
        if limits.spill_dir is not None and limits.memory_bytes < limits.total_bytes:
            with contextlib.suppress(OSError):  # record chose a directory that could make one; if not now, in memory
                spill_fd = open_spill(limits.spill_dir)
        self.spilled_peak = 0  # the most the capture process's spill file held, bytes
        data_read, data_write = os.pipe()
        stop_read, self._stop_write = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # child
            status = 1
            try:
                if os.read(stop_read, 1) != b"g":  # wait for go(): the recorder first excludes us
                    os._exit(1)  # the recorder went away before starting us
                keep = {0, 1, 2, data_write, stop_read, spill_fd} | {fd for fd, _ in rings.values()}
                for fd in _open_fds():
                    if fd not in keep:  # above all the probes' link fds: detaching must not wait on us
                        try:
                            os.close(fd)
                        except OSError:
                            pass  # the directory listing's own fd
                backlog = Backlog(limits.memory_bytes, SpillFile(spill_fd) if spill_fd is not None else None)
                _drain(rings, data_write, stop_read, poll_interval, backlog, limits.total_bytes, nice)
                status = 0
            finally:
                os._exit(status)
        os.close(data_write)
        os.close(stop_read)
        if spill_fd is not None:
            os.close(spill_fd)
        self._data = data_read

    def go(self) -> None:
        """Let the child start draining."""
        os.write(self._stop_write, b"g")

    def batches(self):
        """Yield (events, aux records) until the child ends the stream."""
        while True:
            header = _read_exactly(self._data, HEADER.size)
            if header is None:
                raise RuntimeError("the capture process ended without finishing its stream")
            events_size, aux_size, self.spilled_peak = HEADER.unpack(header)
            if not events_size and not aux_size:
                return
            payload = _read_exactly(self._data, events_size + aux_size)
            if payload is None:
                raise RuntimeError("the capture process ended in the middle of a batch")
            view = memoryview(payload)
            yield decode(view[:events_size], view[events_size:])

    def stop(self) -> None:
        """Ask the child to drain what is left and end the stream (call once nothing new comes:
        the probes stopped selecting, or are detached)."""
        if self._stop_write >= 0:
            os.write(self._stop_write, b"x")
            os.close(self._stop_write)
            self._stop_write = -1

    def kill(self) -> None:
        """End the child now, whatever it still holds (its reader is gone)."""
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def close(self) -> None:
        """Reap the child and close the stream."""
        self.stop()
        os.waitpid(self.pid, 0)
        os.close(self._data)


def _open_fds() -> list[int]:
    return [int(name) for name in os.listdir("/proc/self/fd")]


def _drain(rings, out: int, stop: int, poll_interval: float, backlog: Backlog, total_bytes: int,
           nice: int | None) -> None:
    """The child's loop: drain, buffer, write without blocking, until asked to stop and the
    rings are empty."""
    for signum in (signal.SIGINT, signal.SIGTERM):  # the recorder decides when to stop
        signal.signal(signum, signal.SIG_IGN)
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # never outlive the recorder
    name_this_thread("ioo-capture")
    keep_freed_buffers()  # each chunk and message is a new buffer: reused, not faulted in again
    if nice is not None:
        drain_priority(nice)
    try:
        fcntl.fcntl(out, F_SETPIPE_SZ, PIPE_BYTES)
    except OSError:
        pass  # a smaller pipe only means more, smaller writes
    os.set_blocking(out, False)
    events = RingReader(*rings["events"])
    aux = RingReader(*rings["aux"])
    stopping = False
    while True:
        stopping = stopping or bool(select.select([stop], [], [], 0)[0])
        raw = b""
        if backlog.size < total_bytes:  # beyond the backlog the rings overflow: counted loss
            raw = events.read_raw(ev.EVENT, DRAIN_RECORDS)
            records = aux.read_blob()  # after events: every name/path they need is in
            if raw or records:
                for piece in encode(raw, records, backlog.spilled_peak):
                    backlog.add(piece)
        backlog.write_to(out)
        empty = not events.pending_bytes() and not aux.pending_bytes()
        if stopping and empty and not backlog:
            break  # the probes are detached and everything is out
        if len(raw) == DRAIN_RECORDS * RECORD_STRIDE and backlog.size < total_bytes:
            continue  # a whole chunk, and more behind it: the pipe can wait, the rings cannot
        if backlog:
            select.select([], [out], [], poll_interval)  # until the recorder reads
        elif empty:
            time.sleep(poll_interval)
    os.set_blocking(out, True)
    os.write(out, HEADER.pack(0, 0, backlog.spilled_peak))

