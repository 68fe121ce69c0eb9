"""HTTP requests from the NET and TLS layers' events (ioobserve.collect.http_requests), batch by batch."""

from __future__ import annotations

import polars as pl

from ioobserve.collect.enrich import KDEV, NAME, NAME2
from ioobserve.collect.http_requests import RequestBuilder
from ioobserve.data import events as ev
from ioobserve.data import schema as s
from ioobserve.data.decode import HeadRecord

OFFSET = 1_000  # the builder's clock offset: heads come in kernel time, events in epoch time
CONNECTIONS = {(7, 1): "tcp:10.0.0.2:40000->10.0.0.9:443", (7, 2): "tcp:10.0.0.2:40001->10.0.0.9:80"}
_SCHEMA = {KDEV: pl.UInt32, s.INO: pl.UInt64, s.TS: pl.UInt64, s.DUR: pl.UInt64, s.PID: pl.UInt32, s.TID: pl.UInt32,
           s.UID: pl.UInt32, s.CGROUP: pl.UInt64, s.FD: pl.Int32, s.LAYER: pl.String, s.OP: pl.String, s.RET: pl.Int64,
           s.PARENT_TS: pl.UInt64, s.PY_STACK: pl.UInt32, s.FLAGS: pl.UInt16, s.ARG: pl.UInt64}


def _event(ino: int | None, ts: int, layer: str, op: str, ret: int, head: bool = False, parent: int | None = None,
           stack: int | None = None, tid: int = 11, dur: int = 10, ssl: int = 0, answer: bool = False) -> dict:
    """An event on socket `ino` (None: on no socket, a memory-BIO SSL at address `ssl`)."""
    return {KDEV: None if ino is None else 7, s.INO: ino, s.TS: ts, s.DUR: dur, s.PID: 10, s.TID: tid, s.UID: 0,
            s.CGROUP: 1, s.FD: 3, s.LAYER: layer, s.OP: op, s.RET: ret, s.PARENT_TS: parent, s.PY_STACK: stack,
            s.FLAGS: (0 if ino is None else ev.F_FILE) | (ev.F_HEAD if head else 0) | (ev.F_ANSWER if answer else 0),
            s.ARG: ssl}


def _batch(*rows: dict) -> pl.DataFrame:
    return pl.DataFrame(list(rows), schema=_SCHEMA)


def _head(ts: int, request: bytes, tid: int = 11) -> HeadRecord:
    return HeadRecord(tid, ts - OFFSET, request)


def _builder() -> RequestBuilder:
    return RequestBuilder(OFFSET, lambda kdev, ino: CONNECTIONS.get((kdev, ino)))


def _rows(frame: pl.DataFrame) -> list[tuple]:
    return frame.select(s.OP, NAME, NAME2, s.TS, s.DUR, s.BYTES, s.BYTES_REQ, s.OFFSET, s.ARG, s.PY_STACK).rows()


GET = b"GET /bucket/a.tar HTTP/1.1\r\nHost: s3.local\r\nRange: bytes=100-199\r\n\r\n"
PUT = b"PUT /bucket/b.bin HTTP/1.1\r\nHost: s3.local\r\nContent-Length: 5000\r\n\r\n"


def test_a_tls_request_takes_its_answer_over_batches_and_the_stack_from_beneath():
    builder = _builder()
    builder.add_heads([_head(100, GET)])
    first = builder.add(_batch(
        _event(1, 100, s.LAYER_TLS, "SSL_write_ex", len(GET), head=True),
        _event(1, 105, s.LAYER_NET, "write", 120, parent=100, stack=42),  # the ciphertext beneath it
        _event(1, 200, s.LAYER_TLS, "SSL_read_ex", 60),
        _event(1, 201, s.LAYER_NET, "read", 90, parent=200, stack=43),  # ciphertext: not the answer's bytes
    ))
    assert first.is_empty()  # its answer may go on
    second = builder.add(_batch(_event(1, 300, s.LAYER_TLS, "SSL_read_ex", 100),
                                _event(1, 400, s.LAYER_TLS, "SSL_read_ex", -1)))  # a failed read adds nothing
    assert second.is_empty()
    ended = builder.close()
    assert _rows(ended) == [("GET", "https://s3.local/bucket/a.tar", CONNECTIONS[(7, 1)], 100, 210, 160, 100, 100,
                             110, 42)]
    assert ended.get_column(s.LAYER).to_list() == [s.LAYER_HTTP] and builder.requests == 1


def test_the_next_request_on_a_connection_ends_the_one_before():
    builder = _builder()
    builder.add_heads([_head(100, GET), _head(500, PUT)])
    ended = builder.add(_batch(
        _event(2, 100, s.LAYER_NET, "sendto", len(GET), head=True, stack=5),
        _event(2, 150, s.LAYER_NET, "recvfrom", 300),
        _event(2, 500, s.LAYER_NET, "sendto", len(PUT), head=True, stack=6),
        _event(2, 510, s.LAYER_NET, "sendto", 5000),
        _event(2, 600, s.LAYER_NET, "recvfrom", 40),
    ))
    assert _rows(ended) == [("GET", "http://s3.local/bucket/a.tar", CONNECTIONS[(7, 2)], 100, 60, 300, 100, 100, 60, 5)]
    assert _rows(builder.close([10])) == [("PUT", "http://s3.local/bucket/b.bin", CONNECTIONS[(7, 2)], 500, 110, 40, 5000,
                                          -1, 110, 6)]
    assert builder.close().is_empty()


