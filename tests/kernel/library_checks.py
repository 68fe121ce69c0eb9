"""Checks of the library layers' events against what the workloads report of themselves: C
stdio (tests/workloads/stdio_workload.c), HDF5 and MPI-IO, and libssl's calls, shared by the
host's tests and those of the same workloads in other roots."""

from __future__ import annotations

from collections import Counter

import polars as pl

from ioobserve.data import schema as s


def check_stdio_workload(frame: pl.DataFrame, report: dict) -> None:
    """tests/workloads/stdio_workload.c's calls (`frame`: its events on its file) against its
    report: each stdio call, the write syscalls they became inside them, each pread wrapper
    with its one syscall."""
    stdio = frame.filter(pl.col(s.LAYER) == s.LAYER_STDIO)
    fwrites = stdio.filter(pl.col(s.OP) == "fwrite")
    assert fwrites.height == report["fwrites"]
    assert fwrites.get_column(s.BYTES).sum() == report["bytes"]
    assert stdio.filter(pl.col(s.OP) == "fflush").height == 1
    assert {"fopen", "setvbuf", "fclose"} <= set(stdio.get_column(s.OP).to_list())

    # The write syscalls: as many as stdio's buffer needs, every one inside an fwrite or the
    # fflush of this thread, the last one the fflush's; no POSIX event for libc's own write.
    writes = frame.filter((pl.col(s.LAYER) == s.LAYER_SYSCALL) & (pl.col(s.OP) == "write")).sort(s.TS)
    assert writes.height == report["write_syscalls"]
    assert writes.get_column(s.BYTES).sum() == report["bytes"]
    linked = writes.join(stdio.select(s.TID, pl.col(s.TS).alias(s.PARENT_TS), pl.col(s.OP).alias("parent_op"),
                                      pl.col(s.DUR).alias("parent_dur")), on=[s.TID, s.PARENT_TS], how="left")
    assert linked.get_column("parent_op").to_list() == ["fwrite"] * (report["write_syscalls"] - 1) + ["fflush"]
    assert linked.get_column(s.BYTES).to_list()[-1] == report["flushed"]
    assert linked.filter((pl.col(s.TS) < pl.col(s.PARENT_TS))
                         | (pl.col(s.TS) + pl.col(s.DUR) > pl.col(s.PARENT_TS) + pl.col("parent_dur"))).height == 0
    posix = frame.filter(pl.col(s.LAYER) == s.LAYER_POSIX)
    assert posix.filter(pl.col(s.OP) == "write").height == 0

    # The POSIX wrappers the program called itself: each pread with its one pread64 syscall.
    preads = posix.filter(pl.col(s.OP) == "pread")
    assert preads.height == report["preads"]
    assert preads.get_column(s.BYTES).sum() == report["read_bytes"]
    syscalls = frame.filter((pl.col(s.LAYER) == s.LAYER_SYSCALL) & (pl.col(s.OP) == "pread64"))
    children = children_of(syscalls, preads)
    assert children.height == syscalls.height == report["preads"]
    assert sorted(children.get_column(s.OFFSET).to_list()) == sorted(preads.get_column(s.OFFSET).to_list())
    assert {"open", "close"} <= set(posix.get_column(s.OP).to_list())


def children_of(frame: pl.DataFrame, parents: pl.DataFrame) -> pl.DataFrame:
    """Events of `frame` whose parent is one of `parents` (same thread, parent's ts)."""
    return frame.join(parents.select(s.TID, pl.col(s.TS).alias(s.PARENT_TS)), on=[s.TID, s.PARENT_TS], how="semi")


def syscalls_named(frame: pl.DataFrame, op: str) -> pl.DataFrame:
    """The syscall layer's events of `frame` of this op."""
    return frame.filter((pl.col(s.LAYER) == s.LAYER_SYSCALL) & (pl.col(s.OP) == op))


