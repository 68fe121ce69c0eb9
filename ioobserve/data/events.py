"""The records that cross the ring buffers, mirrored from ebpf_probes/common.h.

A leaf module: it imports nothing from the project. tests/unit/test_event_layout.py
compiles common.h and checks these layouts field by field.
"""

from __future__ import annotations

import numpy as np

COMM_LEN = 16
NAME_LEN = 256
NAME_LABEL = 2  # a name record's index when it holds a label (an import's module name), not a path
PATH_BYTES = 4096
EXEC_BYTES = 512
ENV_BYTES = 16384
MAX_PREFIXES = 8
PREFIX_LEN = 128
MAX_OPS = 256

# enum ioo_op, in order: the index is the op code written by the kernel.
OP_NAMES: tuple[str, ...] = (
    "none",
    "open", "openat", "openat2", "creat",
    "close", "close_range",
    "read", "pread64", "readv", "preadv", "preadv2",
    "write", "pwrite64", "writev", "pwritev", "pwritev2",
    "lseek",
    "fsync", "fdatasync", "sync_file_range", "syncfs",
    "stat", "lstat", "fstat", "newfstatat", "statx",
    "access", "faccessat", "faccessat2",
    "unlink", "unlinkat",
    "rename", "renameat", "renameat2",
    "mkdir", "mkdirat", "rmdir",
    "getdents64",
    "truncate", "ftruncate", "fallocate",
    "mmap",
    "sendfile", "copy_file_range", "splice",
    "dup", "dup2", "dup3", "fcntl",
    "block_read", "block_write", "block_flush", "block_discard", "block_other",
    "cache_miss", "cache_add", "readahead", "readahead_async",
    "fopen", "fdopen", "freopen", "fclose",
    "fread", "fwrite", "fgets", "fputs",
    "fprintf", "vfprintf", "fscanf", "vfscanf",
    "fseek", "fseeko", "ftell", "ftello", "rewind",
    "fflush", "setvbuf",
    "posix_open", "posix_openat", "posix_creat", "posix_close",
    "posix_read", "posix_write", "posix_pread", "posix_pwrite",
    "posix_lseek", "posix_fsync", "posix_fdatasync",
    "posix_stat", "posix_lstat", "posix_fstat", "posix_fstatat",
    "vfs_read", "vfs_write", "vfs_open", "vfs_fsync",
    "H5Fcreate", "H5Fopen", "H5Fflush", "H5Fclose",
    "H5Dcreate2", "H5Dopen2", "H5Dread", "H5Dwrite", "H5Dclose",
    "H5Acreate2", "H5Aopen", "H5Aread", "H5Awrite", "H5Aclose",
    "H5Oopen", "H5Acreate_by_name", "H5Aopen_by_name", "H5Idec_ref",
    "MPI_File_open", "MPI_File_close", "MPI_File_set_view", "MPI_File_seek", "MPI_File_sync",
    "MPI_File_read", "MPI_File_write", "MPI_File_read_at", "MPI_File_write_at",
    "MPI_File_read_all", "MPI_File_write_all", "MPI_File_read_at_all", "MPI_File_write_at_all",
    "MPI_File_read_shared", "MPI_File_write_shared", "MPI_File_read_ordered", "MPI_File_write_ordered",
    "py_import", "py_open",
    "io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents",
    "io_pgetevents", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "uring_read", "uring_write", "uring_readv", "uring_writev",
    "uring_read_fixed", "uring_write_fixed", "uring_readv_fixed", "uring_writev_fixed",
    "uring_fsync", "uring_sync_file_range", "uring_fallocate", "uring_ftruncate",
    "uring_openat", "uring_openat2", "uring_close", "uring_statx",
    "uring_renameat", "uring_unlinkat", "uring_mkdirat",
    "aio_pread", "aio_pwrite", "aio_fsync", "aio_fdsync", "aio_preadv", "aio_pwritev",
    "vfs_kernel_read", "vfs_copy_file_range", "vfs_splice_direct", "vfs_splice",
    "net_read", "net_write", "net_readv", "net_writev",
    "recvfrom", "sendto", "recvmsg", "sendmsg",
    "connect", "accept", "accept4",
    "SSL_read", "SSL_write", "SSL_read_ex", "SSL_write_ex", "SSL_set_fd",
)
OP_CODES: dict[str, int] = {name: code for code, name in enumerate(OP_NAMES)}
POSIX_PREFIX = "posix_"
PYTHON_PREFIX = "py_"
URING_PREFIX = "uring_"
AIO_PREFIX = "aio_"
NET_PREFIX = "net_"  # read and write on a socket, apart from the file syscalls of those names
# What the trace calls each op: libc's wrappers by their function name, like the syscall;
# the interpreter's by what the program wrote (import, open); an io_uring or AIO request by
# its own op's name (IORING_OP_READ_FIXED: read_fixed; IOCB_CMD_PREAD: pread).
OP_LABELS: tuple[str, ...] = tuple(
    name if name.startswith("io_") else
    name.removeprefix(POSIX_PREFIX).removeprefix(PYTHON_PREFIX).removeprefix(URING_PREFIX).removeprefix(AIO_PREFIX)
    .removeprefix(NET_PREFIX)
    for name in OP_NAMES)

