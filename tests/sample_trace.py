"""A small enriched frame of five events of every kind of context (Slurm job and step, rank and
worker, tags, a Python stack, a module, a process outside Slurm) and its Python stacks: what
the trace's writer and reader tests round-trip."""

from __future__ import annotations

import polars as pl

from ioobserve.data import events as ev
from ioobserve.data import schema as s
from ioobserve.data.model import Frame, Stack


def sample_frame() -> pl.DataFrame:
    """Five enriched events in the schema's columns (pids 10, 12 and 13; see the comments)."""
    rows = [
        # ts, dur, pid, tid, op, path, path2, fd, ret, req, bytes, offset, flags
        (1_700_000_000_000_001_234, 2_500, 10, 11, "read", "/data/a", None, 3, 4096, 4096, 4096, 0, ev.F_FILE | ev.F_POS),
        (1_700_000_000_000_002_000, 900, 10, 10, "rename", "/data/a", "/data/b", -1, 0, 0, 0, -1, ev.F_NAME | ev.F_NAME2),
        (1_700_000_000_000_003_000, 100, 12, 12, "read", None, None, 99, -9, 10, 0, -1, 0),
        (1_700_000_000_000_004_000, 100, 10, 10, "read", None, None, 99, -9, 10, 0, -1, 0),
        (1_700_000_000_000_005_000, 100, 13, 13, "read", None, None, 99, -9, 10, 0, -1, 0),
    ]
    frame = pl.DataFrame(
        rows,
        schema={s.TS: pl.UInt64, s.DUR: pl.UInt64, s.PID: pl.UInt32, s.TID: pl.UInt32, s.OP: pl.String, s.PATH: pl.String,
                s.PATH2: pl.String, s.FD: pl.Int32, s.RET: pl.Int64, s.BYTES_REQ: pl.UInt64, s.BYTES: pl.UInt64,
                s.OFFSET: pl.Int64, s.FLAGS: pl.UInt16},
        orient="row",
    )
    return frame.with_columns(
        pl.lit(1, pl.UInt32).alias(s.PPID), pl.lit(0, pl.UInt32).alias(s.UID), pl.lit("x").alias(s.COMM),
        pl.lit(s.LAYER_SYSCALL).alias(s.LAYER), pl.lit(0, pl.UInt64).alias(s.DEV), pl.lit(0, pl.UInt64).alias(s.INO),
        pl.lit(1, pl.UInt64).alias(s.CGROUP), pl.lit(0, pl.UInt64).alias(s.ARG),
        pl.when(pl.col(s.RET) < 0).then(-pl.col(s.RET)).otherwise(0).cast(pl.Int32).alias(s.ERRNO),
        pl.lit(True).alias(s.COUNTED),
        # pid 12's event happened inside another of its thread's (a block request in its syscall)
        pl.when(pl.col(s.PID) == 12).then(pl.lit(1_700_000_000_000_002_500, pl.UInt64)).alias(s.PARENT_TS),
        # pid 10 reads from Python (stack 1)
        pl.when(pl.col(s.PID) == 10).then(pl.lit(1, pl.UInt32)).alias(s.PY_STACK),
        pl.when(pl.col(s.PID) == 10).then(pl.lit(0, pl.UInt16)).alias(s.PY_FRAME),
        pl.when(pl.col(s.PID) == 10).then(pl.lit("Dataset.__getitem__")).alias(s.PY_FUNCTION),
        pl.when(pl.col(s.PID) == 10).then(pl.lit("/w/data.py")).alias(s.PY_FILE),
        pl.when(pl.col(s.PID) == 10).then(pl.lit(42, pl.Int32)).alias(s.PY_LINE),
        pl.when(pl.col(s.PID) == 13).then(pl.lit("pkg.sub_mod")).alias(s.PY_MODULE), pl.lit(None, pl.String).alias(s.REQUEST_ID), pl.lit(None, pl.UInt16).alias(s.STATUS),
        pl.lit("/slurm/uid_0/job_7/step_0/task_1").alias(s.CGROUP_PATH), pl.lit("7").alias(s.JOB),
        pl.lit("0").alias(s.STEP), pl.lit(1, pl.Int32).alias(s.TASK), pl.lit(None, pl.String).alias(s.UNIT),
        pl.lit(None, pl.String).alias(s.CONTAINER), pl.lit(None, pl.String).alias(s.POD),
        *(pl.lit(None, pl.String).alias(k) for k in (s.NAMESPACE, s.POD_NAME, s.CONTAINER_NAME)), pl.lit("root").alias(s.USER),
    ).with_columns(
        # pid 13 runs outside Slurm's cgroups: its job and step come from its environment.
        pl.when(pl.col(s.PID) == 13).then(pl.lit("/user.slice")).otherwise(pl.col(s.CGROUP_PATH)).alias(s.CGROUP_PATH),
        pl.when(pl.col(s.PID) == 13).then(pl.lit(2, pl.UInt64)).otherwise(pl.col(s.CGROUP)).alias(s.CGROUP),
        pl.when(pl.col(s.PID) == 13).then(pl.lit("99")).otherwise(pl.col(s.JOB)).alias(s.JOB),
        pl.when(pl.col(s.PID) == 13).then(pl.lit(None, pl.String)).otherwise(pl.col(s.STEP)).alias(s.STEP),
        pl.when(pl.col(s.PID) == 13).then(pl.lit(None, pl.Int32)).otherwise(pl.col(s.TASK)).alias(s.TASK),
        # pid 10 is rank 3's worker 1; its epoch tag changes between its events; pid 12 has no context.
        pl.when(pl.col(s.PID).is_in([10, 13])).then(pl.lit(3, pl.Int32)).alias(s.RANK),
        pl.when(pl.col(s.PID) == 10).then(pl.lit(0, pl.Int32)).alias(s.LOCAL_RANK),
        pl.when(pl.col(s.PID) == 10).then(pl.lit(4, pl.Int32)).alias(s.WORLD_SIZE),
        pl.when(pl.col(s.PID) == 10).then(pl.lit(1, pl.Int32)).alias(s.WORKER),
        pl.Series(s.TAGS, [[{"key": "epoch", "value": "1"}], [{"key": "epoch", "value": "1"}, {"key": "phase", "value": "io"}],
                           None, [{"key": "epoch", "value": "2"}], None], dtype=pl.List(s.TAG_ENTRY)),
    ).select(list(s.EVENT_SCHEMA))


PY_STACKS = {1: Stack((Frame("Dataset.__getitem__", "/w/data.py", 42), Frame("<module>", "/w/train.py", 7)), False)}
