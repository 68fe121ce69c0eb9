"""What the capture side and the trace side share, and nothing else: a process, what a
cgroup's path says, a mount, a Python stack, process-context rows with the as-of join that
gives each event its context, the tables that name a batch's ids, and an exited process's
accounting row. A leaf beside ioobserve.data.schema: the trace package reads and writes these
without importing any capture code."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NamedTuple

import polars as pl

from ioobserve.data import schema as s


@dataclass
class Process:
    """What is known of one process (a tgid)."""

    pid: int
    ppid: int = 0
    comm: str = ""
    exe: str = ""
    cmdline: tuple[str, ...] = ()
    start_ns: int | None = None  # monotonic ns of fork; None if born before recording
    exit_ns: int | None = None
    exit_code: int | None = None
    uid: int = 0
    cgroup_id: int = 0
    seeded: bool = False  # read from /proc, not seen being born
    children: list[int] = field(default_factory=list)


# Slurm, cgroup v1 layout: /slurm[_node]/uid_U/job_J/step_S/task_T (as mirrored in v2 by tests).
_SLURM_V1 = re.compile(r"/slurm(?:_[^/]+)?/uid_(?P<uid>\d+)/job_(?P<job>\d+)(?:/step_(?P<step>[^/]+))?(?:/task_(?P<task>\d+))?")
# Slurm, cgroup v2 layout: .../[node_]slurmstepd.scope/job_J/step_S/user/task_T
_SLURM_V2 = re.compile(
    r"/(?:[^/]*_)?slurmstepd\.scope/job_(?P<job>\d+)(?:/step_(?P<step>[^/]+))?(?:/user)?(?:/task_(?P<task>\d+))?"
)
# Kubernetes pods: cgroupfs driver (/kubepods/burstable/pod<uid>) and systemd driver
# (kubepods-burstable-pod<uid with _ for ->.slice).
_POD = re.compile(r"/(?:kubepods[^/]*-)?pod(?P<uid>[0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})(?:\.slice)?(?=/|$)")
# Container ids: a 64-hex component, bare (cgroupfs drivers) or as a runtime's scope.
_CONTAINER = re.compile(r"^(?:(?:docker|cri-containerd|crio|libpod|containerd)-)?(?P<id>[0-9a-f]{64})(?:\.scope)?$")
_UNIT_SUFFIXES = (".service", ".scope")


@dataclass(frozen=True)
class CgroupContext:
    """What a cgroup's path says about the work inside it (None: the path does not say)."""

    path: str  # relative to the v2 mount, starting with "/"
    job: str | None = None
    step: str | None = None
    task: int | None = None
    unit: str | None = None
    container: str | None = None
    pod: str | None = None
    namespace: str | None = None  # Kubernetes names: from the runtime (context.kubernetes), not the path
    pod_name: str | None = None
    container_name: str | None = None


def parse_cgroup_path(path: str) -> CgroupContext:
    """The context named by one cgroup path (relative to the v2 mount)."""
    job = step = task = pod = container = unit = None
    slurm = _SLURM_V1.search(path) or _SLURM_V2.search(path)
    if slurm:
        job, step = slurm["job"], slurm["step"]
        task = int(slurm["task"]) if slurm["task"] is not None else None
    found = _POD.search(path)
    if found:
        pod = found["uid"].replace("_", "-")
    for component in reversed(path.split("/")):
        if container is None and (match := _CONTAINER.match(component)):
            container = match["id"]
        if unit is None and component.endswith(_UNIT_SUFFIXES):
            unit = component
    return CgroupContext(path=path or "/", job=job, step=step, task=task, unit=unit, container=container, pod=pod)


# Pseudo-filesystems whose "files" are not I/O a user asks about: excluded by device.
# tmpfs stays in (/dev/shm, /tmp): data loaders exchange real data through it.
PSEUDO_FS = frozenset({
    "proc", "sysfs", "devtmpfs", "devpts", "tracefs", "debugfs", "cgroup", "cgroup2", "bpf",
    "securityfs", "pstore", "mqueue", "configfs", "fusectl", "binfmt_misc", "efivarfs",
})
# File systems shared across nodes: what a file's mount says about where its I/O goes.
SHARED_FS = frozenset({
    "nfs", "nfs4", "lustre", "gpfs", "beegfs", "cifs", "smb3", "ceph", "fuse.ceph", "glusterfs", "fuse.glusterfs",
    "panfs", "orangefs", "pvfs2", "wekafs", "fuse.sshfs", "9p", "afs", "virtiofs", "fuse.juicefs", "fuse.s3fs",
})