READ_OPS = frozenset({"read", "pread64", "readv", "preadv", "preadv2"})
WRITE_OPS = frozenset({"write", "pwrite64", "writev", "pwritev", "pwritev2"})
COPY_OPS = frozenset({"sendfile", "copy_file_range", "splice"})
# The VFS's copies (sendfile's is do_splice_direct): an input side, and an output side (F_PAIR_OUT).
VFS_COPY_OPS = frozenset({"vfs_copy_file_range", "vfs_splice_direct", "vfs_splice"})
BLOCK_OPS = frozenset({"block_read", "block_write", "block_flush", "block_discard", "block_other"})
# Each layer's op codes are one run, starting here (in this order).
FIRST_BLOCK_OP = OP_CODES["block_read"]
FIRST_CACHE_OP = OP_CODES["cache_miss"]
FIRST_STDIO_OP = OP_CODES["fopen"]
FIRST_POSIX_OP = OP_CODES["posix_open"]
FIRST_VFS_OP = OP_CODES["vfs_read"]
FIRST_HDF5_OP = OP_CODES["H5Fcreate"]
FIRST_MPIIO_OP = OP_CODES["MPI_File_open"]
FIRST_PYTHON_OP = OP_CODES["py_import"]
FIRST_ASYNC_SYSCALL_OP = OP_CODES["io_setup"]  # the syscall layer again
FIRST_URING_OP = OP_CODES["uring_read"]
FIRST_AIO_OP = OP_CODES["aio_pread"]
FIRST_MORE_VFS_OP = OP_CODES["vfs_kernel_read"]  # the VFS layer again
FIRST_NET_OP = OP_CODES["net_read"]
FIRST_TLS_OP = OP_CODES["SSL_read"]
TLS_READ_OPS = frozenset({"SSL_read", "SSL_read_ex"})  # ret is plaintext bytes moved
TLS_WRITE_OPS = frozenset({"SSL_write", "SSL_write_ex"})
# The HTTP layer's events (made in user space, ioobserve.collect.http_requests) by method, or
# by S3 operation where the request is S3's (ioobserve.collect.object_requests): ret is the answer's bytes.
HTTP_METHODS = frozenset({"GET", "PUT", "POST", "HEAD", "DELETE"})
S3_OPERATIONS = frozenset({
    "GetObject", "HeadObject", "PutObject", "CopyObject", "DeleteObject", "DeleteObjects", "RestoreObject",
    "CreateMultipartUpload", "UploadPart", "UploadPartCopy", "CompleteMultipartUpload", "AbortMultipartUpload",
    "ListParts", "ListMultipartUploads", "ListObjects", "ListObjectsV2", "ListObjectVersions", "ListBuckets",
    "HeadBucket", "CreateBucket", "DeleteBucket", "GetBucketLocation", "GetObjectTagging", "PutObjectTagging",
    "DeleteObjectTagging", "GetObjectAcl", "PutObjectAcl", "GetObjectAttributes", "SelectObjectContent",
    "GetBucketSubresource", "PutBucketSubresource", "DeleteBucketSubresource", "PostObject",
})
# The network layer's transfers (labels): ret is bytes moved.
NET_READ_LABELS = frozenset({"read", "readv", "recvfrom", "recvmsg"})
NET_WRITE_LABELS = frozenset({"write", "writev", "sendto", "sendmsg"})
STDIO_BYTES_OPS = frozenset({"fread", "fwrite"})  # ret is bytes moved (items x size)
POSIX_BYTES_OPS = frozenset({"read", "write", "pread", "pwrite"})  # labels, not names
CACHE_BYTES_OPS = frozenset({"cache_miss", "cache_add"})  # ret is bytes brought into the page cache
VFS_BYTES_OPS = frozenset({"vfs_read", "vfs_write", "vfs_kernel_read"}) | VFS_COPY_OPS
# The io_uring and AIO requests that move data (their labels): ret is bytes moved.
ASYNC_READ_LABELS = frozenset({"read", "readv", "read_fixed", "readv_fixed", "pread", "preadv"})
ASYNC_WRITE_LABELS = frozenset({"write", "writev", "write_fixed", "writev_fixed", "pwrite", "pwritev"})
# MPI-IO reads and writes: ret is MPI's error code; on success the bytes asked for moved.
MPIIO_TRANSFER_OPS = frozenset(name for name in OP_NAMES if name.startswith(("MPI_File_read", "MPI_File_write")))
# Labels of ops whose return is bytes moved, whatever their layer.
BYTES_OPS = (READ_OPS | WRITE_OPS | COPY_OPS | {"block_read", "block_write"} | STDIO_BYTES_OPS | POSIX_BYTES_OPS
             | CACHE_BYTES_OPS | VFS_BYTES_OPS | ASYNC_READ_LABELS | ASYNC_WRITE_LABELS | NET_READ_LABELS | NET_WRITE_LABELS
             | TLS_READ_OPS | TLS_WRITE_OPS | HTTP_METHODS | S3_OPERATIONS)