def test_connections_are_kept_apart_and_a_process_left_open_stays_open():
    builder = _builder()
    builder.add_heads([_head(100, GET), _head(101, PUT, tid=12)])
    builder.add(_batch(
        _event(1, 100, s.LAYER_NET, "write", len(GET), head=True),
        _event(2, 101, s.LAYER_NET, "write", len(PUT), head=True, tid=12),
        _event(2, 150, s.LAYER_NET, "read", 7, tid=12),
        _event(1, 160, s.LAYER_NET, "read", 9),
    ))
    assert builder.close([99]).is_empty()  # another process: nothing of this one ends
    ended = builder.close().sort(s.TS)
    assert ended.get_column(s.BYTES).to_list() == [9, 7]
    assert ended.get_column(NAME2).to_list() == [CONNECTIONS[(7, 1)], CONNECTIONS[(7, 2)]]


def test_a_garbled_head_ends_the_request_before_it_and_makes_none():
    builder = _builder()
    builder.add_heads([_head(100, GET), _head(300, b"GET \x00\xff junk\r\n\r\n")])
    ended = builder.add(_batch(
        _event(1, 100, s.LAYER_NET, "write", len(GET), head=True),
        _event(1, 200, s.LAYER_NET, "read", 50),
        _event(1, 300, s.LAYER_NET, "write", 17, head=True),
        _event(1, 400, s.LAYER_NET, "read", 30),  # the garbled one's answer: nobody's
    ))
    assert ended.get_column(s.BYTES).to_list() == [50]
    assert builder.close().is_empty() and builder.garbled == 1 and builder.requests == 1


def test_a_head_whose_record_is_lost_ends_the_one_before_and_events_without_heads_make_none():
    builder = _builder()
    ended = builder.add(_batch(_event(1, 100, s.LAYER_NET, "write", 60, head=True), _event(1, 200, s.LAYER_NET, "read", 5)))
    assert ended.is_empty() and builder.close().is_empty() and builder.garbled == 1
    files = _batch(_event(1, 100, s.LAYER_NET, "read", 5)).with_columns(pl.lit(s.LAYER_SYSCALL).alias(s.LAYER))
    assert builder.add(files).is_empty() and builder.close().is_empty()


def test_a_memory_bio_ssl_is_its_own_connection_named_by_the_socket_call_after_its_write():
    """asyncio's SSL (s3fs, aiohttp): no socket under the SSL calls; the loop thread sends the
    ciphertext right after the SSL write returns."""
    builder = _builder()
    builder.add_heads([_head(100, GET), _head(700, PUT, tid=12)])
    ended = builder.add(_batch(
        _event(None, 100, s.LAYER_TLS, "SSL_write_ex", len(GET), head=True, ssl=0xABC),
        _event(1, 130, s.LAYER_NET, "sendto", 150, stack=77),  # the ciphertext, from the same thread
        _event(None, 300, s.LAYER_TLS, "SSL_read_ex", 400, ssl=0xABC),
        _event(None, 320, s.LAYER_TLS, "SSL_read_ex", 9, ssl=0xDEF),  # another SSL: not this answer
        _event(None, 700, s.LAYER_TLS, "SSL_write_ex", len(PUT), head=True, ssl=0xABC, tid=12),
    ))
    assert _rows(ended) == [("GET", "https://s3.local/bucket/a.tar", CONNECTIONS[(7, 1)], 100, 210, 400, 100, 100,
                             210, 77)]
    put = builder.close()
    assert put.get_column(NAME2).to_list() == [None] and put.get_column(s.PY_STACK).to_list() == [None]  # nothing after it


CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
OK = b"HTTP/1.1 200 OK\r\nx-amz-request-id: 4442587FB7D0A2F9\r\nContent-Length: 5\r\n\r\nhello"
MISSING = b"HTTP/1.1 404 Not Found\r\nx-amz-request-id: 5E2B1C\r\nContent-Type: application/xml\r\n\r\n<Error>"


def test_the_answer_gives_the_status_and_request_id_past_a_100_continue_and_over_batches():
    builder = _builder()
    builder.add_heads([_head(100, PUT), _head(150, CONTINUE), _head(300, OK)])
    first = builder.add(_batch(
        _event(1, 100, s.LAYER_TLS, "SSL_write_ex", len(PUT), head=True),
        _event(1, 150, s.LAYER_TLS, "SSL_read_ex", len(CONTINUE), answer=True),  # not the answer's status
        _event(1, 200, s.LAYER_TLS, "SSL_write_ex", 5000),  # the body: no head
    ))
    assert first.is_empty()
    builder.add_heads([_head(600, GET), _head(650, MISSING)])
    ended = builder.add(_batch(
        _event(1, 300, s.LAYER_TLS, "SSL_read_ex", len(OK), answer=True),
        _event(1, 600, s.LAYER_TLS, "SSL_write_ex", len(GET), head=True),
        _event(1, 650, s.LAYER_TLS, "SSL_read_ex", len(MISSING), answer=True),
    ))
    assert ended.select(s.OP, s.STATUS, s.PY_MODULE, s.BYTES).rows() == [("PUT", 200, "4442587FB7D0A2F9", len(CONTINUE) + len(OK))]
    assert builder.close().select(s.OP, s.STATUS, s.PY_MODULE).rows() == [("GET", 404, "5E2B1C")]


def test_an_answer_whose_head_was_not_read_has_no_status_and_a_head_on_another_thread_is_not_its():
    builder = _builder()
    builder.add_heads([_head(100, GET), _head(200, OK, tid=99)])
    builder.add(_batch(_event(1, 100, s.LAYER_NET, "write", len(GET), head=True),
                       _event(1, 200, s.LAYER_NET, "read", len(OK), answer=True)))
    assert builder.close().select(s.STATUS, s.PY_MODULE, s.BYTES).rows() == [(None, None, len(OK))]
