"""Object storage read with real clients from a real S3 server on loopback: moto's server mode,
over HTTPS (a self-signed certificate; the TLS layer) and over plain HTTP (the NET layer).
boto3's ranged get_object calls, a listing, a multipart upload and s3fs's listing and
open().read() are recorded; every request the clients' own hooks saw is one HTTP event, in
order, named by the S3 operation the client called (GetObject, UploadPart, ListObjectsV2,
...), with its object, range, an answer of at least the bytes asked, and the status and
request id the client got (a 404 among them); boto3's name the function that asked on their
stack, s3fs's (its asyncio thread's) the thread that sent them. Objects read through local
copies give the bytes fetched against the bytes read."""

from __future__ import annotations

import collections
import socket
import subprocess

import polars as pl
import pytest

from ioobserve.analysis.engine import analyze_partial
from ioobserve.analysis.insights import insights
from ioobserve.analysis.results import results
from ioobserve.analysis.trace_partial import Filters
from ioobserve.data import schema as s
from ioobserve.trace.read.reader import load, records
from tests.conftest import PYTHON, ROOT
from tests.kernel.certificates import self_signed
from tests.kernel.recorder import IOOBSERVE, json_line, record_command
from tests.waiting import wait_until

pytestmark = pytest.mark.kernel

WORKLOAD = ROOT / "tests" / "workloads" / "s3_workload.py"
MOTO_SERVER = ROOT / ".venv" / "bin" / "moto_server"
HEADERS_AT_MOST = 4096  # an answer's status line and headers, beyond the bytes asked


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture(params=["https", "http"])
def s3_server(request, tmp_path):
    """moto's S3 on 127.0.0.1 (its own process: not the recorded command's): (endpoint, CA file or "")."""
    if not MOTO_SERVER.exists():
        pytest.fail(f"{MOTO_SERVER} is missing: make setup installs moto[server] (the dev extras)")
    port = _free_port()
    argv = [str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(port)]
    ca_file = ""
    if request.param == "https":
        cert, key = self_signed(tmp_path)
        argv += ["-c", str(cert), "-k", str(key)]
        ca_file = str(cert)
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: _accepts(port) or server.poll() is not None, "moto's server listening", timeout=120)
        assert server.poll() is None, server.stderr.read().decode()[-2000:]
        yield f"{request.param}://127.0.0.1:{port}", ca_file
    finally:
        server.terminate()
        server.wait(timeout=60)