# ioo_syscall_spec.flags
S_RET_FD, S_IOV, S_STATBUF, S_STATX = 0x0001, 0x0002, 0x0004, 0x0008
S_OFFSET_PTR, S_MMAP, S_FCNTL_DUP, S_EMPTY_PATH = 0x0010, 0x0020, 0x0040, 0x0080
S_PAIR, S_OFFSET_NEG, S_HOW_FLAGS, S_FILE_POS = 0x0100, 0x0200, 0x0400, 0x0800
S_MSGHDR, S_PEER_AT_EXIT = 0x1000, 0x2000

# ioo_event.flags
F_FILE, F_NAME, F_NAME2, F_PAIR_OUT, F_POS, F_REPEAT = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
F_BLOCK, F_ASYNC, F_WRITEBACK, F_PARENT = 0x40, 0x80, 0x100, 0x200
F_FIXED, F_SQPOLL, F_HEAD, F_TLS_HELLO, F_ANSWER = 0x400, 0x800, 0x1000, 0x2000, 0x4000

# ioo_uring_spec.how, and the io_uring and AIO tables' sizes
U_RW, U_VEC, U_SYNC, U_RET_FD, U_FD = 0x1, 0x2, 0x4, 0x8, 0x10
URING_OPS, AIO_CMDS = 256, 16
RING_UNKNOWN = 0xFFFFFFFFFFFFFFFF  # an io_uring event's arg when its ring's fd is not known
URING_SPEC = np.dtype([("op", "<u2"), ("how", "<u2")])

# ioo_config.layers
LAYER_LIBS, LAYER_PYTHON, LAYER_AIO, LAYER_NET = 0x2, 0x4, 0x8, 0x10

