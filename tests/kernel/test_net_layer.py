"""The net layer (--layers net): a workload's loopback traffic over TCP (IPv4 and IPv6) and
UDP is traced call for call as the workload counts it, by every way in (recvfrom and sendto,
recvmsg and sendmsg, read and write, readv and writev on the socket, connect, accept4), each
call on its connection's name and on the Python function that made it; its Unix socket and
pipe are not; and without the layer no socket call is traced at all."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from ioobserve.data import schema as s
from ioobserve.trace.read.reader import load
from tests.conftest import PYTHON, ROOT
from tests.kernel.python_checks import why_unwalked
from tests.kernel.kernel_side import ran
from tests.kernel.recorder import json_line, record_command

pytestmark = [pytest.mark.kernel, pytest.mark.matrix]

WORKLOAD = ROOT / "tests" / "workloads" / "socket_workload.py"
# The workload's functions that make the calls (socket.accept is the standard library's).
CALLERS = {"send", "receive", "datagrams", "short_lived", "exchange", "socket.accept"}


def _record_sockets(side, *options: str) -> dict:
    return ran(record_command(side.out / "trace", [PYTHON, str(WORKLOAD)], *options))


def _recorded(kernel_side, *options: str) -> tuple[dict, pl.DataFrame, list[Path]]:
    recorded = kernel_side(_record_sockets, *options)
    done = recorded.done()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json_line(done.stdout, "calls")
    traces = recorded.traces()
    return report, load(traces).filter(pl.col(s.PID) == report["pid"]), traces


def test_every_socket_call_is_traced_with_its_connection_bytes_and_caller(root_required, kernel_side):
    report, events, traces = _recorded(kernel_side, "--layers", "net")
    net = events.filter(pl.col(s.LAYER) == s.LAYER_NET)
    # (connection, op) -> calls and the bytes (or fd, for accept4) they returned, both ways
    expected = Counter()
    for name, op, result in report["calls"]:
        expected[(name, op, "calls")] += 1
        expected[(name, op, "sum")] += result if op != "accept4" else 0
    seen = Counter()
    for row in net.iter_rows(named=True):
        seen[(row[s.PATH], row[s.OP], "calls")] += 1
        seen[(row[s.PATH], row[s.OP], "sum")] += row[s.RET] if row[s.OP] != "accept4" else 0
    assert seen == expected, (sorted(set(seen.items()) - set(expected.items())),
                              sorted(set(expected.items()) - set(seen.items())))
    assert {name.split(":")[0] for name, _, _ in report["calls"]} == {"tcp", "udp"}
    assert any("[::1]" in name for name, _, _ in report["calls"])
    # the bytes asked of each transfer are there too, and no socket has a file offset
    transfers = net.filter(pl.col(s.OP).is_in(["sendto", "sendmsg", "write", "writev"]))
    assert (transfers.get_column(s.BYTES_REQ) >= transfers.get_column(s.RET)).all()
    assert (transfers.get_column(s.BYTES_REQ) > 0).all()
    assert net.get_column(s.OFFSET).is_null().all() or (net.get_column(s.OFFSET) == -1).all()
    # every call names the Python function that made it
    assert net.get_column(s.PY_FUNCTION).null_count() == 0, why_unwalked(traces, net, "")
    assert set(net.get_column(s.PY_FUNCTION).cast(pl.String).unique().to_list()) <= CALLERS
    # the Unix socket pair and the pipe are no network: no event of the net layer names them,
    # and the file layer does not take their bytes for files'
    assert report["unix_bytes"] > 0 and report["pipe_bytes"] > 0
    assert not events.filter((pl.col(s.LAYER) == s.LAYER_SYSCALL) & pl.col(s.PATH).cast(pl.String)
                             .str.contains(r"^(tcp|udp|socket):")).height


def test_without_the_net_layer_no_socket_call_is_traced(root_required, kernel_side):
    report, events, _ = _recorded(kernel_side)
    assert len(report["calls"]) > 100
    assert events.filter(pl.col(s.LAYER) == s.LAYER_NET).height == 0
    assert events.filter(pl.col(s.OP).is_in(["recvfrom", "sendto", "recvmsg", "sendmsg", "connect", "accept4"])).height == 0
    # read and write on the sockets are not taken for file I/O either
    reads = events.filter((pl.col(s.LAYER) == s.LAYER_SYSCALL) & pl.col(s.OP).is_in(["read", "readv", "write", "writev"]))
    assert reads.filter(pl.col(s.PATH).is_null() | pl.col(s.PATH).cast(pl.String).str.contains(r"^(tcp|udp):")).height == 0
