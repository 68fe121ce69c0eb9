"""Taskstats records decoded by BTF offsets, and traced counts set beside them."""

from __future__ import annotations

import struct

import polars as pl

from ioobserve.collect.accounting import DROP, TAKE, WAIT, AccountingCheck, TaskstatsLayout
from ioobserve.data import events as ev
from ioobserve.data import schema as s
from ioobserve.data.model import COUNTERS

LAYOUT = TaskstatsLayout({name: 64 + 8 * i for i, name in enumerate(COUNTERS)}, pid=8, tgid=12, size=160)


def _payload(tid: int, tgid: int, **counters: int) -> bytes:
    data = bytearray(LAYOUT.size)
    struct.pack_into("<II", data, 8, tid, tgid)
    for name, at in LAYOUT.counters.items():
        struct.pack_into("<Q", data, at, counters.get(name, 0))
    return bytes(data)


def test_records_decode_by_layout_and_name_their_process():
    assert LAYOUT.decode(_payload(11, 10, read_syscalls=2048, write_char=4096)) == (
        10, {**dict.fromkeys(COUNTERS, 0), "read_syscalls": 2048, "write_char": 4096})
    assert LAYOUT.decode(_payload(11, 10)[:100]) is None  # shorter than this kernel's struct


def _events(pid: int, reads: int, writes: int, copies: int = 0) -> pl.DataFrame:
    syscall = s.LAYER_SYSCALL
    rows = [(syscall, "read", 100, 0, True)] * reads + [(syscall, "pwrite64", 10, 0, True)] * writes
    rows += [(syscall, "sendfile", 50, 0, True), (syscall, "sendfile", 50, ev.F_PAIR_OUT | ev.F_REPEAT, False)] * copies
    # libc's read wrapper: the same I/O seen a layer up, never counted again
    rows += [(s.LAYER_POSIX, "read", 100, 0, True)] * 7
    return pl.DataFrame([(pid, *row) for row in rows], orient="row",
                        schema={s.PID: pl.UInt32, s.LAYER: pl.String, s.OP: pl.String, s.BYTES: pl.UInt64, s.FLAGS: pl.UInt16,
                                s.COUNTED: pl.Boolean})


def test_traced_counts_beside_the_kernels():
    check = AccountingCheck()
    check.add_events(_events(10, 1500, 600, copies=2))
    check.add_events(_events(10, 500, 0))
    check.add_events(_events(20, 40, 0))
    # pid 10: the kernel rounds 2002 reads down to 1024 and adds its own exec reads; pid 20:
    # the kernel saw 3072 reads that were not traced; pid 30 was not traced from its start.
    check.add_exits({10: {**dict.fromkeys(COUNTERS, 0), "read_syscalls": 1024, "write_syscalls": 0,
                          "read_char": 199_680, "write_char": 6144},
                     20: {**dict.fromkeys(COUNTERS, 0), "read_syscalls": 3072, "read_char": 3072},
                     30: dict.fromkeys(COUNTERS, 0)}, received=5.0)
    assert check.ready(lambda pid, received: WAIT).height == 0  # not yet: its exit is not drained
    rows = {row["pid"]: row for row in check.ready(lambda pid, received: DROP if pid == 30 else TAKE).iter_rows(named=True)}
    assert set(rows) == {10, 20}
    assert (rows[10]["traced_reads"], rows[10]["traced_writes"]) == (2002, 602)  # a copy is one read and one write
    assert rows[10]["traced_read_bytes"] == 2000 * 100 + 2 * 50 and rows[10]["agrees"]
    assert rows[20]["traced_reads"] == 40 and not rows[20]["agrees"]
    assert check.ready(lambda pid, received: TAKE).height == 0  # each process once
