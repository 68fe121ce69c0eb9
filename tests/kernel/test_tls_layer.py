"""The TLS layer (--layers tls): HTTPS through the system's libssl, recorded by uprobes on it,
shows every successful SSL read and write of both sides with its plaintext bytes as the
workload counts them, on its connection's name (from SSL_set_fd); the writes that begin a
request, a garbled one too, and only those, say their head was copied; the socket calls
beneath carry the Python stack of the function that made the request; and the TLS handshakes
seen on the sockets are marked as such. Each request is an HTTP event with its object, range,
answer and the caller's stack; the garbled one makes none."""

from __future__ import annotations


import polars as pl
import pytest

from ioobserve.data import events as ev
from ioobserve.data import schema as s
from ioobserve.trace.read.reader import load, records
from tests.conftest import PYTHON, ROOT
from tests.kernel.certificates import self_signed
from tests.kernel.kernel_side import ran
from tests.kernel.library_checks import SSL_OPS, check_ssl_calls
from tests.kernel.recorder import json_line, record_command
from tests.workloads.tls_workload import RANGES

pytestmark = [pytest.mark.kernel, pytest.mark.matrix]

WORKLOAD = ROOT / "tests" / "workloads" / "tls_workload.py"
OWN_TLS = ROOT / "tests" / "workloads" / "own_tls_client.py"


def _record_https(side) -> dict:
    cert, key = self_signed(side.scratch)
    return ran(record_command(side.out / "trace", [PYTHON, str(WORKLOAD), str(cert), str(key)], "--layers", "tls"))


def test_ssl_reads_and_writes_are_traced_with_their_bytes_connection_and_request_heads(root_required, kernel_side):
    recorded = kernel_side(_record_https)
    done = recorded.done()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json_line(done.stdout, "calls")
    traces = recorded.traces()
    events = load(traces).filter(pl.col(s.PID) == report["pid"])
    tls = events.filter(pl.col(s.LAYER) == s.LAYER_TLS)

    moved = check_ssl_calls(tls, report)
    # Both SSLs were put on their sockets, and named by them.
    set_fd = tls.filter(pl.col(s.OP) == "SSL_set_fd")
    assert set_fd.height == 2 and set(set_fd.get_column(s.PATH).cast(pl.String)) == {name for name, *_ in report["calls"]}

    # The head of each request is copied (a garbled one too: the parser judges it), nothing else.
    writes = moved.filter(pl.col(s.OP).is_in(SSL_OPS["write"])).sort(s.TS)
    heads = [what in ("head", "garbled") for _, direction, _, what in report["calls"] if direction == "write"]
    client = {name for name, direction, _, what in report["calls"] if what == "head"}
    flagged = {(row[s.PATH] in client, bool(row[s.FLAGS] & ev.F_HEAD)) for row in writes.iter_rows(named=True)}
    assert writes.filter((pl.col(s.FLAGS) & ev.F_HEAD) != 0).height == sum(heads) == 6
    assert (False, True) not in flagged  # the server's answers are no requests

    # The socket calls beneath the SSL calls carry the Python stack up to the workload's function.
    stacks = {row["stack"]: [frame["function"] for frame in row["frames"]] for row in records(traces, "PS").select(
        pl.col("args").struct.field("stack"), pl.col("args").struct.field("frames")).iter_rows(named=True)}
    below = events.filter((pl.col(s.LAYER) == s.LAYER_NET) & pl.col(s.PARENT_TS).is_in(
        writes.filter((pl.col(s.FLAGS) & ev.F_HEAD) != 0).get_column(s.TS).implode()))
    assert below.height >= 6
    for stack_id in below.get_column(s.PY_STACK).to_list():
        assert stack_id is not None and "request" in stacks[stack_id], stacks.get(stack_id)
    # Each request is one HTTP event: the object, the range or body asked, the answer's bytes,
    # on the client's connection and the stack of the function that asked; the garbled one is none.
    http = events.filter(pl.col(s.LAYER) == s.LAYER_HTTP).sort(s.TS)
    ranges = [(f"https://127.0.0.1/bucket/shard-{first}.tar", first, last - first + 1) for first, last in RANGES]
    assert [(row[s.OP], row[s.PATH], row[s.OFFSET], row[s.BYTES_REQ]) for row in http.iter_rows(named=True)] == [
        *(("GET", path, first, size) for path, first, size in ranges),
        ("PUT", "https://127.0.0.1/bucket/checkpoint.pt", -1, report["body_bytes"])]
    answers = {}  # the client's reads, request by request: its calls are in order
    index = -1
    for name, direction, size, what in report["calls"]:
        if name in client and what in ("head", "garbled"):
            index += 1
        elif name in client and direction == "read":
            answers[index] = answers.get(index, 0) + size
    assert http.get_column(s.RET).to_list() == [answers[i] for i in range(len(RANGES) + 1)]
    # Each answer's head is copied from the client's first read of it (the garbled request's 400
    # too), none from the server's reads: the status is the answer's.
    reads = moved.filter(pl.col(s.OP).is_in(SSL_OPS["read"]))
    answered = reads.filter((pl.col(s.FLAGS) & ev.F_ANSWER) != 0)
    assert answered.height == len(RANGES) + 2 and set(answered.get_column(s.PATH).cast(pl.String)) == client
    assert http.get_column(s.STATUS).to_list() == [206] * len(RANGES) + [200]
    assert set(http.get_column(s.PATH2).cast(pl.String)) == client
    assert ((http.get_column(s.ARG) > 0) & (http.get_column(s.ARG) <= http.get_column(s.DUR) + 1000)).all()
    for stack_id in http.get_column(s.PY_STACK).to_list():
        assert "request" in stacks[stack_id], stacks[stack_id]
    # The handshakes went over the sockets as TLS records: marked, so a process doing TLS
    # without a probed libssl shows as such.
    hellos = events.filter((pl.col(s.LAYER) == s.LAYER_NET) & ((pl.col(s.FLAGS) & ev.F_TLS_HELLO) != 0))
    assert set(hellos.get_column(s.PATH).cast(pl.String)) == {name for name, *_ in report["calls"]}


