"""The trace's metadata records (FH, PR, CG, US, PS, PC, MT) as small tables that name the ids
events carry: files, processes, cgroups, users, Python stacks, process contexts and mounts."""

from __future__ import annotations

import polars as pl

from ioobserve.data import schema as s
from ioobserve.data.model import ENV_JOB, ENV_STEP, ROW_SCHEMA
from ioobserve.data.naming import (
    FRAME_NAMES_SCHEMA,
    PROCESS_CGROUP,
    PROCESS_NAMES_SCHEMA,
    PROCESS_UID,
)
from ioobserve.trace.read import parse

MOUNTPOINT, FSTYPE = "mountpoint", "fstype"
STACK_TABLE_SCHEMA = {"stack": pl.UInt32, "frames": pl.List(pl.Struct({"function": pl.String, "file": pl.String, "line": pl.Int32}))}
"""Python stacks: frames innermost first."""
MOUNT_SCHEMA = {s.DEV: pl.UInt64, MOUNTPOINT: pl.String, FSTYPE: pl.String}


_FILE_KEY_SEED = 0xF11E


def file_key(path: pl.Expr, dev: pl.Expr, ino: pl.Expr) -> pl.Expr:
    """FILE_ID: a key of the file itself (path, dev, ino), the same in every trace that names
    it, so that the partials of several traces (parts, nodes) meet on it; null without a path."""
    # The path as text: a Categorical hashes as its id, which differs between processes.
    # Polars' hash is stable within its version, which every Dask worker shares; a copy made
    # by another version is rebuilt (its key holds the version).
    return pl.when(path.is_not_null()).then(pl.struct(path.cast(pl.String), dev, ino).hash(_FILE_KEY_SEED)).cast(pl.UInt64)


def with_file_ids(files: pl.DataFrame) -> pl.DataFrame:
    """A file table (file_table) with each file's FILE_ID."""
    return files.with_columns(file_key(pl.col(s.PATH), pl.col(s.DEV), pl.col(s.INO)).alias(s.FILE_ID))


def file_table(lines: pl.DataFrame) -> pl.DataFrame:
    """fhash -> path, dev, ino from FH records."""
    fh = parse.metadata(lines, "FH")
    return fh.select(
        pl.col("value").cast(pl.Categorical).alias("fhash"), pl.col("name").alias(s.PATH),
        pl.col("dev").fill_null(0).alias(s.DEV), pl.col("ino").fill_null(0).alias(s.INO),
    ).unique("fhash", keep="last")


def process_table(lines: pl.DataFrame) -> pl.DataFrame:
    """pid -> ppid, comm from our PR records (the latest of each pid), and the uid and cgroup of
    its first PR record in the file, which its event lines leave out (ioobserve.trace.lines)."""
    pr = parse.metadata(lines, "PR")
    if "ppid" not in pr.columns:
        return pl.DataFrame(schema=PROCESS_NAMES_SCHEMA)
    first = pr.unique("pid", keep="first").select("pid", pl.col("uid").alias(PROCESS_UID), pl.col("cgroup").alias(PROCESS_CGROUP))
    latest = pr.select(pl.col("pid"), pl.col("ppid").alias(s.PPID), pl.col("comm").alias(s.COMM)).unique("pid", keep="last")
    return latest.join(first, on="pid").rename({"pid": s.PID}).select(list(PROCESS_NAMES_SCHEMA)).cast(PROCESS_NAMES_SCHEMA)


def cgroup_table(lines: pl.DataFrame) -> pl.DataFrame:
    """cgroup id -> path and job context from CG records."""
    cg = parse.metadata(lines, "CG")
    return cg.select(
        pl.col("cgroup").alias(s.CGROUP), pl.col("name").alias(s.CGROUP_PATH),
        *(pl.col(key) for key in list(s.CGROUP_CONTEXT_SCHEMA)[1:]),
    ).unique(s.CGROUP, keep="last")


def user_table(lines: pl.DataFrame) -> pl.DataFrame:
    """uid -> user name from US records."""
    return parse.metadata(lines, "US").select(pl.col("uid").alias(s.UID), pl.col("name").alias(s.USER)).unique(s.UID, keep="last")


def stack_frames(lines: pl.DataFrame) -> pl.DataFrame:
    """(Python stack id, frame: 0 the innermost) -> the frame's function, file and line, from
    PS records (naming.FRAME_NAMES_SCHEMA)."""
    return frames_of(stack_table(lines))


def frames_of(stacks: pl.DataFrame) -> pl.DataFrame:
    """A stack table's (STACK_TABLE_SCHEMA) frames, one row each (naming.FRAME_NAMES_SCHEMA)."""
    return stacks.select(
        pl.col("stack").alias(s.PY_STACK), pl.int_ranges(pl.col("frames").list.len(), dtype=pl.UInt16).alias(s.PY_FRAME),
        "frames",
    ).explode(s.PY_FRAME, "frames").drop_nulls("frames").unnest("frames").select(
        s.PY_STACK, s.PY_FRAME, pl.col("function").alias(s.PY_FUNCTION), pl.col("file").alias(s.PY_FILE),
        pl.col("line").alias(s.PY_LINE),
    ).cast(FRAME_NAMES_SCHEMA)


def stack_table(lines: pl.DataFrame) -> pl.DataFrame:
    """Python stack id -> all its frames, from PS records."""
    ps = parse.metadata(lines, "PS")
    if "frames" not in ps.columns:
        return pl.DataFrame(schema=STACK_TABLE_SCHEMA)
    return ps.select("stack", "frames").unique("stack", keep="last").cast(STACK_TABLE_SCHEMA)


def context_table(lines: pl.DataFrame) -> pl.DataFrame:
    """Process context rows (pid, since, ...) from PC records, for an as-of join."""
    pc = parse.metadata(lines, "PC")
    return pc.select(
        pl.col("pid").alias(s.PID), "since", pl.col("job").alias(ENV_JOB), pl.col("step").alias(ENV_STEP),
        *s.PROCESS_CONTEXT_SCHEMA,
    ).cast(ROW_SCHEMA).sort("since")


def mount_table(lines: pl.DataFrame) -> pl.DataFrame:
    """dev -> mount point, file system type, from MT records (traces before them have none)."""
    mt = parse.metadata(lines, "MT")
    if "dev" not in mt.columns or not mt.height:
        return pl.DataFrame(schema=MOUNT_SCHEMA)
    return mt.select(pl.col("dev").alias(s.DEV), pl.col("name").alias(MOUNTPOINT), pl.col("value").alias(FSTYPE)).unique(
        s.DEV, keep="last").cast(MOUNT_SCHEMA)
