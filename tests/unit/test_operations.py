"""The one table of operations: kinds for every layer's names and layers for our op codes."""

from __future__ import annotations

import polars as pl

from ioobserve.data import events as ev
from ioobserve.data import schema as s
from ioobserve.data.operations import METADATA, OTHER, READ, SYNC, WRITE, layer_of, op_kind


def _kinds(rows: list[tuple[str, str, int]]) -> list[str]:
    frame = pl.DataFrame(rows, schema={s.OP: pl.String, s.LAYER: pl.String, s.FLAGS: pl.UInt16}, orient="row")
    return frame.select(op_kind()).to_series().cast(pl.String).to_list()


def test_each_name_has_its_kind_in_every_layer():
    rows = [(op, s.LAYER_SYSCALL, 0) for op in sorted(ev.READ_OPS)] + [(op, s.LAYER_SYSCALL, 0) for op in sorted(ev.WRITE_OPS)]
    assert _kinds(rows) == [READ] * len(ev.READ_OPS) + [WRITE] * len(ev.WRITE_OPS)
    assert _kinds([("pread", s.LAYER_POSIX, 0), ("fwrite", s.LAYER_STDIO, 0), ("H5Dread", s.LAYER_HDF5, 0),
                   ("MPI_File_write_at_all", s.LAYER_MPIIO, 0), ("block_write", s.LAYER_BLOCK, 0),
                   ("fsync", s.LAYER_SYSCALL, 0), ("cache_miss", s.LAYER_CACHE, 0), ("openat", s.LAYER_SYSCALL, 0),
                   ("pread64", "POSIX", 0)]) == [READ, WRITE, READ, WRITE, WRITE, SYNC, OTHER, METADATA, READ]


def test_a_copy_reads_its_input_and_writes_its_output_and_python_calls_are_other():
    assert _kinds([("sendfile", s.LAYER_SYSCALL, 0), ("sendfile", s.LAYER_SYSCALL, ev.F_PAIR_OUT),
                   ("open", s.LAYER_PYTHON, 0), ("read", s.LAYER_PYTHON, 0)]) == [READ, WRITE, OTHER, OTHER]


def test_each_op_code_has_its_layer():
    assert layer_of(ev.OP_CODES["pread64"]) == s.LAYER_SYSCALL
    assert layer_of(ev.OP_CODES["block_read"]) == s.LAYER_BLOCK
    assert layer_of(ev.OP_CODES["posix_open"]) == s.LAYER_POSIX
    assert layer_of(ev.OP_CODES["H5Fcreate"]) == s.LAYER_HDF5
    assert layer_of(ev.OP_CODES["py_import"]) == s.LAYER_PYTHON
    assert layer_of(len(ev.OP_NAMES) + 3) == s.LAYER_SYSCALL  # a code this version does not know