def _record_helm(side) -> dict:
    helm = ROOT / ".tools" / "helm"
    if not helm.exists():
        pytest.fail(f"{helm} is missing: make setup (ci/tools.sh) installs it")
    cert, key = self_signed(side.scratch)
    return ran(record_command(side.out / "trace", [PYTHON, str(OWN_TLS), str(helm), str(cert), str(key)], "--layers", "tls"))


def test_a_client_with_tls_of_its_own_is_shown_by_socket_and_named_by_the_summary(root_required, kernel_side):
    """helm (Go's crypto/tls, no libssl) against a libssl server: its handshake is marked on
    its socket, it has no TLS event, and the summary names it; the server, whose TLS the
    layer reads, is not named."""
    recorded = kernel_side(_record_helm)
    done = recorded.done()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json_line(done.stdout, "client_pid")
    assert report["client_status"] != 0  # the server's 404, after the handshake
    events = load(recorded.traces())
    client = events.filter(pl.col(s.PID) == report["client_pid"])
    hellos = client.filter((pl.col(s.LAYER) == s.LAYER_NET) & ((pl.col(s.FLAGS) & ev.F_TLS_HELLO) != 0))
    assert hellos.height >= 1 and hellos.get_column(s.PATH).cast(pl.String).str.starts_with("tcp:127.0.0.1:").all()
    assert client.filter(pl.col(s.LAYER).is_in([s.LAYER_TLS, s.LAYER_HTTP])).height == 0
    server = events.filter((pl.col(s.PID) == report["pid"]) & (pl.col(s.LAYER) == s.LAYER_TLS))
    assert server.height > 0
    own = next(line for line in done.stdout.splitlines() if line.startswith("own TLS"))
    assert f" {report['client_pid']}" in own and f" {report['pid']}" not in own, own
