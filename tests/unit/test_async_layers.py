"""The IO_URING and AIO layers in user space: their ops' kinds and layers, the probes'
tables, and every consumer (summary, top, analysis) counting their requests as reads and
writes of their files, with the syscall layer's calls (the kernel's view)."""

from __future__ import annotations

import polars as pl

from ioobserve.analysis import results as r
from ioobserve.analysis.trace_partial import trace_partial
from ioobserve.data import events as ev
from ioobserve.data import schema as s
from ioobserve.data.derived import bytes_moved
from ioobserve.data.operations import OTHER, READ, SYNC, WRITE, io_layer, kernel_view, layer_of, op_kind, totals_layers
from ioobserve.live.window_totals import READ_BYTES, WRITE_BYTES, WindowAggregator
from ioobserve.probes.maps.async_table import AIO_CMDS, URING_OPS, aio_op_array, uring_spec_array
from ioobserve.sinks.summary import SummarySink
from tests.unit.synthetic_traces import T0, Proc, frame, io, write_trace

JOB = Proc(10)
NS = 1_000_000_000


def _requests() -> list[dict]:
    """An io_uring job: setup and an enter, two fixed-buffer reads and a write inside it; an AIO
    read and its io_submit; a plain read syscall."""
    uring, aio = s.LAYER_IO_URING, s.LAYER_AIO
    return [
        io(JOB, 10, 0, 1, "io_uring_setup"),
        io(JOB, 10, 2, 3, "io_uring_enter"),
        io(JOB, 10, 2.5, 40, "read_fixed", "/d/f", 0, 0, 4096, layer=uring),
        io(JOB, 10, 2.6, 50, "read_fixed", "/d/f", 0, 4096, 4096, layer=uring),
        io(JOB, 10, 2.7, 60, "write", "/d/g", 5, 0, 512, layer=uring),
        io(JOB, 10, 70, 71, "io_submit"),
        io(JOB, 10, 70.001, 90, "pread", "/d/h", 6, 8192, 1024, layer=aio),
        io(JOB, 10, 100, 101, "read", "/d/f", 7, 0, 100),
    ]


def _events() -> pl.DataFrame:
    """_requests() as the decoder gives them: bytes moved by each op's own rule."""
    return frame(_requests()).with_columns(bytes_moved(pl.col(s.OP), pl.col(s.RET), pl.col(s.BYTES_REQ)).alias(s.BYTES))


def _kinds(rows: list[tuple[str, str]]) -> list[str]:
    frame_ = pl.DataFrame(rows, schema={s.OP: pl.String, s.LAYER: pl.String}, orient="row")
    return frame_.with_columns(pl.lit(0, pl.UInt16).alias(s.FLAGS)).select(op_kind()).to_series().cast(pl.String).to_list()


def test_requests_have_their_kinds_and_the_calls_that_carry_them_are_other():
    uring, aio, syscall = s.LAYER_IO_URING, s.LAYER_AIO, s.LAYER_SYSCALL
    assert _kinds([("read_fixed", uring), ("writev_fixed", uring), ("readv", uring), ("fsync", uring),
                   ("pread", aio), ("pwritev", aio), ("fdsync", aio), ("openat", uring)]) == \
        [READ, WRITE, READ, SYNC, READ, WRITE, SYNC, "metadata"]
    assert set(_kinds([(name, syscall) for name in ("io_uring_enter", "io_submit", "io_getevents", "io_setup")])) == {OTHER}


