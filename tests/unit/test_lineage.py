"""Lineage's pure parts (ioobserve.analysis.lineage): what counts as a job's data, and a
derived-from link only where the writer read the source before it last wrote the target."""

from __future__ import annotations

import polars as pl

from ioobserve.analysis import lineage as ln
from ioobserve.data import schema as s


def test_code_and_system_files_are_not_data():
    paths = ["/scratch/run/shard-0.bin", "/home/u/ckpt/step-1.pt", "/usr/lib/python3.11/os.py", "/etc/hosts",
             "/home/u/venv/lib/python3.11/site-packages/torch/nn/functional.py", "/home/u/train.py",
             "/home/u/lib/libfoo.so.1", "/tmp/pymp-abc123/listener", "/home/u/.venv/pyvenv.cfg", "/dev/shm/x"]
    kept = pl.DataFrame({"path": paths}).filter(ln.is_data(pl.col("path"))).get_column("path").to_list()
    assert kept == ["/scratch/run/shard-0.bin", "/home/u/ckpt/step-1.pt"]


def _rows(*rows: tuple) -> pl.DataFrame:
    """(pid, path, first read, last write) rows of one job on one host."""
    return pl.DataFrame([(None, "n1", pid, path, first, last) for pid, path, first, last in rows],
                        schema={s.JOB: pl.String, s.HOST: pl.String, s.PID: pl.UInt32, s.PATH: pl.String,
                                ln.FIRST_READ: pl.UInt64, ln.LAST_WRITE: pl.UInt64}, orient="row")


def test_a_link_needs_the_source_read_before_the_target_was_last_written_by_the_same_process():
    rows = _rows((1, "/d/a", 10, None), (1, "/d/b", 50, None), (1, "/o/x", None, 40),
                 (2, "/d/a", 5, None), (3, "/o/y", None, 100),  # 3 read nothing: no link to y
                 (4, "/o/z", 1, 2))  # read and written itself: no link to itself
    links = ln.derived_links(rows).select(s.PID, ln.SOURCE, ln.TARGET).rows()
    assert links == [(1, "/d/a", "/o/x")]  # /d/b was read after x's last write


def test_per_process_counts_files_read_and_generated_an_empty_one_too():
    lineage = pl.DataFrame({s.JOB: ["7"] * 4, s.HOST: ["n1"] * 4, s.PID: [1, 1, 2, 2], s.COMM: ["w", "w", "m", "m"],
                            s.PATH: ["/d/a", "/d/b", "/o/x", "/o/DONE"], ln.BYTES_READ: [10, 20, 0, 0],
                            ln.BYTES_WRITTEN: [0, 0, 5, 0], ln.GENERATED: [False, False, True, True]})
    rows = ln.per_process(lineage).select(s.PID, "files_read", ln.BYTES_READ, "files_written", ln.BYTES_WRITTEN).rows()
    assert rows == [(1, 2, 30, 0, 0), (2, 0, 0, 2, 5)]
    assert [ln.role(1, False), ln.role(0, True), ln.role(1, True)] == ["used", "generated", "used and generated"]


def test_an_open_that_makes_its_file_anew_is_told_from_one_that_does_not():
    rdonly, wronly, rdwr = 0, 1, 2
    opens = pl.DataFrame({s.OP: ["openat", "openat", "openat", "openat", "creat", "openat", "read"],
                          s.RET: [3, 3, 3, 3, 3, -17, 4096],
                          s.ARG: [wronly | ln.O_CREAT | ln.O_TRUNC, rdwr | ln.O_CREAT | ln.O_EXCL, wronly | ln.O_CREAT,
                                  rdonly | ln.O_TRUNC, 0o644, wronly | ln.O_CREAT | ln.O_EXCL, wronly | ln.O_TRUNC]})
    assert opens.select(ln.opened_anew()).to_series().to_list() == [True, True, False, False, True, False, False]
