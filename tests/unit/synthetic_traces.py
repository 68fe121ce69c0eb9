"""Synthetic traces for the analysis tests: events given as a few fields each, written by the
real TraceWriter so that the analysis reads them the way it reads a recording."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from ioobserve.data import events as ev
from ioobserve.data import schema as s
from ioobserve.data.model import Mount
from ioobserve.data.model import Process
from ioobserve.data.model import Stack
from ioobserve.trace.write import format_thread as writer_module
from ioobserve.trace.write.writer import TraceWriter
from tests.batches import Batches

T0 = 1_800_000_000_000_000_000  # ns since the epoch
US = 1000


@dataclass(frozen=True)
class Proc:
    """A process of a synthetic trace and its context."""

    pid: int
    ppid: int = 1
    rank: int | None = None
    worker: int | None = None
    job: str | None = "7"


def io(proc: Proc, tid: int, start_us: float, end_us: float, op: str, path: str | None = None, fd: int = -1,
       offset: int = -1, size: int = 0, ret: int | None = None, dev: int = 0, stack: int | None = None,
       layer: str = s.LAYER_SYSCALL, py_frame: int | None = None, path2: str | None = None, ino: int = 0) -> dict:
    """One event (of the syscall layer unless told) from start_us to end_us after T0; ret
    defaults to the size; py_frame: which frame of `stack` it is (a Python span's); path2: a
    rename's target, an HTTP request's connection; ino: the file's inode (0: unknown)."""
    flags = (ev.F_FILE if path else 0) | (ev.F_POS if op in ("read", "write") else 0)
    return {s.TS: T0 + int(start_us * US), s.DUR: int((end_us - start_us) * US), s.PID: proc.pid, s.TID: tid,
            s.PPID: proc.ppid, s.OP: op, s.PATH: path, s.FD: fd, s.RET: size if ret is None else ret, s.BYTES_REQ: size,
            s.OFFSET: offset, s.FLAGS: flags, s.JOB: proc.job, s.RANK: proc.rank, s.WORKER: proc.worker, s.DEV: dev, s.PY_STACK: stack,
            s.LAYER: layer, s.PY_FRAME: py_frame, s.PATH2: path2, s.INO: ino}


def frame(rows: list[dict]) -> pl.DataFrame:
    """Events in the columns of ioobserve.data.schema, the rest filled as a recording would."""
    given = pl.DataFrame(rows, schema={
        s.TS: pl.UInt64, s.DUR: pl.UInt64, s.PID: pl.UInt32, s.TID: pl.UInt32, s.PPID: pl.UInt32, s.OP: pl.String,
        s.PATH: pl.String, s.FD: pl.Int32, s.RET: pl.Int64, s.BYTES_REQ: pl.UInt64, s.OFFSET: pl.Int64,
        s.FLAGS: pl.UInt16, s.JOB: pl.String, s.RANK: pl.Int32, s.WORKER: pl.Int32, s.DEV: pl.UInt64, s.PY_STACK: pl.UInt32,
        s.LAYER: pl.String, s.PY_FRAME: pl.UInt16, s.PATH2: pl.String, s.INO: pl.UInt64}).sort(s.TS)
    moving = ev.READ_OPS | ev.WRITE_OPS | ev.NET_READ_LABELS | ev.NET_WRITE_LABELS | ev.HTTP_METHODS
    bytes_done = pl.when(pl.col(s.OP).is_in(sorted(moving))).then(pl.col(s.RET).clip(lower_bound=0))
    filled = given.with_columns(
        bytes_done.otherwise(0).cast(pl.UInt64).alias(s.BYTES), pl.lit(0, pl.UInt32).alias(s.UID),
        pl.lit("python3").alias(s.COMM),
        # a cgroup per job: 70 is job 7's, 1000 + N job N's; 1 has none
        pl.when(pl.col(s.JOB) == "7").then(pl.lit(70, pl.UInt64))
        .when(pl.col(s.JOB).is_not_null()).then(1000 + pl.col(s.JOB).cast(pl.UInt64))
        .otherwise(pl.lit(1, pl.UInt64)).alias(s.CGROUP), pl.lit(0, pl.UInt64).alias(s.ARG),
        pl.when(pl.col(s.RET) < 0).then(-pl.col(s.RET)).otherwise(0).cast(pl.Int32).alias(s.ERRNO),
        pl.lit(True).alias(s.COUNTED),
        pl.when(pl.col(s.JOB).is_not_null()).then(pl.concat_str(pl.lit("/slurm/job_"), pl.col(s.JOB), pl.lit("/step_0")))
        .otherwise(pl.lit("/user.slice")).alias(s.CGROUP_PATH),
        pl.when(pl.col(s.JOB).is_not_null()).then(pl.lit("0")).alias(s.STEP),
        pl.lit(None, pl.UInt64).alias(s.PARENT_TS),
        pl.when(pl.col(s.PY_STACK).is_not_null()).then(pl.col(s.PY_FRAME).fill_null(0)).alias(s.PY_FRAME),
        pl.lit(None, pl.String).alias(s.PY_FUNCTION), pl.lit(None, pl.String).alias(s.PY_FILE),
        pl.lit(None, pl.Int32).alias(s.PY_LINE), pl.lit(None, pl.String).alias(s.PY_MODULE),
        pl.lit(None, pl.String).alias(s.REQUEST_ID), pl.lit(None, pl.UInt16).alias(s.STATUS), pl.lit(None, pl.Int32).alias(s.TASK), pl.lit(None, pl.String).alias(s.UNIT), pl.lit(None, pl.String).alias(s.CONTAINER),
        pl.lit(None, pl.String).alias(s.POD), *(pl.lit(None, pl.String).alias(k) for k in (s.NAMESPACE, s.POD_NAME, s.CONTAINER_NAME)),
        pl.lit("root").alias(s.USER), pl.lit(None, pl.Int32).alias(s.LOCAL_RANK),
        pl.lit(None, pl.Int32).alias(s.WORLD_SIZE), pl.lit(None, pl.List(s.TAG_ENTRY)).alias(s.TAGS),
    )
    return filled.select(list(s.EVENT_SCHEMA)).cast(s.EVENT_SCHEMA)


def private_dir(parent: Path, name: str = "traces") -> Path:
    """A new directory only we may write in: where traces keep their Parquet copies."""
    directory = parent / name
    directory.mkdir(mode=0o700)
    return directory


def write_trace(directory: Path, procs: list[Proc], batches: list[list[dict]], name: str = "t.pfw.gz",
                mounts: list[Mount] | None = None, stacks: dict[int, Stack] | None = None) -> Path:
    """A trace of the processes and events, on `mounts` (default: none), with the Python stacks
    events name; each batch becomes its own gzip member(s)."""
    flush_bytes = writer_module.FLUSH_BYTES
    writer_module.FLUSH_BYTES = 1  # a member per batch, as a long recording has many
    try:
        writer = TraceWriter(directory, name, {"command": ["synthetic"]}, mounts=mounts or [])
        writer.processes([Process(pid=p.pid, ppid=p.ppid, comm="python3", exe="/usr/bin/python3", cmdline=("python3",))
                          for p in procs])
        named = Batches()
        for number, rows in enumerate(batches):
            writer.events(*named(frame(rows), stacks if number == 0 else None))
        writer.close()
    finally:
        writer_module.FLUSH_BYTES = flush_bytes
    return writer.path
