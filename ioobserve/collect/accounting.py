"""The kernel's own I/O accounting of every exiting task (taskstats over generic netlink,
received through pyroute2), summed per process, to set beside what was traced.

The kernel sends one record per exiting thread with that thread's counters: read and write
syscalls, bytes through them (read_char/write_char), bytes that reached storage
(read_bytes/write_bytes) and block-I/O wait (with kernel.task_delayacct=1). The record's
layout grows with kernel versions, so it is decoded with offsets from BTF, not a fixed copy.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import socket
import struct
import threading
from dataclasses import dataclass

import polars as pl

from ioobserve.data import events as ev
from ioobserve.data import schema as s
from ioobserve.data.model import ACCOUNTING_SCHEMA, COUNTERS, TRACED
from ioobserve.probes.kernel.btf import Btf, BtfError

DELAYACCT = "/proc/sys/kernel/task_delayacct"
_POLL_S = 0.2
_DATAGRAM = 1 << 16
RECEIVE_BUFFER = 16 << 20
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)


class AccountingError(Exception):
    """Taskstats cannot be used here (no BTF layout, no netlink family, no privileges)."""


@dataclass(frozen=True)
class TaskstatsLayout:
    """Where the kept fields sit in this kernel's struct taskstats."""

    counters: dict[str, int]
    pid: int
    tgid: int | None  # ac_tgid exists since taskstats version 13
    size: int

    @classmethod
    def from_btf(cls, btf: Btf) -> TaskstatsLayout:
        """The layout of the running kernel's struct taskstats."""
        try:
            counters = {name: btf.offset("taskstats", name) for name in COUNTERS}
            tgid = btf.offset("taskstats", "ac_tgid") if btf.has_member("taskstats", "ac_tgid") else None
            return cls(counters, btf.offset("taskstats", "ac_pid"), tgid, btf.struct_size("taskstats"))
        except BtfError as exc:
            raise AccountingError(f"taskstats layout not in BTF: {exc}") from None

    def decode(self, payload: bytes) -> tuple[int, dict[str, int]] | None:
        """(tgid, counters) of one record, or None if it is too short to be this layout."""
        if len(payload) < self.size:
            return None
        pid = struct.unpack_from("<I", payload, self.pid)[0]
        tgid = struct.unpack_from("<I", payload, self.tgid)[0] if self.tgid is not None else pid
        return tgid or pid, {name: struct.unpack_from("<Q", payload, at)[0] for name, at in self.counters.items()}


def delay_accounting_enabled() -> bool:
    """Whether the kernel measures block-I/O wait per task (kernel.task_delayacct)."""
    try:
        with open(DELAYACCT) as flag:
            return flag.read().strip() == "1"
    except OSError:
        return False


def _enlarge_receive_buffer(fd: int) -> None:
    """Room for a burst of exits (each record ~600 bytes) while the thread waits for the GIL."""
    probe = socket.socket(fileno=os.dup(fd))
    try:
        probe.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RECEIVE_BUFFER)
    except OSError:  # without CAP_NET_ADMIN: the limit rmem_max allows
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
    finally:
        probe.close()


class ExitAccounting:
    """Receives every exiting task's taskstats on a thread of its own; `take()` hands over
    the totals per process received so far."""

    def __init__(self, layout: TaskstatsLayout):
        self.layout = layout
        self._cpus = f"0-{os.cpu_count() - 1}"
        self._lock = threading.Lock()
        self._totals: dict[int, dict[str, int]] = {}
        self._stop = threading.Event()
        self._wake_read = self._wake_write = -1  # a pipe by which stop() wakes the receiving thread at once
        self._ready = threading.Event()
        self._error: Exception | None = None
        self._thread = threading.Thread(target=self._run, name="ioobserve-taskstats", daemon=True)
        self.records = 0
        self.overruns = 0  # times the socket overflowed: some exits were never received

    def start(self) -> None:
        """Register for every CPU's exiting tasks; raises AccountingError if the kernel refuses."""
        self._wake_read, self._wake_write = os.pipe()
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            self._thread.join()
            os.close(self._wake_write)
            self._wake_write = -1
            raise AccountingError(f"taskstats unavailable: {self._error}")

    def _run(self) -> None:
        # pyroute2's sockets run an event loop of their own: the socket is made and closed on
        # this one thread. Datagrams are read from its descriptor directly and parsed with
        # pyroute2's message class: its get() returns one datagram per call and keeps the rest
        # queued where select() cannot see them, so the last exits would wait for a next one.
        from pyroute2 import TaskStats  # only recording needs it
        from pyroute2.netlink.taskstats import taskstatsmsg

        try:
            sock = TaskStats()
            sock.bind()
            sock.register_mask(self._cpus)
        except Exception as exc:  # pyroute2 raises NetlinkError, OSError or its own errors
            self._error = exc
            os.close(self._wake_read)
            self._ready.set()
            return
        self._ready.set()
        fd = sock.fileno()
        _enlarge_receive_buffer(fd)
        try:
            while True:  # until asked to stop and nothing is left to read
                if fd in select.select([fd, self._wake_read], [], [], _POLL_S)[0]:
                    try:
                        data = os.read(fd, _DATAGRAM)
                    except OSError as exc:
                        if exc.errno != errno.ENOBUFS:
                            raise
                        self.overruns += 1  # the kernel dropped exits while we were behind
                        continue
                    while len(data) >= 16:
                        length = struct.unpack_from("<I", data)[0]
                        if length < 16:
                            break
                        message = taskstatsmsg(data[:length])
                        message.decode()
                        self._add(message)
                        data = data[(length + 3) & ~3 :]
                elif self._stop.is_set():
                    break
        finally:
            with contextlib.suppress(Exception):  # the kernel drops the registration with the socket anyway
                sock.deregister_mask(self._cpus)
            sock.close()
            os.close(self._wake_read)

    def _add(self, message) -> None:
        """Fold one netlink message (a thread's exit: its pid and stats) into the totals."""
        for _, nested in message.get("attrs", ()):
            if not hasattr(nested, "get_attr"):
                continue
            stats = nested.get_attr("TASKSTATS_TYPE_STATS")
            if stats is None or nested.offset is None:
                continue
            # The stats attribute's payload, after its 4-byte attribute header.
            start = stats.offset + 4
            decoded = self.layout.decode(bytes(message.data[start : stats.offset + stats.length]))
            if decoded is None:
                continue
            tgid, counters = decoded
            with self._lock:
                self.records += 1
                totals = self._totals.setdefault(tgid, dict.fromkeys(COUNTERS, 0))
                for name, value in counters.items():
                    totals[name] += value

    def take(self) -> dict[int, dict[str, int]]:
        """Per-process totals received since the last call."""
        with self._lock:
            taken, self._totals = self._totals, {}
        return taken

    def stop(self) -> None:
        """Deregister and close (waits for the receiving thread, which reads what the socket
        holds first: the exits of the recorded command came before its parent heard of them)."""
        self._stop.set()
        if self._wake_write >= 0:
            os.write(self._wake_write, b"x")
            os.close(self._wake_write)
            self._wake_write = -1
        if self._thread.ident is not None:
            self._thread.join()


