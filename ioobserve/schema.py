"""The one declaration of event columns and their types (a leaf module)."""

from __future__ import annotations

import polars as pl

TS = "ts"  # start, ns since the Unix epoch
DUR = "dur"  # ns
PID = "pid"
TID = "tid"
PPID = "ppid"
UID = "uid"
COMM = "comm"
LAYER = "layer"
OP = "op"
PATH = "path"
PATH2 = "path2"  # rename's target
FD = "fd"
RET = "ret"
ERRNO = "errno"
BYTES_REQ = "bytes_req"
BYTES = "bytes"  # bytes done: read or written
OFFSET = "offset"
DEV = "dev"  # st_dev encoding, as os.stat reports it
INO = "ino"
CGROUP = "cgroup_id"
ARG = "arg"  # op-specific: open flags, whence, mode, the other fd ...
FLAGS = "flags"
COUNTED = "counted"  # False for the second record of a two-file call
# Job context, from the event's cgroup (ioobserve.context.cgroups) and uid.
CGROUP_PATH = "cgroup"  # relative to the cgroup v2 mount
JOB = "job"  # Slurm job id
STEP = "step"  # Slurm step: a number, "batch", "extern" or "interactive"
TASK = "task"  # Slurm task
UNIT = "unit"  # systemd unit (.service or .scope)
CONTAINER = "container"  # container id (Docker, containerd, CRI-O, podman)
POD = "pod"  # Kubernetes pod UID
USER = "user"  # the uid's name on the traced node

CGROUP_CONTEXT_SCHEMA: dict[str, pl.DataType] = {
    CGROUP_PATH: pl.String, JOB: pl.String, STEP: pl.String, TASK: pl.Int32, UNIT: pl.String,
    CONTAINER: pl.String, POD: pl.String,
}
"""The columns a cgroup id determines."""

EVENT_SCHEMA: dict[str, pl.DataType] = {
    TS: pl.UInt64, DUR: pl.UInt64, PID: pl.UInt32, TID: pl.UInt32, PPID: pl.UInt32, UID: pl.UInt32,
    COMM: pl.String, LAYER: pl.String, OP: pl.String, PATH: pl.String, PATH2: pl.String, FD: pl.Int32,
    RET: pl.Int64, ERRNO: pl.Int32, BYTES_REQ: pl.UInt64, BYTES: pl.UInt64, OFFSET: pl.Int64,
    DEV: pl.UInt64, INO: pl.UInt64, CGROUP: pl.UInt64, ARG: pl.UInt64, FLAGS: pl.UInt16, COUNTED: pl.Boolean,
    **CGROUP_CONTEXT_SCHEMA, USER: pl.String,
}

LAYER_SYSCALL = "SYSCALL"