def test_every_request_of_boto3_and_s3fs_is_an_event_with_its_object_range_and_caller(root_required, tmp_path,
                                                                                        s3_server):
    endpoint, ca_file = s3_server
    layer = "tls" if ca_file else "net"
    done = record_command(tmp_path / "trace", [PYTHON, str(WORKLOAD), endpoint, ca_file], "--layers", layer)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json_line(done.stdout, "requests")
    traces = sorted((tmp_path / "trace").glob("*.pfw.gz"))
    http = load(traces).filter((pl.col(s.PID) == report["pid"]) & (pl.col(s.LAYER) == s.LAYER_HTTP)).sort(s.TS)
    scheme = endpoint.split(":", 1)[0]

    def expected_range(value: str | None) -> tuple[int, int]:
        if value is None:
            return -1, 0
        first, last = (int(x) for x in value.removeprefix("bytes=").split("-"))
        return first, last - first + 1

    seen = [(row[s.OP], row[s.PATH], row[s.OFFSET]) for row in http.iter_rows(named=True)]
    assert seen == [(operation, f"{scheme}://127.0.0.1{path}", expected_range(value)[0])
                    for _, path, value, _, operation, *_ in report["requests"]]
    assert http.select(s.STATUS, s.REQUEST_ID).rows() == [(status, request_id) for *_, status, request_id in report["requests"]]
    assert 404 in http.get_column(s.STATUS).to_list()
    called = {operation for *_, operation, _, _ in report["requests"]}
    assert {"ListObjectsV2", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload", "HeadObject"} <= called
    for row, (_, _, value, phase, *_) in zip(http.iter_rows(named=True), report["requests"], strict=True):
        asked = expected_range(value)[1]
        if asked:
            assert row[s.BYTES_REQ] == asked and asked <= row[s.BYTES] <= asked + HEADERS_AT_MOST, row
        assert 0 < row[s.ARG] <= row[s.DUR] + 1000, row  # time to first byte, within the request
        assert row[s.PATH2].startswith("tcp:127.0.0.1:") and row[s.PATH2].endswith(f":{endpoint.rsplit(':', 1)[1]}"), row
    # The bytes the application got are the ranges' (boto3) and the object's (s3fs).
    gets = http.filter(pl.col(s.OP) == "GetObject")
    assert int(gets.get_column(s.BYTES_REQ).sum()) == sum(report["bytes"].values())
    # boto3 asked from fetch_ranges: on the stack of its requests; s3fs's come from its own thread.
    stacks = {row["stack"]: [frame["function"] for frame in row["frames"]] for row in records(traces, "PS").select(
        pl.col("args").struct.field("stack"), pl.col("args").struct.field("frames")).iter_rows(named=True)}
    phases = [phase for _, _, _, phase, *_ in report["requests"]]
    for row, phase in zip(http.iter_rows(named=True), phases, strict=True):
        if phase == "boto3":
            assert "fetch_ranges" in stacks[row[s.PY_STACK]], stacks[row[s.PY_STACK]]
        if phase == "s3fs":
            assert row[s.TID] != report["pid"]  # fsspec's event loop thread
    assert "requests      " in done.stdout and f"{len(report['requests'])} HTTP requests" in done.stdout
    # analyze's requests by operation: the clients' own count of each
    analysis = results(analyze_partial(traces, Filters(pids=(report["pid"],))))
    assert dict(analysis.requests.select(s.OP, "requests").iter_rows()) == dict(
        collections.Counter(operation for *_, operation, _, _ in report["requests"]))
    # ... and the answers' statuses: the 404 a failed request
    assert dict(((op, status), count) for op, status, count in analysis.statuses.iter_rows()) == dict(
        collections.Counter((operation, status) for *_, operation, status, _ in report["requests"]))
    assert analysis.requests.filter(pl.col(s.OP) == "HeadObject").get_column("errors").to_list() == [1]


COPIES_WORKLOAD = ROOT / "tests" / "workloads" / "s3_copies_workload.py"


@pytest.mark.parametrize("s3_server", ["http"], indirect=True)
def test_objects_read_through_local_copies_are_fetched_bytes_against_read_bytes(root_required, tmp_path, s3_server):
    """fsspec's simplecache (s3fs fetches the whole object, the application reads three
    ranges of the copy) and boto3's download_file (a writer thread, a rename, read whole)."""
    endpoint, _ = s3_server
    cache = tmp_path / "cache"
    cache.mkdir()
    done = record_command(tmp_path / "trace", [PYTHON, str(COPIES_WORKLOAD), endpoint, str(cache)], "--layers", "net")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json_line(done.stdout, "copies")
    traces = sorted((tmp_path / "trace").glob("*.pfw.gz"))
    analysis = results(analyze_partial(traces, Filters(pids=(report["pid"],))))
    groups = {row["object"].split("/training/", 1)[1]: row for row in analysis.copies.iter_rows(named=True)}
    assert set(groups) == set(report["sizes"]), analysis.copies
    for key, row in groups.items():
        size, asked = report["sizes"][key], report["asked"][key]
        assert (row["objects"], row["copy"], row["copies"], row["written"], row["mapped"]) == (
            1, report["copies"][key], 1, size, False), row
        assert size < row["fetched"] <= size + HEADERS_AT_MOST, row
        assert asked <= row["read"] <= min(size, asked + 3 * report["buffer"]), row  # Python's buffer reads ahead
    found = {insight.code: insight for insight in insights(analysis)}
    assert found["fetched-unread"].evidence[0].startswith(f"{groups['shards/shard-0000.tar']['object']}: "), found
    shown = subprocess.run([IOOBSERVE, "analyze", *map(str, traces), "--pid", str(report["pid"])], capture_output=True,
                           text=True, timeout=300)
    assert shown.returncode == 0 and "Objects read through local copies" in shown.stdout, shown.stdout[-3000:]
