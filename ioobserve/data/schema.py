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
FILE_ID = "file_id"  # a key of (PATH, DEV, INO), the same in every trace: analysis chunks carry it instead of PATH
FILE = "file"  # the recording's id of (PATH, DEV, INO): the collector's batches carry it, the writer's FH records name it
FILE2 = "file2"  # the recording's id of PATH2
FD = "fd"
RET = "ret"
ERRNO = "errno"
BYTES_REQ = "bytes_req"
BYTES = "bytes"  # bytes done: read or written
OFFSET = "offset"
DEV = "dev"  # st_dev encoding, as os.stat reports it (block layer: the block device)
INO = "ino"
CGROUP = "cgroup_id"
ARG = "arg"  # op-specific: open flags, whence, mode, the other fd ...; block: ns queued before issue;
# io_uring: the ring's fd (events.RING_UNKNOWN: not known); AIO: the context's id
FLAGS = "flags"
COUNTED = "counted"  # False for the second record of a two-file call
PARENT_TS = "parent_ts"  # ts of the same thread's event this one happened inside (block: the syscall)
# The Python code a call was made from (ioobserve.python): the innermost frame and the stack
# (an id into the recording's stack table).
PY_STACK = "py_stack"
PY_FRAME = "py_frame"  # which frame of PY_STACK is the event's code: 0 the innermost (an I/O call's caller), k a span's, k levels up
PY_FUNCTION = "py_function"  # qualified name
PY_FILE = "py_file"
PY_LINE = "py_line"
PY_MODULE = "py_module"  # PYTHON-layer import events: the module imported (id batches: HTTP events' REQUEST_ID too)
REQUEST_ID = "request_id"  # HTTP events: the id the store's answer gave the request (x-amz-request-id, ...)
STATUS = "status"  # HTTP events: the answer's status (its first final one), null where no answer's head was read
# The enrichment's working columns (ioobserve.collect.enrich), gone before a batch reaches the
# sinks: the open file's kernel dev_t, and the call's path arguments, which name its file ids.
KDEV, NAME, NAME2 = "_kdev", "_name", "_name2"
# Job context, from the event's cgroup (ioobserve.context.cgroups) and uid.
CGROUP_PATH = "cgroup"  # relative to the cgroup v2 mount
JOB = "job"  # Slurm job id: from the cgroup, else SLURM_JOB_ID in the environment
STEP = "step"  # Slurm step: a number, "batch", "extern" or "interactive" (cgroup, else environment)
TASK = "task"  # Slurm task
UNIT = "unit"  # systemd unit (.service or .scope)
CONTAINER = "container"  # container id (Docker, containerd, CRI-O, podman)
POD = "pod"  # Kubernetes pod UID
NAMESPACE = "namespace"  # Kubernetes: the pod's namespace, from the container runtime's record of the container
POD_NAME = "pod_name"  # Kubernetes: the pod's name, likewise
CONTAINER_NAME = "container_name"  # Kubernetes: the container's name in its pod, likewise
USER = "user"  # the uid's name on the traced node
# Process context, from the environment at exec (ioobserve.context.launch), the process
# tree and the program's own tags (ioobserve.context.tags); it may change during a process's life.
RANK = "rank"  # RANK, OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK or SLURM_PROCID
LOCAL_RANK = "local_rank"
WORLD_SIZE = "world_size"
WORKER = "worker"  # a rank's worker process (DataLoader, multiprocessing): 0..n-1 in spawn order, per epoch
TAGS = "tags"  # the program's tags: a list of {key, value}; see ioobserve.tag()
HOST = "host"  # the node a trace was recorded on (its HH record), added by the analysis
TAG_ENTRY = pl.Struct({"key": pl.String, "value": pl.String})

# A label (a name many events share) is Categorical in what `load` and `scan` give: 4 bytes
# an event, not a string's 16 and more. String operations need a cast first:
# pl.col(PATH).cast(pl.String).str.starts_with(...). Layer and op stay Categorical, not Enum:
# a DFTracer trace brings its own categories and function names.
LABEL = pl.Categorical()

CGROUP_CONTEXT_SCHEMA: dict[str, pl.DataType] = {
    CGROUP_PATH: LABEL, JOB: LABEL, STEP: LABEL, TASK: pl.Int32, UNIT: LABEL, CONTAINER: LABEL, POD: LABEL,
    NAMESPACE: LABEL, POD_NAME: LABEL, CONTAINER_NAME: LABEL,
}
"""The columns a cgroup id determines."""

PROCESS_CONTEXT_SCHEMA: dict[str, pl.DataType] = {
    RANK: pl.Int32, LOCAL_RANK: pl.Int32, WORLD_SIZE: pl.Int32, WORKER: pl.Int32, TAGS: pl.List(TAG_ENTRY),
}
"""The columns a process's context at the event's time determines."""

EVENT_SCHEMA: dict[str, pl.DataType] = {
    TS: pl.UInt64, DUR: pl.UInt64, PID: pl.UInt32, TID: pl.UInt32, PPID: pl.UInt32, UID: pl.UInt32,
    COMM: LABEL, LAYER: LABEL, OP: LABEL, PATH: LABEL, PATH2: LABEL, FD: pl.Int32,
    RET: pl.Int64, ERRNO: pl.Int16, BYTES_REQ: pl.UInt64, BYTES: pl.UInt64, OFFSET: pl.Int64,
    DEV: pl.UInt64, INO: pl.UInt64, CGROUP: pl.UInt64, ARG: pl.UInt64, FLAGS: pl.UInt16, COUNTED: pl.Boolean,
    PARENT_TS: pl.UInt64, PY_STACK: pl.UInt32, PY_FRAME: pl.UInt16, PY_FUNCTION: LABEL, PY_FILE: LABEL, PY_LINE: pl.Int32,
    PY_MODULE: LABEL, REQUEST_ID: LABEL, STATUS: pl.UInt16, **CGROUP_CONTEXT_SCHEMA, USER: LABEL, **PROCESS_CONTEXT_SCHEMA,
}
"""An event as `load` and `scan` give it: names where the trace has ids, labels Categorical."""