AUX_PATH, AUX_NAME, AUX_PROC, AUX_ENV, AUX_LIB, AUX_PY_CHAIN, AUX_PY_CODE, AUX_CGROUP, AUX_HEAD = 1, 2, 3, 4, 5, 6, 7, 8, 9
AUX_KINDS = 10  # loss counters per auxiliary record kind
AUX_KIND_NAMES = ("aux", "aux:path", "aux:name", "aux:proc", "aux:env", "aux:lib", "aux:py_chain", "aux:py_code",
                  "aux:cgroup", "aux:head")
PROC_FORK, PROC_EXEC, PROC_EXIT = 1, 2, 3
PATH_TRUNCATED = 0x1
ENV_TRUNCATED = 0x1

SYSCALL_SPEC = np.dtype(
    [
        ("op", "<u2"), ("flags", "<u2"),
        ("fd_arg", "<i2"), ("path_arg", "<i2"), ("dirfd_arg", "<i2"), ("count_arg", "<i2"),
        ("offset_arg", "<i2"), ("aux_arg", "<i2"), ("buf_arg", "<i2"), ("fd2_arg", "<i2"),
        ("path2_arg", "<i2"), ("dirfd2_arg", "<i2"), ("net_op", "<u2"),
    ]
)

# ioo_call_spec.flags and enum ioo_library
C_RET_STREAM, C_RET_FD, C_RET_ITEMS = 0x1, 0x2, 0x4
C_RET_HANDLE, C_OUT_HANDLE, C_HANDLE_PTR, C_CLOSE_HANDLE, C_MPI_TYPE = 0x8, 0x10, 0x20, 0x40, 0x80
C_KNOWN_HANDLE, C_RET_INT, C_NESTS, C_NEEDS_IO, C_PY_NAME, C_RET_OBJECT = 0x100, 0x200, 0x400, 0x800, 0x1000, 0x2000
C_BIND_HANDLE, C_OUT_BYTES = 0x4000, 0x8000
LIB_LIBC, LIB_HDF5, LIB_MPIIO, LIB_PYTHON, LIB_SSL = 1, 2, 3, 4, 5

CALL_SPEC = np.dtype(
    [
        ("library", "<u2"), ("flags", "<u2"), ("stream_arg", "<i2"), ("fd_arg", "<i2"), ("count_arg", "<i2"),
        ("size_arg", "<i2"), ("offset_arg", "<i2"), ("aux_arg", "<i2"), ("stat_arg", "<i2"), ("handle_arg", "<i2"),
    ]
)

CONFIG = np.dtype(
    [
        ("self_tgid", "<u4"), ("filter_pid", "<u4"), ("filter_cgroup", "<u4"),
        ("filter_comm", "<u4"), ("filter_path", "<u4"), ("layers", "<u4"),
        ("emit_some", "<u4"), ("emit_gen", "<u4"), ("emit_count", "<u4"), ("stopped", "<u4"), ("select_gen", "<u4"),
        ("flood_limit", "<u4"),
    ]
)
# A cgroup's flood control (flood_states in core.bpf.c): its events this second, and those the
# limit kept in the kernel over the recording, the last of them and the first of its throttle.
FLOOD_STATE = np.dtype([("window", "<u8"), ("count", "<u8"), ("dropped", "<u8"), ("last_drop_ns", "<u8"),
                        ("throttle_start_ns", "<u8")])

AGG_KEY = np.dtype([("cgroup_id", "<u8"), ("uid", "<u4"), ("dev", "<u4"), ("op", "<u2"), ("out", "<u2"), ("pad", "<u4")])
AGG_LATENCY, AGG_SIZE, AGG_SLOTS = 0, 1, 40  # IOO_AGG_*
AGG_SUMS = ("calls", "errors", "ret_sum", "req_sum", "time_ns")
AGG_VALUE = np.dtype([*((name, "<u8") for name in AGG_SUMS), ("latency", "<u8", (AGG_SLOTS,)), ("size", "<u8", (AGG_SLOTS,))])
AGG_ENTRY = np.dtype([("key", AGG_KEY), ("value", AGG_VALUE)])  # a key and its value, as read from the kernel