# The kernel reports these counters rounded down to a multiple of 1024, and counts reads it
# makes itself (loading a program at exec: a few calls, a few KiB) as the process's own.
# So a process agrees when kernel <= traced + slack and traced < kernel + 1024.
ROUNDING = 1024
CALL_SLACK = 32
BYTE_SLACK = 64 << 10
# Which traced total each kernel counter is checked against.
CHECKED = {"read_syscalls": ("traced_reads", CALL_SLACK), "write_syscalls": ("traced_writes", CALL_SLACK),
           "read_char": ("traced_read_bytes", BYTE_SLACK), "write_char": ("traced_write_bytes", BYTE_SLACK)}
_READS, _WRITES, _COPIES = sorted(ev.READ_OPS), sorted(ev.WRITE_OPS), sorted(ev.COPY_OPS)
TAKE, WAIT, DROP = "take", "wait", "drop"  # what to do with a received process's accounting


class AccountingCheck:
    """Traced read/write calls and bytes per process, set beside the kernel's accounting of
    the process once it has exited and its last events have had time to be drained."""

    def __init__(self) -> None:
        self._traced: dict[int, list[int]] = {}
        self._exited: dict[int, tuple[float, tuple[int, ...]]] = {}  # pid -> (when received, COUNTERS values)

    def add_events(self, frame: pl.DataFrame) -> None:
        """Count a batch's read and write calls and bytes per process (one pass over the
        events, grouped by process and op; the ops are looked at in those few groups)."""
        groups = frame.group_by(s.PID, s.OP, s.LAYER, s.COUNTED).agg(pl.len().alias("calls"), pl.col(s.BYTES).sum())
        op, counted = pl.col(s.OP), pl.col(s.COUNTED) & (pl.col(s.LAYER) == s.LAYER_SYSCALL)
        # The kernel counts a copy (sendfile, splice, copy_file_range) as a read and a write:
        # its records are the call's two file sides, of which one is counted.
        reads = (op.is_in(_READS) | op.is_in(_COPIES)) & counted
        writes = (op.is_in(_WRITES) | op.is_in(_COPIES)) & counted
        calls, moved = pl.col("calls"), pl.col(s.BYTES)
        totals = groups.group_by(s.PID).agg(
            calls.filter(reads).sum().alias("reads"), calls.filter(writes).sum().alias("writes"),
            moved.filter(reads).sum().alias("read"), moved.filter(writes).sum().alias("written"),
        )
        for pid, *values in totals.iter_rows():
            kept = self._traced.setdefault(pid, [0, 0, 0, 0])
            for index, value in enumerate(values):
                kept[index] += value

    def add_exits(self, totals: dict[int, dict[str, int]], received: float) -> None:
        """The kernel's counters of processes whose (last) threads exited."""
        for pid, counters in totals.items():
            values = tuple(counters[name] for name in COUNTERS)  # compact: most are dropped unseen
            earlier = self._exited.get(pid)
            if earlier is not None:  # a straggling thread of a process already received
                values = tuple(a + b for a, b in zip(values, earlier[1], strict=True))
            self._exited[pid] = (received, values)

    def ready(self, verdict) -> pl.DataFrame:
        """ACCOUNTING_SCHEMA rows of the received processes `verdict(pid, received)` says to TAKE (traced
        from their start, and their exit already drained); those it says to DROP are forgotten,
        the rest (WAIT) kept for a later call."""
        rows = []
        for pid, (received, values) in list(self._exited.items()):
            decision = verdict(pid, received)
            if decision == WAIT:
                continue
            del self._exited[pid]
            counters = dict(zip(COUNTERS, values, strict=True))
            traced = dict(zip(TRACED, self._traced.pop(pid, [0, 0, 0, 0]), strict=True))
            if decision == TAKE:
                agrees = all(counters[theirs] <= traced[mine] + slack and traced[mine] < counters[theirs] + ROUNDING
                             for theirs, (mine, slack) in CHECKED.items())
                rows.append({"pid": pid, **counters, **traced, "agrees": agrees})
        return pl.DataFrame(rows, schema=ACCOUNTING_SCHEMA)

    def forget(self, pids) -> None:
        """Processes long gone whose accounting never came (or was not wanted)."""
        for pid in pids:
            self._traced.pop(pid, None)