def test_each_code_has_its_layer_and_label():
    for name, layer in (("uring_read_fixed", s.LAYER_IO_URING), ("uring_mkdirat", s.LAYER_IO_URING),
                        ("aio_pread", s.LAYER_AIO), ("aio_pwritev", s.LAYER_AIO), ("io_uring_enter", s.LAYER_SYSCALL),
                        ("io_setup", s.LAYER_SYSCALL), ("py_open", s.LAYER_PYTHON)):
        assert layer_of(ev.OP_CODES[name]) == layer, name
    assert ev.OP_LABELS[ev.OP_CODES["uring_read_fixed"]] == "read_fixed"
    assert ev.OP_LABELS[ev.OP_CODES["aio_pwrite"]] == "pwrite"
    assert ev.OP_LABELS[ev.OP_CODES["io_uring_enter"]] == "io_uring_enter"
    assert ev.OP_LABELS[ev.OP_CODES["io_submit"]] == "io_submit"


def test_the_probes_tables_place_each_op_at_its_uapi_number():
    uring = uring_spec_array()
    assert ev.OP_NAMES[uring[22]["op"]] == "uring_read" and ev.OP_NAMES[uring[4]["op"]] == "uring_read_fixed"
    assert uring[1]["how"] == ev.U_RW | ev.U_VEC and uring[19]["how"] == ev.U_FD and uring[18]["how"] == ev.U_RET_FD
    assert (uring["op"] != 0).sum() == len(URING_OPS) and uring[0]["op"] == 0  # IORING_OP_NOP: no file
    aio = aio_op_array()
    assert ev.OP_NAMES[aio[0]["op"]] == "aio_pread" and ev.OP_NAMES[aio[8]["op"]] == "aio_pwritev"
    assert (aio["op"] != 0).sum() == len(AIO_CMDS)


def test_totals_come_from_the_kernels_view():
    assert io_layer([s.LAYER_IO_URING, s.LAYER_BLOCK]) == s.LAYER_SYSCALL
    assert io_layer([s.LAYER_POSIX]) == s.LAYER_POSIX
    assert totals_layers(s.LAYER_SYSCALL) == (s.LAYER_SYSCALL, s.LAYER_IO_URING, s.LAYER_AIO)
    assert totals_layers(None) == ()
    layers = pl.DataFrame({s.LAYER: [s.LAYER_AIO, s.LAYER_BLOCK, s.LAYER_IO_URING]}, schema={s.LAYER: pl.Categorical})
    assert layers.select(kernel_view()).to_series().cast(pl.String).to_list() == [s.LAYER_SYSCALL, s.LAYER_BLOCK,
                                                                                 s.LAYER_SYSCALL]


def test_the_summary_counts_requests_as_reads_and_writes_of_their_files():
    sink = SummarySink()
    sink.events(_events())
    summary = sink.summary
    assert summary.calls == 8 and summary.bytes_read == 4096 + 4096 + 1024 + 100 and summary.bytes_written == 512
    assert summary.files["/d/f"] == [3, 8292, 0] and summary.files["/d/g"] == [1, 0, 512]
    assert summary.layers == {s.LAYER_SYSCALL: 4, s.LAYER_IO_URING: 3, s.LAYER_AIO: 1}


def test_top_counts_requests():
    aggregator = WindowAggregator(T0)
    aggregator.add(_events())
    totals = aggregator.take(T0 + NS).totals
    assert (totals[READ_BYTES], totals[WRITE_BYTES]) == (4096 + 4096 + 1024 + 100, 512)


def test_the_analysis_counts_requests_with_the_syscalls(tmp_path):
    analysis = r.results(trace_partial(write_trace(tmp_path, [JOB], [_requests()])))
    assert analysis.layer == s.LAYER_SYSCALL
    overview = r.as_dict(analysis)["overview"]
    assert overview["calls"] == 8
    assert (overview["bytes_read"], overview["bytes_written"]) == (4096 + 4096 + 1024 + 100, 512)
    files = {row[s.PATH]: row for row in analysis.files.iter_rows(named=True)}
    assert files["/d/f"][r.BYTES_READ] == 8292 and files["/d/h"][r.BYTES_READ] == 1024
    layers = dict(analysis.layers.select(s.LAYER, "events").iter_rows())
    assert layers == {s.LAYER_SYSCALL: 4, s.LAYER_IO_URING: 3, s.LAYER_AIO: 1}
