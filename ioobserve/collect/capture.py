"""The capture process: drains the ring buffers and streams batches to the recorder.

A separate process, not a thread, because the drain must never wait: a thread shares the
GIL with the worker and writer, and when those run niced (the observed applications come
first) a preempted GIL holder would stall the drain until the rings overflow. The child
runs above the jobs' priority (ioobserve.collect.priority.drain_priority), holds only the
ring fds and two pipes, buffers a burst in memory (up to `backlog_bytes`) when the recorder
falls behind, and stops reading the rings beyond that, so the kernel counts the loss.

Stream format, per message: u64 event bytes, u64 aux bytes, then the fixed-size event
records as they lay in the ring (each after its 8-byte ring header: ringbuf.ring_dtype),
then the auxiliary records as they lay in the ring too (ringbuf.RingReader.read_blob). A
message with both sizes zero ends the stream.
"""

from __future__ import annotations

import collections
import ctypes
import fcntl
import os
import select
import signal
import struct
import time

import numpy as np

from ioobserve import events as ev
from ioobserve.collect.priority import drain_priority
from ioobserve.collect.ringbuf import RingReader, records_of, ring_dtype
from ioobserve.memory import keep_freed_buffers
from ioobserve.thread_names import name_this_thread

HEADER = struct.Struct("<QQ")
F_SETPIPE_SZ = 1031
PIPE_BYTES = 1 << 20
PR_SET_PDEATHSIG = 1
# Records taken from the ring at a time (about 2 MiB): the kernel gets the space back as each
# chunk is copied, not after a whole ring's worth.
DRAIN_RECORDS = 1 << 14
RECORD_STRIDE = ring_dtype(ev.EVENT).itemsize


def encode(raw_events: bytes, aux_blob: bytes) -> list[bytes]:
    """One stream message, as the pieces to write (written one after the other, not joined:
    the records are copied only from the ring, then by the kernel into the pipe)."""
    return [HEADER.pack(len(raw_events), len(aux_blob)), raw_events, aux_blob]


def decode(events_blob, aux_blob) -> tuple[np.ndarray, memoryview]:
    """A message's payload (bytes-like) back into an event array (ringbuf.ring_dtype of
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

    def __init__(self, rings: dict[str, tuple[int, int]], poll_interval: float, backlog_bytes: int,
                 nice: int | None = None):
        data_read, data_write = os.pipe()
        stop_read, self._stop_write = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # child
            status = 1
            try:
                if os.read(stop_read, 1) != b"g":  # wait for go(): the recorder first excludes us
                    os._exit(1)  # the recorder went away before starting us
                keep = {0, 1, 2, data_write, stop_read} | {fd for fd, _ in rings.values()}
                for fd in _open_fds():
                    if fd not in keep:  # above all the probes' link fds: detaching must not wait on us
                        try:
                            os.close(fd)
                        except OSError:
                            pass  # the directory listing's own fd
                _drain(rings, data_write, stop_read, poll_interval, backlog_bytes, nice)
                status = 0
            finally:
                os._exit(status)
        os.close(data_write)
        os.close(stop_read)
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
            events_size, aux_size = HEADER.unpack(header)
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


def _drain(rings, out: int, stop: int, poll_interval: float, backlog_bytes: int, nice: int | None) -> None:
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
    pending: collections.deque = collections.deque()
    pending_bytes = 0
    stopping = False
    while True:
        stopping = stopping or bool(select.select([stop], [], [], 0)[0])
        raw = b""
        if pending_bytes < backlog_bytes:  # beyond the backlog the rings overflow: counted loss
            raw = events.read_raw(ev.EVENT, DRAIN_RECORDS)
            records = aux.read_blob()  # after events: every name/path they need is in
            if raw or records:
                for piece in encode(raw, records):
                    if piece:
                        pending.append(memoryview(piece))
                        pending_bytes += len(piece)
        pending_bytes -= _write_some(out, pending)
        empty = not events.pending_bytes() and not aux.pending_bytes()
        if stopping and empty and not pending:
            break  # the probes are detached and everything is out
        if len(raw) == DRAIN_RECORDS * RECORD_STRIDE and pending_bytes < backlog_bytes:
            continue  # a whole chunk, and more behind it: the pipe can wait, the rings cannot
        if pending:
            select.select([], [out], [], poll_interval)  # until the recorder reads
        elif empty:
            time.sleep(poll_interval)
    os.set_blocking(out, True)
    os.write(out, HEADER.pack(0, 0))


def _write_some(fd: int, pending: collections.deque) -> int:
    """Write queued messages until the pipe is full; returns the bytes written."""
    written = 0
    while pending:
        try:
            n = os.write(fd, pending[0])
        except BlockingIOError:
            break
        written += n
        if n == len(pending[0]):
            pending.popleft()
        else:
            pending[0] = pending[0][n:]
    return written
