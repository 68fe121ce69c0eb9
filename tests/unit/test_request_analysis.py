"""The analysis of HTTP requests (ioobserve.analysis.requests): per object, per endpoint, and
latency histograms that sum exactly over partials."""

from __future__ import annotations

import polars as pl

from ioobserve.analysis.requests import COUNT, ENDPOINT, LATENCY, LATENCY_BUCKETS, REQUESTS, endpoints, objects, request_latencies
from ioobserve.data import schema as s
from ioobserve.data.totals import BYTES, CALLS, FIRST_NS, LAST_NS, TIME_NS

MS = 1_000_000


def _events(*rows: tuple[int, str, int]) -> pl.LazyFrame:
    """(file id, layer, duration in ns) rows."""
    return pl.DataFrame([{s.FILE_ID: f, s.LAYER: layer, s.DUR: dur} for f, layer, dur in rows]).lazy()


def test_latencies_fall_in_their_buckets_and_other_layers_are_left_out():
    counts = request_latencies(_events((1, s.LAYER_HTTP, MS), (1, s.LAYER_HTTP, MS + 1), (1, s.LAYER_HTTP, 7 * 10**9),
                                       (2, s.LAYER_NET, 5 * MS)), [s.FILE_ID]).collect()
    got = {(row[s.FILE_ID], row[LATENCY]): row[COUNT] for row in counts.iter_rows(named=True)}
    assert got == {(1, "<=1ms"): 1, (1, "<=2ms"): 1, (1, ">5s"): 1}


def test_objects_and_endpoints_from_totals_and_latencies_of_two_partials():
    named = pl.DataFrame({
        s.LAYER: [s.LAYER_HTTP, s.LAYER_HTTP, s.LAYER_HTTP, s.LAYER_SYSCALL],
        s.PATH: ["https://s3.local/b/k1", "https://s3.local/b/k1", "http://10.0.0.9:9000/b/k2", "/data/x"],
        CALLS: [2, 1, 4, 9], BYTES: [200, 100, 4000, 9], TIME_NS: [20 * MS, 10 * MS, 8 * MS, 1],
        FIRST_NS: [5, 1, 3, 0], LAST_NS: [9, 7, 8, 0]})
    per_object = objects(named)
    assert per_object.select(s.PATH, REQUESTS, BYTES, TIME_NS, FIRST_NS, LAST_NS, ENDPOINT).rows() == [
        ("https://s3.local/b/k1", 3, 300, 30 * MS, 1, 9, "https://s3.local"),
        ("http://10.0.0.9:9000/b/k2", 4, 4000, 8 * MS, 3, 8, "http://10.0.0.9:9000")]
    files = pl.DataFrame({s.FILE_ID: [1, 2], s.PATH: ["https://s3.local/b/k1", "http://10.0.0.9:9000/b/k2"]})
    first = request_latencies(_events((1, s.LAYER_HTTP, 9 * MS), (2, s.LAYER_HTTP, 2 * MS)), [s.FILE_ID]).collect()
    second = request_latencies(_events((1, s.LAYER_HTTP, 10 * MS), (1, s.LAYER_HTTP, 11 * MS)), [s.FILE_ID]).collect()
    combined = pl.concat([first, second]).group_by(s.FILE_ID, LATENCY).agg(pl.col(COUNT).sum())
    table = endpoints(combined, files, per_object)
    assert table.columns == [ENDPOINT, REQUESTS, BYTES, TIME_NS, *LATENCY_BUCKETS]
    rows = {row[ENDPOINT]: row for row in table.iter_rows(named=True)}
    assert (rows["https://s3.local"]["<=10ms"], rows["https://s3.local"]["<=20ms"]) == (2, 1)
    assert rows["http://10.0.0.9:9000"]["<=2ms"] == 1 and rows["http://10.0.0.9:9000"][REQUESTS] == 4
    assert endpoints(combined.clear(), files, per_object).is_empty()
