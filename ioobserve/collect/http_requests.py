"""HTTP requests as events, built from the NET and TLS layers' events as they arrive.

A write whose head the kernel copied (F_HEAD, ioobserve.data.decode.HeadRecord) starts a request
on its connection; the reads of the same layer on that connection after it, until the next
request starts there, are its answer. The kernel copies the head of a read whose bytes begin
an HTTP answer too (F_ANSWER): its status line and headers. One HTTP event per request, in the
HTTP layer:

- ts: the head's write; dur: until the answer's last read ended (the write's end, if no read);
- op: the S3 operation (GetObject, UploadPart, ...) of a request of S3's, else the method;
  path: the object, as `https://host/path` (http:// over plain TCP), never its query;
  path2: the connection (ioobserve.data.sockets);
- bytes_req: the range's length (GET) or the body's Content-Length (PUT, POST), else 0;
  offset: the range's first byte (-1 where none or a suffix);
- ret and bytes: the answer's bytes (its status line and headers included); arg: the time to
  the first byte, in ns from the head's write to the end of the answer's first read (0 if none);
- status: the answer's status (its first final one: a `100 Continue` before it is not the
  answer), null where no answer's head was read; py_module: the request id the store gave in
  the answer's head (x-amz-request-id, or AWS's, Azure's, GCS's or a proxy's;
  ioobserve.collect.object_requests), else null (named, it is the REQUEST_ID column);
- the writer's pid, tid, uid, cgroup, fd, and Python stack (over TLS, the stack of the socket
  call beneath the SSL write: uprobes walk none).

A connection is a socket (its KDEV and INO), or, for an SSL no SSL_set_fd put on a socket (a
memory BIO: asyncio's, aiohttp's, so s3fs's), the SSL itself (its address, the TLS events'
ARG, in its process). Such an SSL's writes reach the socket after they return, from the same
thread: its request takes its Python stack and its connection's name from the thread's first
socket call within AFTER_NS of the SSL write's start (the event loop's coroutine frames; the
code that awaits them, in another thread, is not on any stack then).

RequestBuilder keeps each connection's open request (its answer may go on in the next batch)
and the heads (requests' and answers') whose events have not come yet. A request ends when
the next one starts on its connection, when its process is gone, or at the end (`close`). A head that is no HTTP request
(ioobserve.collect.object_requests) ends the one before it and makes no event (`garbled`).
Per batch with Polars joins; Python touches each head and each ended request once.
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from ioobserve.collect.object_requests import parse_answer_head, parse_request_head
from ioobserve.data import events as ev
from ioobserve.data import schema as s
from ioobserve.data.decode import HeadRecord

HEAD_WAIT_NS = 10_000_000_000  # a head whose event never came (lost on a full ring) is dropped after this
AFTER_NS = 10_000_000  # a memory-BIO SSL write's socket call follows it within this
_CONN = ["_k1", "_k2"]  # a connection: (KDEV, INO) of its socket, or (SSL_KEY | pid, the SSL's address)
SSL_KEY = 1 << 40
_READS = sorted(ev.NET_READ_LABELS | ev.TLS_READ_OPS)  # the answer's calls (their labels), in either layer
_HEADS_SCHEMA = {s.TID: pl.UInt32, s.TS: pl.UInt64, "_method": pl.String, "_target": pl.String,
                 s.OFFSET: pl.Int64, s.BYTES_REQ: pl.UInt64}
_ANSWERS_SCHEMA = {s.TID: pl.UInt32, s.TS: pl.UInt64, "_status": pl.UInt16, "_rid": pl.String}
_OPEN_SCHEMA = {"_k1": pl.UInt64, "_k2": pl.UInt64, "_nkdev": pl.UInt32, "_nino": pl.UInt64, "_seq": pl.UInt32, s.TS: pl.UInt64, s.PID: pl.UInt32,
                s.TID: pl.UInt32, s.UID: pl.UInt32, s.CGROUP: pl.UInt64, s.FD: pl.Int32, "_layer": pl.String,
                "_method": pl.String, "_target": pl.String, s.OFFSET: pl.Int64, s.BYTES_REQ: pl.UInt64,
                s.PY_STACK: pl.UInt32, "_head_end": pl.UInt64, "_got": pl.UInt64, "_first_end": pl.UInt64,
                "_last_end": pl.UInt64, "_status": pl.UInt16, "_rid": pl.String}


class RequestBuilder:
    """Each connection's open request, and the requests each batch ends (used by one thread).
    `connection_name(kdev, ino)`: the name the net layer gave a socket (None if unknown)."""

    def __init__(self, clock_offset_ns: int, connection_name: Callable[[int, int], str | None]):
        self._clock_offset_ns = clock_offset_ns
        self._connection_name = connection_name
        self._heads = pl.DataFrame(schema=_HEADS_SCHEMA)
        self._answers = pl.DataFrame(schema=_ANSWERS_SCHEMA)
        self._open = pl.DataFrame(schema=_OPEN_SCHEMA)
        self.requests = 0  # events made
        self.garbled = 0  # heads that named no HTTP request
        self._none = self._as_events(self._open)  # what most batches of most recordings end: made once

    def add_heads(self, heads: list[HeadRecord]) -> None:
        """Parse request and answer heads, kept until their call's event arrives."""
        if not heads:
            return
        rows, answers = [], []
        for head in heads:
            if head.data.startswith(b"HTTP/"):
                answer = parse_answer_head(head.data)
                if answer is not None:
                    answers.append((head.tid, head.ts_ns + self._clock_offset_ns, answer.status, answer.request_id))
                continue
            request = parse_request_head(head.data)
            if request is None:
                rows.append((head.tid, head.ts_ns + self._clock_offset_ns, None, None, -1, 0))
                continue
            first = request.first if request.first is not None else -1
            rows.append((head.tid, head.ts_ns + self._clock_offset_ns, request.operation or request.method,
                         f"{request.host or '?'}{request.path}", first, request.asked or 0))
        # Where no event comes for them (serve lets none out of the kernel) they would pile up.
        horizon = max(head.ts_ns for head in heads) + self._clock_offset_ns - HEAD_WAIT_NS
        self._heads = pl.concat([self._heads, pl.DataFrame(rows, schema=_HEADS_SCHEMA, orient="row")]).filter(
            pl.col(s.TS) >= horizon)
        self._answers = pl.concat([self._answers, pl.DataFrame(answers, schema=_ANSWERS_SCHEMA, orient="row")]).filter(
            pl.col(s.TS) >= horizon)

    def add(self, events: pl.DataFrame) -> pl.DataFrame:
        """The requests this batch of enriched events (with KDEV and INO) ends, as events."""
        on_socket = ((pl.col(s.FLAGS) & ev.F_FILE) != 0) & pl.col(s.KDEV).is_not_null()
        on_ssl = (pl.col(s.LAYER) == s.LAYER_TLS) & ~on_socket & (pl.col(s.ARG) != 0)
        conn = events.filter(pl.col(s.LAYER).is_in([s.LAYER_NET, s.LAYER_TLS]) & (on_socket | on_ssl))
        if conn.is_empty():
            return self._none
        head = (pl.col(s.FLAGS) & ev.F_HEAD) != 0
        conn = (conn.select(pl.when(on_socket).then(pl.col(s.KDEV).cast(pl.UInt64)).otherwise(SSL_KEY | pl.col(s.PID).cast(pl.UInt64))
                            .alias("_k1"),
                            pl.when(on_socket).then(pl.col(s.INO)).otherwise(pl.col(s.ARG)).alias("_k2"),
                            s.KDEV, s.INO, s.TS, s.DUR, s.PID, s.TID, s.UID, s.CGROUP, s.FD, s.LAYER, s.OP, s.RET, s.PARENT_TS,
                            s.PY_STACK, head.alias("_head"), ((pl.col(s.FLAGS) & ev.F_ANSWER) != 0).alias("_answer"))
                .sort(s.TS)
                .with_columns(pl.col("_head").cast(pl.UInt32).cum_sum().over(_CONN).cast(pl.UInt32).alias("_seq")))
        starts = self._starts(conn)
        requests = pl.concat([self._open, starts])
        answers = (conn.filter(pl.col(s.OP).is_in(_READS) & (pl.col(s.RET) > 0))
                   .group_by(*_CONN, "_seq", pl.col(s.LAYER).alias("_layer"))
                   .agg(pl.col(s.RET).sum().cast(pl.UInt64).alias("_more"),
                        (pl.col(s.TS) + pl.col(s.DUR)).min().alias("_first"),
                        (pl.col(s.TS) + pl.col(s.DUR)).max().alias("_last")))
        requests = (requests.join(answers, on=[*_CONN, "_seq", "_layer"], how="left")
                    .join(self._finals(conn), on=[*_CONN, "_seq", "_layer"], how="left")
                    .with_columns((pl.col("_got") + pl.col("_more").fill_null(0)).alias("_got"),
                                  pl.min_horizontal("_first_end", "_first").alias("_first_end"),
                                  pl.max_horizontal("_last_end", "_last").alias("_last_end"),
                                  pl.coalesce("_status", "_final_status").alias("_status"),
                                  pl.when(pl.col("_status").is_null()).then("_final_rid").otherwise("_rid").alias("_rid"))
                    .drop("_more", "_first", "_last", "_final_status", "_final_rid"))
        # A connection's requests before its last one of the batch have ended.
        last = conn.group_by(_CONN).agg(pl.col("_seq").max().alias("_top"))
        requests = requests.join(last, on=_CONN, how="left")
        ended = pl.col("_seq") < pl.col("_top").fill_null(0)
        self._open = requests.filter(~ended).drop("_top").with_columns(pl.lit(0, pl.UInt32).alias("_seq"))
        return self._as_events(requests.filter(ended).drop("_top"))

    def close(self, pids: list[int] | None = None) -> pl.DataFrame:
        """The open requests of these processes (all if None), ended: they are gone, or the recording is."""
        gone = pl.lit(True) if pids is None else pl.col(s.PID).is_in(pids)
        ended, self._open = self._open.filter(gone), self._open.filter(~gone)
        return self._as_events(ended)

    def _finals(self, conn: pl.DataFrame) -> pl.DataFrame:
        """Per request of this batch's connections, the status and request id of the first final
        answer (status 200 and up) whose head was read; the answer heads used or too old are let go."""
        reads = conn.filter("_answer")
        found = (reads.join(self._answers, on=[s.TID, s.TS], how="inner")  # conn is in time order
                 .filter(pl.col("_status") >= 200)
                 .group_by(*_CONN, "_seq", pl.col(s.LAYER).alias("_layer"), maintain_order=True)
                 .agg(pl.col("_status").first().alias("_final_status"), pl.col("_rid").first().alias("_final_rid")))
        horizon = int(conn.get_column(s.TS).max()) - HEAD_WAIT_NS
        self._answers = self._answers.join(reads.select(s.TID, s.TS), on=[s.TID, s.TS], how="anti").filter(
            pl.col(s.TS) >= horizon)
        return found

    def _starts(self, conn: pl.DataFrame) -> pl.DataFrame:
        """The requests whose heads were written in this batch (their head records joined)."""
        writes = conn.filter("_head")
        if writes.is_empty():
            return self._open.clear()
        # Over TLS the SSL write has no stack of its own: the socket call beneath it has, or, for
        # a memory BIO, the thread's socket call after it.
        beneath = (conn.filter(pl.col(s.PARENT_TS).is_not_null() & pl.col(s.PY_STACK).is_not_null())
                   .group_by(s.TID, s.PARENT_TS).agg(pl.col(s.PY_STACK).first().alias("_beneath"))
                   .rename({s.PARENT_TS: s.TS}))
        after = (conn.filter((pl.col(s.LAYER) == s.LAYER_NET) & pl.col(s.KDEV).is_not_null())
                 .select(s.TID, pl.col(s.TS).alias("_after_ts"), pl.col(s.PY_STACK).alias("_after_stack"),
                         pl.col(s.KDEV).alias("_after_kdev"), pl.col(s.INO).alias("_after_ino")).sort("_after_ts"))
        joined = (writes.join(self._heads, on=[s.TID, s.TS], how="left")
                  .join(beneath, on=[s.TID, s.TS], how="left")
                  .sort(s.TS)
                  .join_asof(after, left_on=s.TS, right_on="_after_ts", by=s.TID, strategy="forward", tolerance=AFTER_NS,
                             check_sortedness=False))  # both sorted by time; by thread within
        on_ssl = pl.col("_k1") >= SSL_KEY
        horizon = int(conn.get_column(s.TS).max()) - HEAD_WAIT_NS
        self._heads = self._heads.join(writes.select(s.TID, s.TS), on=[s.TID, s.TS], how="anti").filter(
            pl.col(s.TS) >= horizon)
        return joined.select(
            *_CONN, pl.when(on_ssl).then(pl.col("_after_kdev")).otherwise(pl.col(s.KDEV)).alias("_nkdev"),
            pl.when(on_ssl).then(pl.col("_after_ino")).otherwise(pl.col(s.INO)).alias("_nino"),
            "_seq", s.TS, s.PID, s.TID, s.UID, s.CGROUP, s.FD, pl.col(s.LAYER).alias("_layer"), "_method", "_target",
            pl.col(s.OFFSET).fill_null(-1), pl.col(s.BYTES_REQ).fill_null(0),
            pl.coalesce(s.PY_STACK, "_beneath", "_after_stack").alias(s.PY_STACK),
            (pl.col(s.TS) + pl.col(s.DUR)).alias("_head_end"),
            pl.lit(0, pl.UInt64).alias("_got"), pl.lit(None, pl.UInt64).alias("_first_end"),
            pl.lit(None, pl.UInt64).alias("_last_end"), pl.lit(None, pl.UInt16).alias("_status"),
            pl.lit(None, pl.String).alias("_rid"),
        ).cast(_OPEN_SCHEMA)

    def _as_events(self, ended: pl.DataFrame) -> pl.DataFrame:
        """Ended requests as enriched events (a head that named none makes none)."""
        self.garbled += ended.filter(pl.col("_method").is_null()).height
        ended = ended.filter(pl.col("_method").is_not_null())
        self.requests += ended.height
        names = [None if kdev is None else self._connection_name(kdev, ino)
                 for kdev, ino in ended.select("_nkdev", "_nino").iter_rows()]
        end = pl.max_horizontal("_head_end", "_last_end")
        scheme = pl.when(pl.col("_layer") == s.LAYER_TLS).then(pl.lit("https://")).otherwise(pl.lit("http://"))
        return ended.select(
            s.TS, (end - pl.col(s.TS)).alias(s.DUR), s.PID, s.TID, s.UID, pl.lit(s.LAYER_HTTP).alias(s.LAYER),
            pl.col("_method").alias(s.OP), pl.lit(None, pl.UInt32).alias(s.KDEV), (scheme + pl.col("_target")).alias(s.NAME),
            pl.Series(s.NAME2, names, dtype=pl.String), s.FD, pl.col("_got").cast(pl.Int64).alias(s.RET),
            pl.lit(0, pl.Int16).alias(s.ERRNO), s.BYTES_REQ, pl.col("_got").alias(s.BYTES), s.OFFSET,
            pl.lit(None, pl.UInt64).alias(s.DEV), pl.lit(None, pl.UInt64).alias(s.INO), s.CGROUP,
            (pl.col("_first_end") - pl.col(s.TS)).fill_null(0).alias(s.ARG), pl.lit(0, pl.UInt16).alias(s.FLAGS),
            pl.lit(True).alias(s.COUNTED), pl.lit(None, pl.UInt64).alias(s.PARENT_TS), s.PY_STACK,
            pl.when(pl.col(s.PY_STACK).is_not_null()).then(pl.lit(0, pl.UInt16)).alias(s.PY_FRAME),
            pl.col("_rid").alias(s.PY_MODULE), pl.col("_status").alias(s.STATUS),
        )