EVENT = np.dtype(
    [
        ("ts_ns", "<u8"), ("dur_ns", "<u8"), ("ret", "<i8"), ("bytes_req", "<u8"),
        ("offset", "<i8"), ("ino", "<u8"), ("cgroup_id", "<u8"), ("arg", "<u8"), ("parent_ts", "<u8"),
        ("dev", "<u4"), ("fd", "<i4"), ("pid", "<u4"), ("tid", "<u4"), ("uid", "<u4"),
        ("op", "<u2"), ("flags", "<u2"), ("comm", "S16"), ("py_chain", "<u8"),
    ]
)

AUX_HEADER = np.dtype([("kind", "<u4"), ("size", "<u4")])

# A socket's path record holds this in place of a path (the net layer).
SOCK_DESC = np.dtype([("family", "<u2"), ("type", "<u2"), ("local_port", "<u2"), ("peer_port", "<u2"),
                      ("local_addr", "u1", (16,)), ("peer_addr", "u1", (16,))])
AF_INET, AF_INET6 = 2, 10
# serve's key for a socket's calls: its service end (struct ioo_endpoint), by hash in endpoint_names.
ENDPOINT = np.dtype([("family", "<u2"), ("type", "<u2"), ("port", "<u2"), ("pad", "<u2"), ("addr", "u1", (16,))])
S_IFMT, S_IFSOCK = 0o170000, 0o140000

PATH_RECORD = np.dtype(
    [
        ("kind", "<u4"), ("size", "<u4"), ("ino", "<u8"), ("dev", "<u4"), ("mode", "<u2"),
        ("flags", "<u2"), ("len", "<u4"), ("depth", "<u4"),
    ]
)  # followed by `len` bytes of data

HEAD_BYTES = 1024  # IOO_HEAD_BYTES: botocore's signed headers put Content-Length past 512
HEAD_RECORD = np.dtype([("kind", "<u4"), ("size", "<u4"), ("ts_ns", "<u8"), ("tid", "<u4"), ("len", "<u4"),
                        ("cgroup_id", "<u8"), ("conn", "<u8"), ("pid", "<u4"), ("pad", "<u4")])
# followed by `len` bytes: the first bytes of an HTTP request written (IOO_F_HEAD)

NAME_RECORD = np.dtype(
    [
        ("kind", "<u4"), ("size", "<u4"), ("ts_ns", "<u8"), ("base_ino", "<u8"),
        ("base_dev", "<u4"), ("tid", "<u4"), ("index", "<u2"), ("len", "<u2"),
    ]
)  # followed by the string

PROC_RECORD = np.dtype(
    [
        ("kind", "<u4"), ("size", "<u4"), ("ts_ns", "<u8"), ("cgroup_id", "<u8"),
        ("proc_kind", "<u4"), ("pid", "<u4"), ("tid", "<u4"), ("ppid", "<u4"), ("ptid", "<u4"),
        ("uid", "<u4"), ("exit_code", "<i4"), ("len", "<u4"), ("exe_ino", "<u8"), ("exe_dev", "<u4"), ("pad", "<u4"),
        ("comm", "S16"),
    ]
)  # followed by `len` bytes: filename NUL argv (NUL-separated)

ENV_RECORD = np.dtype(
    [("kind", "<u4"), ("size", "<u4"), ("ts_ns", "<u8"), ("pid", "<u4"), ("len", "<u4"), ("flags", "<u4"), ("pad", "<u4")]
)  # followed by `len` bytes: NUL-separated NAME=value strings

CGROUP_PATH_BYTES = 512
CGROUP_RECORD = np.dtype(
    [("kind", "<u4"), ("size", "<u4"), ("ts_ns", "<u8"), ("id", "<u8"), ("len", "<u4"), ("flags", "<u4")]
)  # followed by CGROUP_PATH_BYTES bytes, `len` of them the path from the hierarchy's root

