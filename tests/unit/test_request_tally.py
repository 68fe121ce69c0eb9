"""serve's HTTP requests by job, operation and status, from heads alone (ioobserve.serve.request_tally)."""

from __future__ import annotations

from ioobserve.data.decode import HeadRecord
from ioobserve.serve.request_tally import MAX_OPEN, RequestCounts, RequestTally

SIGNED = b"Authorization: AWS4-HMAC-SHA256 Credential=x\r\n"
GET = b"GET /bucket/a.tar HTTP/1.1\r\nHost: s3.local\r\n" + SIGNED + b"\r\n"
PUT = b"PUT /bucket/b.bin HTTP/1.1\r\nHost: s3.local\r\n" + SIGNED + b"Content-Length: 9\r\n\r\n"
PLAIN = b"GET /health HTTP/1.1\r\nHost: s3.local\r\n\r\n"


def _head(data: bytes, pid: int = 10, conn: int = 1, cgroup: int = 7) -> HeadRecord:
    return HeadRecord(pid, 0, data, pid, cgroup, conn)


def _answer(status: int, **where) -> HeadRecord:
    return _head(f"HTTP/1.1 {status} X\r\nx-amz-request-id: ID\r\n\r\n".encode(), **where)


def test_an_answer_counts_the_request_on_its_connection_past_a_100_continue():
    tally = RequestTally()
    tally.heads([_head(PUT), _head(GET, conn=2), _answer(100), _answer(404, conn=2), _answer(200)])
    tally.heads([_head(PLAIN), _answer(200)])
    assert tally.taken() == {(7, "PutObject", "200"): 1, (7, "GetObject", "404"): 1, (7, "GET", "200"): 1}
    assert tally.taken() == {}  # taken once


def test_a_request_never_answered_counts_under_none_when_the_next_starts_or_its_process_is_gone():
    tally = RequestTally()
    tally.heads([_head(GET), _head(GET), _answer(200), _head(PUT, pid=11, cgroup=8), _answer(200, pid=12)])
    tally.forget([11])
    assert tally.taken() == {(7, "GetObject", "none"): 1, (7, "GetObject", "200"): 1, (8, "PutObject", "none"): 1}


def test_garbled_heads_count_nothing_and_the_open_requests_are_bounded():
    tally = RequestTally()
    tally.heads([_head(b"GET \x00 junk\r\n\r\n"), _answer(200), _head(b"HTTP/1.1 2"), _head(b"\x16\x03\x01 tls")])
    assert tally.taken() == {}
    tally.heads([_head(GET, conn=conn) for conn in range(MAX_OPEN + 3)])
    assert tally.taken() == {(7, "GetObject", "none"): 3}


def test_the_counts_sum_per_job_across_scrapes():
    tally = RequestTally()
    counts = RequestCounts(tally)
    jobs = {7: "42", 8: "42"}.get
    tally.heads([_head(GET), _answer(200), _head(GET, cgroup=8, pid=11), _answer(200, pid=11)])
    counts.family("node", lambda ids: {i: jobs(i) for i in ids if jobs(i)})
    tally.heads([_head(GET, cgroup=9), _answer(200)])
    family = counts.family("node", lambda ids: {i: jobs(i) for i in ids if jobs(i)})
    assert {tuple(sample.labels.values()): sample.value for sample in family.samples} == {
        ("node", "42", "GetObject", "200"): 2, ("node", "", "GetObject", "200"): 1}