LABELS = tuple(name for name, dtype in EVENT_SCHEMA.items() if dtype == LABEL)
"""The label columns of EVENT_SCHEMA."""

ID_SCHEMA: dict[str, pl.DataType] = {
    TS: pl.UInt64, DUR: pl.UInt64, PID: pl.UInt32, TID: pl.UInt32, UID: pl.UInt32, LAYER: pl.String, OP: pl.String,
    FILE: pl.UInt32, FILE2: pl.UInt32, FD: pl.Int32, RET: pl.Int64, BYTES_REQ: pl.UInt64, OFFSET: pl.Int64,
    CGROUP: pl.UInt64, ARG: pl.UInt64, FLAGS: pl.UInt16, PARENT_TS: pl.UInt64, PY_STACK: pl.UInt32, PY_FRAME: pl.UInt16,
    PY_MODULE: pl.String, STATUS: pl.UInt16,
}
"""An event as ids: what a trace's event line holds. The ids are named by tables
(ioobserve.data.model.BatchTables while recording, a trace's metadata records after): FILE and
FILE2 name PATH, DEV, INO and PATH2; CGROUP the CGROUP_CONTEXT_SCHEMA columns; UID the USER;
PY_STACK with PY_FRAME the PY_FUNCTION, PY_FILE and PY_LINE; PID at TS the PROCESS_CONTEXT_SCHEMA
columns (and PPID, COMM, from the process's record)."""

COPY_SCHEMA: dict[str, pl.DataType] = {**EVENT_SCHEMA, FILE_ID: pl.UInt64}
"""A trace's columnar copy (ioobserve.trace.read.columnar): the named event and its FILE_ID, so
that an analysis never hashes a path again."""

ID_BATCH_SCHEMA: dict[str, pl.DataType] = {
    **ID_SCHEMA, DEV: pl.UInt64, INO: pl.UInt64, ERRNO: pl.Int16, BYTES: pl.UInt64, COUNTED: pl.Boolean,
}
"""A batch the collector hands its sinks: events as ids (ID_SCHEMA) and the numbers their
records give (the file's or block device's DEV and INO, ERRNO, BYTES done, COUNTED). Its
tables (ioobserve.data.model.BatchTables) name the ids, for the sinks that show names."""

BATCH_SCHEMA: dict[str, pl.DataType] = {**EVENT_SCHEMA, **dict.fromkeys(LABELS, pl.String), FILE: pl.UInt32, FILE2: pl.UInt32}
"""A batch named (ioobserve.data.naming.BatchNamer): the event with its labels as Strings (a batch
is named in flight, not kept) and its file ids."""

CHUNK_SCHEMA: dict[str, pl.DataType] = {
    TS: pl.UInt64, DUR: pl.UInt64, PID: pl.UInt32, TID: pl.UInt32, LAYER: pl.Categorical, OP: pl.Categorical,
    FILE_ID: pl.UInt64, FD: pl.Int32, RET: pl.Int64, BYTES_REQ: pl.UInt64, BYTES: pl.UInt64, OFFSET: pl.Int64,
    ARG: pl.UInt64, FLAGS: pl.UInt16, COUNTED: pl.Boolean, CGROUP: pl.UInt64, PY_STACK: pl.UInt32, PY_FRAME: pl.UInt16, STATUS: pl.UInt16,
}
"""An event chunk of the analyses (ioobserve.trace.read.chunks): ids where EVENT_SCHEMA has names,
FILE_ID (the same in every trace) for PATH, DEV and INO; the trace's tables name the rest."""

# Layers (the trace's `cat`), top to bottom; parent_ts links an event to one a layer above.
LAYER_PYTHON = "PYTHON"
LAYER_HDF5 = "HDF5"
LAYER_MPIIO = "MPIIO"
LAYER_STDIO = "STDIO"  # libc's buffered streams (fopen, fwrite, ...)
LAYER_POSIX = "POSIX"  # libc's wrappers of file syscalls (open, read, ...), as the program called them
LAYER_SYSCALL = "SYSCALL"  # the kernel's view: every file syscall, the ground truth
LAYER_IO_URING = "IO_URING"  # io_uring requests, submission to completion (no read/write syscall carries them)
LAYER_AIO = "AIO"  # Linux AIO requests: io_submit's iocbs, submission to the io_getevents that reaped them
LAYER_HTTP = "HTTP"  # HTTP requests (object storage): a head written, its answer read (NET, TLS)
LAYER_TLS = "TLS"  # libssl's reads and writes: plaintext bytes on a socket
LAYER_NET = "NET"  # the syscalls on Internet sockets: bytes sent and received, connects and accepts
LAYER_VFS = "VFS"
LAYER_BLOCK = "BLOCK"  # block device requests, issue to completion
LAYER_CACHE = "CACHE"  # pages a call brought into the page cache, and readahead