LIB_RECORD = np.dtype(
    [("kind", "<u4"), ("size", "<u4"), ("ts_ns", "<u8"), ("ino", "<u8"), ("dev", "<u4"), ("pid", "<u4")]
)

# The Python layer (ebpf_probes/common.h, ioobserve/python/)
PY_LAYOUTS = 64
PY_MAX_FRAMES = 32
PY_SAME_SHIFT = 56  # an event's py_chain: the chain id below it, its levels shared with the thread's previous stack above
PY_CHAIN_MASK = (1 << PY_SAME_SHIFT) - 1
PY_NO_FIELD = 0xFFFFFFFF
PY_LASTI = 0x1
PY_PTHREAD_ID = 0x2  # tstate_native_id is thread_id, pthread_self() (3.10)
PY_FREE_THREADED = 0x4  # a free-threaded build (--disable-gil)
PY_TRUNCATED = 0x1
PY_NAME_BYTES, PY_FILE_BYTES, PY_TABLE_BYTES = 128, 256, 2048
PY_LAYOUT_FIELDS = (
    "runtime_interpreters", "interp_next", "interp_threads", "tstate_next", "tstate_native_id", "tstate_frame",
    "cframe_frame", "frame_previous", "frame_code", "frame_instr", "frame_owner", "frame_localsplus", "owner_shim",
    "code_argcount", "code_firstlineno", "code_qualname", "code_filename", "code_linetable", "code_adaptive",
    "code_tlbc", "frame_tlbc_index",
    "unicode_length", "unicode_state", "unicode_ascii_data", "unicode_compact_data", "unicode_ascii_mask",
    "unicode_kind_mask", "unicode_kind_shift", "bytes_size", "bytes_data", "flags", "version",
)
PY_LAYOUT = np.dtype([(name, "<u4") for name in PY_LAYOUT_FIELDS])
PY_PROC = np.dtype([("runtime", "<u8"), ("layout", "<u4"), ("depth", "<u4"), ("sample", "<u4"), ("flags", "<u4")])
PY_PROC_WALK_IMPORTS = 0x1  # walk calls made inside an import too
PY_IMAGE = np.dtype(
    [("proc", PY_PROC), ("text_offset", "<u8"), ("runtime_from_text_map", "<i8"), ("runtime_from_start_code", "<i8")]
)
PY_FRAME = np.dtype([("code", "<u8"), ("instance", "<u8"), ("instr", "<u4"), ("pad", "<u4")])
PY_CHAIN_RECORD = np.dtype(
    [("kind", "<u4"), ("size", "<u4"), ("chain", "<u8"), ("pid", "<u4"), ("depth", "<u4"), ("flags", "<u4"),
     ("pad", "<u4"), ("frames", PY_FRAME, (PY_MAX_FRAMES,))]
)
PY_CODE_RECORD = np.dtype(
    [("kind", "<u4"), ("size", "<u4"), ("code", "<u8"), ("pid", "<u4"), ("firstlineno", "<i4"), ("name_len", "<u4"),
     ("file_len", "<u4"), ("table_len", "<u4"), ("table_size", "<u4"), ("name_kind", "u1"), ("file_kind", "u1"),
     ("version", "<u2"), ("pad", "<u4"), ("name", f"S{PY_NAME_BYTES}"), ("file", f"S{PY_FILE_BYTES}"),
     ("table", f"V{PY_TABLE_BYTES}")]
)

FILE_KEY = np.dtype([("ino", "<u8"), ("dev", "<u4"), ("pad", "<u4")])

# Per-CPU `lost` array: op codes index event losses, then AUX_KINDS auxiliary-record kinds, then
# the block requests that could not be attributed and the events a flood limit held back.
LOST_AUX_BASE = MAX_OPS
LOST_BLOCK_NO_ORIGIN = MAX_OPS + AUX_KINDS  # block requests issued with no submitter known (block.bpf.c)
LOST_THROTTLED = MAX_OPS + AUX_KINDS + 1  # events a cgroup's flood limit kept in the kernel (core.bpf.c)
LOST_SLOTS = MAX_OPS + AUX_KINDS + 2