@dataclass(frozen=True)
class Mount:
    """One mount: its device (st_dev encoding, as os.stat and the trace's dev give it)."""

    dev: int
    mountpoint: str
    fstype: str
    major: int
    minor: int


KERNEL_CHAINS_SEEN = 65536  # python_stacks.bpf.c's py_chains_seen size: chains the kernel does not send again
KEPT_CHAINS = 2 * KERNEL_CHAINS_SEEN  # resolved chains (and distinct stacks) kept by last use, here and in the writer


NO_LINE = -1  # a frame whose instruction has no line (its code's line table says none, or is cut)


class Frame(NamedTuple):
    """One Python frame: the function's qualified name, its file and the line being run."""

    function: str
    file: str
    line: int


class Stack(NamedTuple):
    """Frames innermost first; truncated when the walk stopped before the outermost."""

    frames: tuple[Frame, ...]
    truncated: bool


# Process context rows: a change of context in force from `since` (ns); job and step as the
# environment gave them, for events whose cgroup names none.
ENV_JOB, ENV_STEP = "env_job", "env_step"  # rows' job and step, from the environment
ROW_SCHEMA: dict[str, pl.DataType] = {
    s.PID: pl.UInt32, "since": pl.UInt64, ENV_JOB: pl.String, ENV_STEP: pl.String, **s.PROCESS_CONTEXT_SCHEMA,
}


def join_process_context(events: pl.DataFrame, rows: pl.DataFrame, slack_ns: int = 0) -> pl.DataFrame:
    """Each event with the context row (ROW_SCHEMA) of its pid in force at its time, sorted by
    time; job and step fall back to the environment's where the cgroup names none. slack_ns:
    how much later than its ts an event may really have started (999 for a trace in µs, whose
    context changes are in ns: an event gets the context in force at the end of its µs)."""
    if rows.is_empty():
        return events.with_columns(pl.lit(None, dtype).alias(name) for name, dtype in s.PROCESS_CONTEXT_SCHEMA.items())
    joined = events.with_columns((pl.col(s.TS) + slack_ns).alias("_at")).sort("_at").join_asof(
        rows.sort("since"), left_on="_at", right_on="since", by=s.PID, strategy="backward", check_sortedness=False
    ).drop("_at")
    tags = pl.col(s.TAGS)
    return joined.with_columns(
        pl.coalesce(s.JOB, ENV_JOB).alias(s.JOB), pl.coalesce(s.STEP, ENV_STEP).alias(s.STEP),
        pl.when(tags.list.len() > 0).then(tags).alias(s.TAGS),  # no tags: null, as for a process without context
    ).drop("since", ENV_JOB, ENV_STEP)


FILE_ROW_SCHEMA: dict[str, pl.DataType] = {s.FILE: pl.UInt32, s.PATH: pl.String, s.DEV: pl.UInt64, s.INO: pl.UInt64}
"""A file id and what it names (an FH record); PATH2's ids name a path with dev and ino 0."""


@dataclass
class BatchTables:
    """What names the ids of one batch (schema.ID_SCHEMA), handed beside it: the files it names
    (FILE_ROW_SCHEMA), the context of its cgroups (those known yet), its uids' names, the
    context rows (ROW_SCHEMA, epoch ns) of its processes in force during it, and the Python
    stacks it is the first to use (earlier batches' stacks are not repeated)."""

    files: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=FILE_ROW_SCHEMA))
    cgroups: dict[int, CgroupContext] = field(default_factory=dict)
    users: dict[int, str] = field(default_factory=dict)
    contexts: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=ROW_SCHEMA))
    stacks: dict[int, Stack] = field(default_factory=dict)


COUNTERS = ("read_syscalls", "write_syscalls", "read_char", "write_char", "read_bytes", "write_bytes",
            "blkio_count", "blkio_delay_total")
"""The u64 fields of struct taskstats kept per exited process (ioobserve.collect.accounting)."""
TRACED = ("traced_reads", "traced_writes", "traced_read_bytes", "traced_write_bytes")
ACCOUNTING_SCHEMA: dict[str, pl.DataType] = {
    "pid": pl.UInt32, **dict.fromkeys(COUNTERS, pl.UInt64), **dict.fromkeys(TRACED, pl.UInt64), "agrees": pl.Boolean,
}
"""A TS record: an exited process's traced calls and bytes beside the kernel's counters."""