def check_hdf5_workload(frame: pl.DataFrame, report: dict, data: str) -> None:
    """tests/workloads/hdf5_workload.py's calls (`frame`: its process's events) against its
    report: each HDF5 call once, named by its file (`data`, as the trace names it), the
    dataset's bytes in the syscalls of H5Dwrite and H5Dread, every syscall on it inside one."""
    hdf5 = frame.filter(pl.col(s.LAYER) == s.LAYER_HDF5)
    ops = hdf5.get_column(s.OP).to_list()
    for op in ("H5Fcreate", "H5Dcreate2", "H5Dwrite", "H5Awrite", "H5Fopen", "H5Oopen", "H5Dread"):
        assert ops.count(op) == 1, (op, ops)
    # Every call is named by its file, through the handle it was made with.
    assert hdf5.get_column(s.PATH).to_list() == [data] * hdf5.height

    # The dataset's bytes go down in the syscalls of H5Dwrite and come back in those of H5Dread.
    for call, syscall in (("H5Dwrite", "pwrite64"), ("H5Dread", "pread64")):
        moved = children_of(syscalls_named(frame, syscall), hdf5.filter(pl.col(s.OP) == call))
        assert moved.get_column(s.BYTES).sum() == report["bytes"], call
    # Every syscall on the file happened inside an HDF5 call: HDF5 is the only one using it.
    on_file = frame.filter((pl.col(s.LAYER) == s.LAYER_SYSCALL) & (pl.col(s.PATH) == data))
    # two h5py.File: each closes its one descriptor; how many opens, stats, reads and writes
    # HDF5 makes in between is its own version's affair
    assert on_file.filter(pl.col(s.OP) == "close").height == 2
    assert {"openat", "pwrite64", "pread64"} <= set(on_file.get_column(s.OP)), on_file.get_column(s.OP).to_list()
    assert children_of(on_file, hdf5).height == on_file.height


def check_mpiio_workload(frame: pl.DataFrame, reports: dict[int, dict], data: str) -> None:
    """tests/workloads/mpiio_workload.py's ranks (`reports` by rank) in a trace: each rank's
    collective calls in order, named by the file (`data`, as the trace names it), with their
    bytes, offsets and counts, and the file I/O done inside them."""
    written = read = 0
    for rank, report in reports.items():
        mine = frame.filter(pl.col(s.PID) == report["pid"])
        mpiio = mine.filter(pl.col(s.LAYER) == s.LAYER_MPIIO)
        ops = mpiio.get_column(s.OP).to_list()
        assert ops == ["MPI_File_open", "MPI_File_write_at_all", "MPI_File_close",
                       "MPI_File_open", "MPI_File_read_at_all", "MPI_File_close"], ops
        assert mpiio.get_column(s.PATH).to_list() == [data] * mpiio.height
        assert mpiio.get_column(s.RANK).to_list() == [rank] * mpiio.height
        transfers = mpiio.filter(pl.col(s.OP).cat.ends_with("_at_all"))
        assert transfers.get_column(s.BYTES).to_list() == [report["bytes"]] * 2  # count x sizeof(MPI_DOUBLE)
        assert transfers.get_column(s.OFFSET).to_list() == [rank * report["bytes"]] * 2
        assert transfers.get_column(s.ARG).to_list() == [report["elements"]] * 2
        # Each rank opens the file itself, inside each of its MPI_File_open calls.
        opens = mpiio.filter(pl.col(s.OP) == "MPI_File_open")
        openats = syscalls_named(mine, "openat").filter(pl.col(s.PATH) == data)
        assert opens.join(openats.select(s.TID, pl.col(s.PARENT_TS).alias(s.TS)), on=[s.TID, s.TS], how="semi").height == 2
        written += children_of(syscalls_named(mine, "pwrite64"), transfers).get_column(s.BYTES).sum()
        read += children_of(syscalls_named(mine, "pread64"), transfers).get_column(s.BYTES).sum()
    # Whichever ranks did the file I/O, it was done inside the collective calls.
    assert written == read == sum(r["bytes"] for r in reports.values())


SSL_OPS = {"write": ("SSL_write", "SSL_write_ex"), "read": ("SSL_read", "SSL_read_ex")}


def check_ssl_calls(tls: pl.DataFrame, report: dict) -> pl.DataFrame:
    """Every successful SSL read and write of tls_workload.py's report, per connection and
    direction, calls and bytes, is in the TLS layer's events `tls`; those events."""
    expected, seen = Counter(), Counter()
    for name, direction, size, _ in report["calls"]:
        expected[(name, direction, "calls")] += 1
        expected[(name, direction, "bytes")] += size
    moved = tls.filter(pl.col(s.OP).is_in([*SSL_OPS["write"], *SSL_OPS["read"]]) & (pl.col(s.RET) > 0))
    for row in moved.iter_rows(named=True):
        direction = "write" if row[s.OP] in SSL_OPS["write"] else "read"
        seen[(row[s.PATH], direction, "calls")] += 1
        seen[(row[s.PATH], direction, "bytes")] += row[s.RET]
    assert seen == expected, (sorted(set(seen.items()) - set(expected.items())),
                              sorted(set(expected.items()) - set(seen.items())))
    assert sum(size for _, _, size, what in report["calls"] if what == "body") == report["body_bytes"]
    return moved
