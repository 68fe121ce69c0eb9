/* The contract between the kernel probes and ioobserve's user space.
 *
 * Every record that crosses a ring buffer is declared here; ioobserve/data/events.py mirrors
 * these layouts as numpy dtypes and tests/unit/test_event_layout.py compiles this header
 * to check that sizes and offsets agree. Keep fields naturally aligned, widest first.
 */
#ifndef IOOBSERVE_COMMON_H
#define IOOBSERVE_COMMON_H

#include <linux/types.h>

#define IOO_COMM_LEN 16
#define IOO_NAME_LEN 256      /* bytes of a user-supplied path kept per name record */
#define IOO_NAME_LABEL 2      /* a name record's index when it holds a label, not a path (a module name) */
#define IOO_PATH_BYTES 4096   /* bytes of a kernel-resolved path (leaf-first components) */
#define IOO_EXEC_BYTES 512    /* bytes of filename + argv kept per exec */
#define IOO_ENV_BYTES 16384   /* bytes of a new program's environment kept per exec */
#define IOO_MAX_PREFIXES 8
#define IOO_PREFIX_LEN 128
#define IOO_MAX_OPS 256

/* Operations. Values are stable: they are written into traces as numbers too. */
enum ioo_op {
	IOO_OP_NONE = 0,
	IOO_OP_OPEN, IOO_OP_OPENAT, IOO_OP_OPENAT2, IOO_OP_CREAT,
	IOO_OP_CLOSE, IOO_OP_CLOSE_RANGE,
	IOO_OP_READ, IOO_OP_PREAD64, IOO_OP_READV, IOO_OP_PREADV, IOO_OP_PREADV2,
	IOO_OP_WRITE, IOO_OP_PWRITE64, IOO_OP_WRITEV, IOO_OP_PWRITEV, IOO_OP_PWRITEV2,
	IOO_OP_LSEEK,
	IOO_OP_FSYNC, IOO_OP_FDATASYNC, IOO_OP_SYNC_FILE_RANGE, IOO_OP_SYNCFS,
	IOO_OP_STAT, IOO_OP_LSTAT, IOO_OP_FSTAT, IOO_OP_NEWFSTATAT, IOO_OP_STATX,
	IOO_OP_ACCESS, IOO_OP_FACCESSAT, IOO_OP_FACCESSAT2,
	IOO_OP_UNLINK, IOO_OP_UNLINKAT,
	IOO_OP_RENAME, IOO_OP_RENAMEAT, IOO_OP_RENAMEAT2,
	IOO_OP_MKDIR, IOO_OP_MKDIRAT, IOO_OP_RMDIR,
	IOO_OP_GETDENTS64,
	IOO_OP_TRUNCATE, IOO_OP_FTRUNCATE, IOO_OP_FALLOCATE,
	IOO_OP_MMAP,
	IOO_OP_SENDFILE, IOO_OP_COPY_FILE_RANGE, IOO_OP_SPLICE,
	IOO_OP_DUP, IOO_OP_DUP2, IOO_OP_DUP3, IOO_OP_FCNTL,
	/* Block layer: a request on a block device, from issue to completion. */
	IOO_OP_BLOCK_READ, IOO_OP_BLOCK_WRITE, IOO_OP_BLOCK_FLUSH, IOO_OP_BLOCK_DISCARD, IOO_OP_BLOCK_OTHER,
	/* Page cache: pages a call brought in (a miss) or added (a write), and readahead. */
	IOO_OP_CACHE_MISS, IOO_OP_CACHE_ADD, IOO_OP_READAHEAD, IOO_OP_READAHEAD_ASYNC,
	/* libc stdio (uprobes), from its entry to its return. */
	IOO_OP_FOPEN, IOO_OP_FDOPEN, IOO_OP_FREOPEN, IOO_OP_FCLOSE,
	IOO_OP_FREAD, IOO_OP_FWRITE, IOO_OP_FGETS, IOO_OP_FPUTS,
	IOO_OP_FPRINTF, IOO_OP_VFPRINTF, IOO_OP_FSCANF, IOO_OP_VFSCANF,
	IOO_OP_FSEEK, IOO_OP_FSEEKO, IOO_OP_FTELL, IOO_OP_FTELLO, IOO_OP_REWIND,
	IOO_OP_FFLUSH, IOO_OP_SETVBUF,
	/* libc's POSIX wrappers (uprobes); the trace names them without the prefix. */
	IOO_OP_POSIX_OPEN, IOO_OP_POSIX_OPENAT, IOO_OP_POSIX_CREAT, IOO_OP_POSIX_CLOSE,
	IOO_OP_POSIX_READ, IOO_OP_POSIX_WRITE, IOO_OP_POSIX_PREAD, IOO_OP_POSIX_PWRITE,
	IOO_OP_POSIX_LSEEK, IOO_OP_POSIX_FSYNC, IOO_OP_POSIX_FDATASYNC,
	IOO_OP_POSIX_STAT, IOO_OP_POSIX_LSTAT, IOO_OP_POSIX_FSTAT, IOO_OP_POSIX_FSTATAT,
	/* The VFS (kprobes): the kernel's own file operations, below the syscalls. */
	IOO_OP_VFS_READ, IOO_OP_VFS_WRITE, IOO_OP_VFS_OPEN, IOO_OP_VFS_FSYNC,
	/* HDF5 (uprobes on libhdf5) */
	IOO_OP_H5FCREATE, IOO_OP_H5FOPEN, IOO_OP_H5FFLUSH, IOO_OP_H5FCLOSE,
	IOO_OP_H5DCREATE2, IOO_OP_H5DOPEN2, IOO_OP_H5DREAD, IOO_OP_H5DWRITE, IOO_OP_H5DCLOSE,
	IOO_OP_H5ACREATE2, IOO_OP_H5AOPEN, IOO_OP_H5AREAD, IOO_OP_H5AWRITE, IOO_OP_H5ACLOSE,
	IOO_OP_H5OOPEN, IOO_OP_H5ACREATE_BY_NAME, IOO_OP_H5AOPEN_BY_NAME, IOO_OP_H5IDEC_REF,
	/* MPI-IO (uprobes on the MPI library) */
	IOO_OP_MPI_FILE_OPEN, IOO_OP_MPI_FILE_CLOSE, IOO_OP_MPI_FILE_SET_VIEW, IOO_OP_MPI_FILE_SEEK, IOO_OP_MPI_FILE_SYNC,
	IOO_OP_MPI_FILE_READ, IOO_OP_MPI_FILE_WRITE, IOO_OP_MPI_FILE_READ_AT, IOO_OP_MPI_FILE_WRITE_AT,
	IOO_OP_MPI_FILE_READ_ALL, IOO_OP_MPI_FILE_WRITE_ALL, IOO_OP_MPI_FILE_READ_AT_ALL, IOO_OP_MPI_FILE_WRITE_AT_ALL,
	IOO_OP_MPI_FILE_READ_SHARED, IOO_OP_MPI_FILE_WRITE_SHARED, IOO_OP_MPI_FILE_READ_ORDERED, IOO_OP_MPI_FILE_WRITE_ORDERED,
	/* The Python interpreter (uprobes on libpython or the python binary) */
	IOO_OP_PY_IMPORT, IOO_OP_PY_OPEN,
	/* Syscalls of asynchronous I/O (the syscall layer): the requests they carry are the
	 * IO_URING and AIO layers' events, which name the call that submitted them as parent. */
	IOO_OP_IO_SETUP, IOO_OP_IO_DESTROY, IOO_OP_IO_SUBMIT, IOO_OP_IO_CANCEL, IOO_OP_IO_GETEVENTS,
	IOO_OP_IO_PGETEVENTS, IOO_OP_IO_URING_SETUP, IOO_OP_IO_URING_ENTER, IOO_OP_IO_URING_REGISTER,
	/* io_uring requests (tracepoints), from submission to completion; the trace names them
	 * without the prefix. */
	IOO_OP_URING_READ, IOO_OP_URING_WRITE, IOO_OP_URING_READV, IOO_OP_URING_WRITEV,
	IOO_OP_URING_READ_FIXED, IOO_OP_URING_WRITE_FIXED, IOO_OP_URING_READV_FIXED, IOO_OP_URING_WRITEV_FIXED,
	IOO_OP_URING_FSYNC, IOO_OP_URING_SYNC_FILE_RANGE, IOO_OP_URING_FALLOCATE, IOO_OP_URING_FTRUNCATE,
	IOO_OP_URING_OPENAT, IOO_OP_URING_OPENAT2, IOO_OP_URING_CLOSE, IOO_OP_URING_STATX,
	IOO_OP_URING_RENAMEAT, IOO_OP_URING_UNLINKAT, IOO_OP_URING_MKDIRAT,
	/* Linux AIO requests (the iocbs of io_submit), from submission to the io_getevents that
	 * reaped them; the trace names them without the prefix. */
	IOO_OP_AIO_PREAD, IOO_OP_AIO_PWRITE, IOO_OP_AIO_FSYNC, IOO_OP_AIO_FDSYNC, IOO_OP_AIO_PREADV, IOO_OP_AIO_PWRITEV,
	/* More of the VFS: what it does that no read or write syscall carries (exec's reads, the
	 * copies of sendfile, copy_file_range and splice, each with an output side). */
	IOO_OP_VFS_KERNEL_READ, IOO_OP_VFS_COPY_FILE_RANGE, IOO_OP_VFS_SPLICE_DIRECT, IOO_OP_VFS_SPLICE,
	/* The network layer: the syscalls on an Internet socket (read and write named apart
	 * from the file ones by the prefix, which the trace drops). Reads and writes alternate,
	 * here and in the TLS layer: net_head and call_return tell them apart by that. */
	IOO_OP_NET_READ, IOO_OP_NET_WRITE, IOO_OP_NET_READV, IOO_OP_NET_WRITEV,
	IOO_OP_RECVFROM, IOO_OP_SENDTO, IOO_OP_RECVMSG, IOO_OP_SENDMSG,
	IOO_OP_CONNECT, IOO_OP_ACCEPT, IOO_OP_ACCEPT4,
	/* The TLS layer (uprobes on libssl): plaintext bytes, and which socket an SSL is on. */
	IOO_OP_SSL_READ, IOO_OP_SSL_WRITE, IOO_OP_SSL_READ_EX, IOO_OP_SSL_WRITE_EX, IOO_OP_SSL_SET_FD,
	IOO_OP_COUNT
};

/* How the probes treat a syscall: bits of ioo_syscall_spec.flags. */
#define IOO_S_RET_FD      0x0001 /* the return value is a new fd naming the file (open family) */
#define IOO_S_IOV         0x0002 /* count_arg is an iovcnt; the iovec array is the argument before it */
#define IOO_S_STATBUF     0x0004 /* buf_arg points to a struct stat filled on success */
#define IOO_S_STATX       0x0008 /* buf_arg points to a struct statx filled on success */
#define IOO_S_OFFSET_PTR  0x0010 /* offset_arg is a loff_t pointer (NULL: file position) */
#define IOO_S_MMAP        0x0020 /* only file-backed mappings (aux_arg holds the mmap flags) */
#define IOO_S_FCNTL_DUP   0x0040 /* only F_DUPFD / F_DUPFD_CLOEXEC (aux_arg holds the cmd) */
#define IOO_S_EMPTY_PATH  0x0080 /* "" with AT_EMPTY_PATH names the dirfd itself */
#define IOO_S_PAIR        0x0100 /* fd2_arg names a second file (sendfile, copy_file_range, splice) */
#define IOO_S_OFFSET_NEG  0x0200 /* an explicit offset of -1 means the file position (preadv2) */
#define IOO_S_HOW_FLAGS   0x0400 /* aux_arg points to struct open_how; its first u64 is the flags */
#define IOO_S_FILE_POS    0x0800 /* without an explicit offset, record the file position */
#define IOO_S_MSGHDR      0x1000 /* count_arg points to a struct user_msghdr: bytes are its iovecs' */
#define IOO_S_PEER_AT_EXIT 0x2000 /* the socket's peer is set by the call (connect): described at its exit */

/* One entry per syscall number in the `syscall_specs` array map; op 0 = not traced. */
struct ioo_syscall_spec {
	__u16 op;
	__u16 flags;
	__s16 fd_arg;      /* argument index, -1 for none */
	__s16 path_arg;
	__s16 dirfd_arg;   /* -1: relative paths are relative to the cwd */
	__s16 count_arg;
	__s16 offset_arg;
	__s16 aux_arg;     /* copied into ioo_event.arg */
	__s16 buf_arg;
	__s16 fd2_arg;
	__s16 path2_arg;
	__s16 dirfd2_arg;
	__u16 net_op;      /* the op when the descriptor is an Internet socket (net layer on); 0: not traced then */
};

/* How the library-layer probes read a call (ioobserve/probes/maps/call_table.py): one entry per
 * library op code in the `call_specs` array map. Argument indexes are C ones, -1 for none. */
#define IOO_C_RET_STREAM 0x1  /* returns a FILE * naming the file (fopen family) */
#define IOO_C_RET_FD     0x2  /* returns a new descriptor naming the file (open family) */
#define IOO_C_RET_ITEMS  0x4  /* returns items: bytes moved = ret x size_arg (fread, fwrite) */
/* Library handles (HDF5 hid_t, MPI_File) name no descriptor: the file a handle was opened
 * on is remembered and given to every call made with it. */
#define IOO_C_RET_HANDLE   0x8   /* returns a new handle on the call's file (H5Fopen, H5Dopen2) */
#define IOO_C_OUT_HANDLE   0x10  /* stores a new handle through the pointer at handle_arg (MPI_File_open) */
#define IOO_C_HANDLE_PTR   0x20  /* handle_arg points to the handle (MPI_File_close) */
#define IOO_C_CLOSE_HANDLE 0x40  /* the handle is gone once the call returns 0 (H5Idec_ref: no
				  * reference left; the others: success) */
#define IOO_C_MPI_TYPE     0x80  /* size_arg is an MPI datatype: bytes = count x its size when an
				  * MPICH builtin type (whose handle encodes its size) */
#define IOO_C_KNOWN_HANDLE 0x100 /* recorded only on a handle opened on a traced file (H5Idec_ref
				  * is I/O only when it closes a file, dataset or attribute) */
#define IOO_C_RET_INT      0x200 /* returns a C int: the register's upper half is not part of it */
#define IOO_C_NESTS        0x400 /* recorded inside an open call of its own library too (an import
				  * made while importing) */
#define IOO_C_NEEDS_IO     0x800 /* recorded only if a call below it touched a traced file (most
				  * imports find the module already loaded) */
#define IOO_C_PY_NAME      0x1000 /* arg 0 is a Python str: its text follows in a name record
				   * (index IOO_NAME_LABEL) */
#define IOO_C_RET_OBJECT   0x2000 /* returns a Python object: ret becomes 1, or 0 if it raised */
#define IOO_C_BIND_HANDLE  0x4000 /* on success (1) the handle names the file of fd_arg from now on (SSL_set_fd) */
#define IOO_C_OUT_BYTES    0x8000 /* on success (1) ret becomes the size_t aux_arg points to (SSL_read_ex) */

enum ioo_library { IOO_LIB_LIBC = 1, IOO_LIB_HDF5 = 2, IOO_LIB_MPIIO = 3, IOO_LIB_PYTHON = 4, IOO_LIB_SSL = 5 };

/* A uprobe_multi entry link's cookie: the op, and where in a call the probe sits. Every
 * probe is at a function's entry (its return: the return link), but for imports, probed
 * where CPython loads a module it has not imported yet (ioobserve/python/import_sites.py):
 * at the call of importlib's _find_and_load (IOO_COOKIE_FIND_AND_LOAD) and at the
 * instruction after it, where that call has returned (IOO_COOKIE_RETURN). */
#define IOO_COOKIE_OP            0xffff
#define IOO_COOKIE_FIND_AND_LOAD 0x10000
#define IOO_COOKIE_RETURN        0x20000

struct ioo_call_spec {
	__u16 library;     /* enum ioo_library: a call inside an open call of its own library is
			    * that library's internal business, not the application's */
	__u16 flags;       /* IOO_C_* */
	__s16 stream_arg;  /* FILE * argument: the descriptor is its _fileno */
	__s16 fd_arg;
	__s16 count_arg;   /* bytes asked for (times size_arg if set) */
	__s16 size_arg;
	__s16 offset_arg;
	__s16 aux_arg;     /* copied into ioo_event.arg (whence, flags) */
	__s16 stat_arg;    /* struct stat * filled on success: the file's identity */
	__s16 handle_arg;  /* the library handle the call works on (IOO_C_*HANDLE*) */
};

/* How the IO_URING layer reads a request (ioobserve/probes/maps/async_table.py): one entry per
 * io_uring opcode in the `uring_specs` array map; op 0 = not traced. */
#define IOO_U_RW     0x1  /* struct io_rw: offset, buffer address and length */
#define IOO_U_VEC    0x2  /* ... the length is a count of iovecs at that address */
#define IOO_U_SYNC   0x4  /* struct io_sync: offset and length (fsync, sync_file_range, fallocate) */
#define IOO_U_RET_FD 0x8  /* the result is a new descriptor naming the file (openat) */
#define IOO_U_FD     0x10 /* the request's descriptor names its file, resolved at submission (close) */
#define IOO_URING_OPS 256
#define IOO_RING_UNKNOWN 0xffffffffffffffffULL
struct ioo_uring_spec {
	__u16 op;
	__u16 how;  /* IOO_U_* */
};

/* The AIO layer: the op of each IOCB_CMD_* (the `aio_ops` array map; 0 = not traced). */
#define IOO_AIO_CMDS 16

/* Global switches written once by user space before the probes attach. */
struct ioo_config {
	__u32 self_tgid;      /* ioobserve itself: never traced */
	__u32 filter_pid;     /* only tgids in `traced_tgids` (grown at fork) */
	__u32 filter_cgroup;  /* only tasks whose cgroup or an ancestor is in `cgroups` */
	__u32 filter_comm;    /* only tasks whose comm is in `comms` */
	__u32 filter_path;    /* only files under `prefix_dirs` / `prefixes` */
	__u32 layers;         /* IOO_LAYER_* bits of the optional layers switched on */
	__u32 emit_some;      /* with IOO_AGGREGATE: events leave the kernel only for tasks whose cgroup
			       * or an ancestor is in `emit_cgroups`; every call is still aggregated */
	__u32 emit_gen;       /* bumped at each change of `emit_cgroups`: older cached verdicts are stale */
	__u32 emit_count;     /* entries in `emit_cgroups`: none, no walk */
	__u32 stopped;        /* the recording is ending: no process is selected any more */
	__u32 select_gen;     /* bumped at each change of the process filters' tables: a thread's
			       * verdict kept under another generation is decided again */
	__u32 flood_limit;    /* events a second one cgroup may send out of the kernel (0: no limit);
			       * past it they are counted in `flood_states` instead */
};

/* Bits of ioo_config.layers. */
/* 0x1 is free: a syscall finds its parent call by its thread's count of open calls */
#define IOO_LAYER_LIBS    0x2 /* report the first executable mapping of each file (IOO_AUX_LIB) */
#define IOO_LAYER_PYTHON  0x4 /* walk the Python stack of processes in `py_procs` on each traced syscall */
#define IOO_LAYER_AIO     0x8 /* the iocbs of io_submit and their completions (aio.bpf.c) */
#define IOO_LAYER_NET     0x10 /* syscalls on Internet sockets (the spec table's net_op rows) */

/* Bits of ioo_event.flags. */
#define IOO_F_FILE      0x0001 /* dev and ino name the file */
#define IOO_F_NAME      0x0002 /* a name record (same tid and ts) carries the user's path */
#define IOO_F_NAME2     0x0004 /* ... and a second one (rename targets) */
#define IOO_F_PAIR_OUT  0x0008 /* the output side of a two-file op (sendfile, copy_file_range) */
#define IOO_F_REPEAT    0x0020 /* second record of one call: count the call once, not twice */
#define IOO_F_POS       0x0010 /* offset is the file position, not an explicit argument */
#define IOO_F_BLOCK     0x0040 /* dev names a block device (block layer events) */
#define IOO_F_ASYNC     0x0080 /* not caused by a traced call in flight (writeback, a kernel thread) */
#define IOO_F_WRITEBACK 0x0100 /* a block write the kernel's flusher issued for dirty pages */
#define IOO_F_PARENT    0x0200 /* another event names this one as its parent (its parent_ts is our ts_ns) */
#define IOO_F_FIXED     0x0400 /* an io_uring request's fd is an index into its ring's registered files */
#define IOO_F_HEAD      0x1000 /* a head record (the HTTP request the bytes written begin) follows it */
#define IOO_F_TLS_HELLO 0x2000 /* the bytes written begin a TLS handshake: the process does TLS itself */
#define IOO_F_ANSWER    0x4000 /* a head record (the HTTP answer the bytes read begin) follows it */
#define IOO_F_SQPOLL    0x0800 /* an io_uring request the ring's SQPOLL thread submitted (pid, tid and
				* comm are the ring's owner's) */

/* The hot record: one per traced call (syscall or library function), block request or page
 * cache change, fixed size so a batch decodes in one frombuffer. */
struct ioo_event {
	__u64 ts_ns;       /* CLOCK_MONOTONIC at the call's entry (block: at issue) */
	__u64 dur_ns;
	__s64 ret;         /* return value; negative errno on failure */
	__u64 bytes_req;   /* bytes asked for (count, iovec sum, length) */
	__s64 offset;      /* explicit offset or the file position before the call; -1 if none */
	__u64 ino;
	__u64 cgroup_id;   /* cgroup v2 id of the task */
	__u64 arg;         /* op-specific: open flags, whence, mode, new fd, other fd; block: ns queued;
			    * readahead: pages asked for; io_uring: the ring's fd (IOO_RING_UNKNOWN: not
			    * known); AIO: the context's id (io_setup's) */
	__u64 parent_ts;   /* ts_ns of the event of the same thread this one happened inside (the
			    * enclosing call one layer up); 0 if none */
	__u32 dev;         /* kernel dev_t: major << 20 | minor */
	__s32 fd;
	__u32 pid;         /* tgid: the process */
	__u32 tid;         /* the thread */
	__u32 uid;
	__u16 op;
	__u16 flags;
	char comm[IOO_COMM_LEN];
	__u64 py_chain;    /* the Python frames the call was made from: low IOO_PY_SAME_SHIFT bits the id of
			    * an IOO_AUX_PY_CHAIN record, top bits how many of them, outermost first,
			    * are the same calls as in the thread's previous event with a stack; 0 if none */
};

/* Kernel aggregation (built with IOO_AGGREGATE, for `serve`): per cgroup, user, operation and
 * device, the calls' counts and sums, and log2 histograms of their latency and size. */
struct ioo_agg_key {
	__u64 cgroup_id;
	__u32 uid;
	__u32 dev;         /* kernel dev_t of the file; 0: no file */
	__u16 op;
	__u16 out;         /* the output side of a two-file op (sendfile, copy_file_range): 1 its only
			    * record, 2 a second record of a call counted on its input side */
	__u32 pad;
};

#define IOO_AGG_LATENCY 0  /* histogram kind: log2 of the duration in ns */
#define IOO_AGG_SIZE    1  /* ... log2 of the bytes asked for */
#define IOO_AGG_SLOTS   40 /* value v is in slot ceil(log2(v)), the smallest k with v <= 2^k (v <= 1: 0);
			    * the last slot also holds all beyond it (2^39 ns is 9 min) */

/* The histograms sit in the value: one table lookup per call. */
struct ioo_agg_value {
	__u64 calls;
	__u64 errors;      /* returned -1..-4095 */
	__u64 ret_sum;     /* sum of non-negative returns: bytes moved for data ops */
	__u64 req_sum;     /* sum of the bytes asked for */
	__u64 time_ns;
	__u64 latency[IOO_AGG_SLOTS];
	__u64 size[IOO_AGG_SLOTS];  /* only calls that asked for bytes */
};

/* Records on the auxiliary ring: variable size, low rate, each starting with this. */
enum ioo_aux_kind { IOO_AUX_PATH = 1, IOO_AUX_NAME = 2, IOO_AUX_PROC = 3, IOO_AUX_ENV = 4, IOO_AUX_LIB = 5,
		   IOO_AUX_PY_CHAIN = 6, IOO_AUX_PY_CODE = 7, IOO_AUX_CGROUP = 8, IOO_AUX_HEAD = 9 };
#define IOO_AUX_KINDS 10      /* loss counters kept per auxiliary record kind */

struct ioo_aux_header {
	__u32 kind;
	__u32 size;        /* bytes of the whole record */
};

/* A file's absolute path, sent once per (dev, ino): components leaf first, NUL-separated.
 * For a socket (mode S_IFSOCK, the net layer) data is instead a struct ioo_sock_desc, sent
 * again when its peer changes (a connect). */
#define IOO_PATH_TRUNCATED 0x1 /* deeper than the walk goes: the root part is missing */
struct ioo_path_record {
	struct ioo_aux_header hdr;
	__u64 ino;
	__u32 dev;
	__u16 mode;        /* i_mode: file type and permissions */
	__u16 flags;
	__u32 len;         /* bytes used in data */
	__u32 depth;       /* components */
	char data[IOO_PATH_BYTES];
};

/* An Internet socket's ends, as a path record's data; ports in host order, addresses as
 * on the wire (IPv4 in the first 4 bytes). */
struct ioo_sock_desc {
	__u16 family;      /* AF_INET or AF_INET6 */
	__u16 type;        /* SOCK_STREAM, SOCK_DGRAM, ... */
	__u16 local_port;
	__u16 peer_port;   /* 0: not connected */
	__u8 local_addr[16];
	__u8 peer_addr[16];
};

/* serve's name for a socket's service end, the end with the lower port (the peer of a socket
 * that connected, the own end of one a server accepted or of one not connected): the socket
 * calls' aggregates are keyed by its hash in place of a device (endpoint_names). */
struct ioo_endpoint {
	__u16 family;      /* AF_INET or AF_INET6 */
	__u16 type;        /* SOCK_STREAM, SOCK_DGRAM, ... */
	__u16 port;
	__u16 pad;
	__u8 addr[16];     /* as on the wire; IPv4 in the first 4 bytes */
};

/* The first bytes of an HTTP request a program wrote to a socket or a TLS connection, or of
 * an HTTP answer it read there, joined to the call's event by (tid, ts): the request or status
 * line and headers, never more of a payload. Whose and on which connection they are come with
 * them, for serve, whose aggregation lets no event out of the kernel. */
#define IOO_HEAD_BYTES 1024
struct ioo_head_record {
	struct ioo_aux_header hdr;
	__u64 ts_ns;
	__u32 tid;
	__u32 len;         /* bytes used in data */
	__u64 cgroup_id;
	__u64 conn;        /* the connection: the socket's inode, or the SSL's address (TLS layer) */
	__u32 pid;
	__u32 pad;
	char data[IOO_HEAD_BYTES];
};

/* A path argument as the program passed it, joined to its event by (tid, ts). */
struct ioo_name_record {
	struct ioo_aux_header hdr;
	__u64 ts_ns;
	__u64 base_ino;    /* directory a relative path starts from (dirfd or cwd) */
	__u32 base_dev;
	__u32 tid;
	__u16 index;       /* 0: the path, 1: the second path of rename, IOO_NAME_LABEL: a label */
	__u16 len;
	char data[IOO_NAME_LEN];
};

/* Process lifecycle, from the sched tracepoints. */
enum ioo_proc_kind { IOO_PROC_FORK = 1, IOO_PROC_EXEC = 2, IOO_PROC_EXIT = 3 };
struct ioo_proc_record {
	struct ioo_aux_header hdr;
	__u64 ts_ns;
	__u64 cgroup_id;
	__u32 proc_kind;
	__u32 pid;         /* tgid of the subject (the child for fork) */
	__u32 tid;
	__u32 ppid;        /* fork: the parent's tgid */
	__u32 ptid;        /* fork: the parent's thread */
	__u32 uid;
	__s32 exit_code;
	__u32 len;         /* exec: bytes of data (filename NUL argv NUL-separated) */
	__u64 exe_ino;     /* exec: the program's file (0 otherwise), as the kernel names it */
	__u32 exe_dev;
	__u32 pad;
	char comm[IOO_COMM_LEN];
	char data[IOO_EXEC_BYTES];
};

/* The environment a program was exec'd with (NUL-separated NAME=value strings), sent right
 * after its exec record: user space reads the job, rank and launcher variables from it. */
#define IOO_ENV_TRUNCATED 0x1 /* longer than IOO_ENV_BYTES - 1: the rest is missing */
struct ioo_env_record {
	struct ioo_aux_header hdr;
	__u64 ts_ns;
	__u32 pid;
	__u32 len;         /* bytes used in data */
	__u32 flags;
	__u32 pad;
	char data[IOO_ENV_BYTES];
};

/* A cgroup made on the default (v2) hierarchy: its id (what events carry) and its path from
 * the hierarchy's root, sent as it is made, so that a cgroup gone before user space could
 * look (a short-lived container's) is still named. */
#define IOO_CGROUP_PATH_BYTES 512
struct ioo_cgroup_record {
	struct ioo_aux_header hdr;
	__u64 ts_ns;
	__u64 id;
	__u32 len;         /* bytes used in data */
	__u32 flags;       /* IOO_PATH_TRUNCATED: the path was longer than data holds */
	char data[IOO_CGROUP_PATH_BYTES];  /* the path, from the hierarchy's root: /a/b */
};

/* A file a selected process mapped executable for the first time (a shared library): user
 * space attaches the library layers' uprobes to it. Its path comes as an IOO_AUX_PATH. */
struct ioo_lib_record {
	struct ioo_aux_header hdr;
	__u64 ts_ns;
	__u64 ino;
	__u32 dev;
	__u32 pid;
};

/* The Python layer (ioobserve/python/): how to read one CPython version's structures from
 * outside, given per process by user space; the field offsets come from CPython's headers
 * (3.10-3.12) or from the interpreter's own _Py_DebugOffsets (3.13+). */
#define IOO_PY_LAYOUTS 64
#define IOO_PY_MAX_FRAMES 32
#define IOO_PY_SAME_SHIFT 56                            /* see ioo_event.py_chain */
#define IOO_PY_CHAIN_MASK ((1ULL << IOO_PY_SAME_SHIFT) - 1)
#define IOO_PY_NO_FIELD 0xffffffff
#define IOO_PY_LASTI 0x1         /* frame_instr is an int index of code units (3.10), not a pointer */
#define IOO_PY_PTHREAD_ID 0x2    /* tstate_native_id is thread_id, pthread_self() (3.10) */
#define IOO_PY_FREE_THREADED 0x4 /* a free-threaded build (--disable-gil); user space's to know */
#define IOO_PY_NAME_BYTES 128     /* bytes of a qualified name kept */
#define IOO_PY_FILE_BYTES 256     /* bytes of a file name kept */
#define IOO_PY_TABLE_BYTES 2048   /* bytes of a line table kept */
struct ioo_py_layout {
	__u32 runtime_interpreters;  /* _PyRuntimeState.interpreters.head */
	__u32 interp_next;
	__u32 interp_threads;        /* PyInterpreterState's first thread state */
	__u32 tstate_next;
	__u32 tstate_native_id;      /* native_thread_id: the thread's id in its pid namespace
				      * (3.10: thread_id, see IOO_PY_PTHREAD_ID) */
	__u32 tstate_frame;          /* the current frame, or the _PyCFrame holding it */
	__u32 cframe_frame;          /* _PyCFrame.current_frame (3.11, 3.12); IOO_PY_NO_FIELD: none */
	__u32 frame_previous;
	__u32 frame_code;
	__u32 frame_instr;
	__u32 frame_owner;           /* IOO_PY_NO_FIELD: frames have no owner (3.10) */
	__u32 frame_localsplus;
	__u32 owner_shim;            /* owners from this value up: frames with no code of their own,
				      * skipped (C-stack shims); IOO_PY_NO_FIELD: none */
	__u32 code_argcount;
	__u32 code_firstlineno;
	__u32 code_qualname;         /* co_qualname (co_name where there is none) */
	__u32 code_filename;
	__u32 code_linetable;
	__u32 code_adaptive;         /* the first code unit (3.11+): instruction pointers count from it */
	__u32 code_tlbc;             /* co_tlbc, the thread-local copies of the bytecode (free-threaded
				      * 3.14+); IOO_PY_NO_FIELD: none */
	__u32 frame_tlbc_index;      /* the copy a frame runs (index into co_tlbc's entries) */
	__u32 unicode_length;
	__u32 unicode_state;
	__u32 unicode_ascii_data;    /* sizeof(PyASCIIObject): an ASCII string's characters */
	__u32 unicode_compact_data;  /* sizeof(PyCompactUnicodeObject): other compact strings' */
	__u32 unicode_ascii_mask;    /* bits of the state word */
	__u32 unicode_kind_mask;
	__u32 unicode_kind_shift;
	__u32 bytes_size;
	__u32 bytes_data;
	__u32 flags;                 /* IOO_PY_* */
	__u32 version;               /* major << 8 | minor */
};

/* A process running CPython: where its runtime state is and how to read it. */
struct ioo_py_proc {
	__u64 runtime;     /* address of _PyRuntime */
	__u32 layout;      /* index into py_layouts */
	__u32 depth;       /* frames walked, at most IOO_PY_MAX_FRAMES */
	__u32 sample;      /* walk one traced call in `sample` per thread (1: every one) */
	__u32 flags;       /* IOO_PY_PROC_* */
};
/* Bits of ioo_py_proc.flags. */
#define IOO_PY_PROC_WALK_IMPORTS 0x1  /* walk calls made inside an import too (the import event
				       * names their module: the walk adds only importlib's frames) */

/* A file holding a CPython runtime that user space has read once (py_images, keyed by
 * inode): the kernel then places the runtime itself when a process execs the file or maps
 * its text, so the process's first calls already have stacks. */
struct ioo_py_image {
	struct ioo_py_proc proc;        /* runtime: unused (it differs per process) */
	__u64 text_offset;              /* file offset of the text segment's mapping (page-aligned) */
	__s64 runtime_from_text_map;    /* _PyRuntime minus the address that mapping starts at */
	__s64 runtime_from_start_code;  /* _PyRuntime minus mm->start_code (the text's first byte) */
};

/* One frame of a Python stack, innermost first. */
struct ioo_py_frame {
	__u64 code;        /* the code object's address */
	__u64 instance;    /* this call of it: its frame's address and first arguments, hashed */
	__u32 instr;       /* code units from the code's start to the instruction being run */
	__u32 pad;
};

/* A thread's Python frames, sent the first time this chain (by its hash) is seen. */
#define IOO_PY_TRUNCATED 0x1 /* the stack goes deeper than the frames walked */
struct ioo_py_chain_record {
	struct ioo_aux_header hdr;
	__u64 chain;
	__u32 pid;
	__u32 depth;
	__u32 flags;
	__u32 pad;
	struct ioo_py_frame frames[IOO_PY_MAX_FRAMES];
};

/* A code object, sent once per process the first time one of its frames is seen: enough to
 * name it and number its lines after the process has gone. Strings are CPython's raw
 * characters, `kind` bytes each (1 Latin-1, 2 UCS-2, 4 UCS-4). */
struct ioo_py_code_record {
	struct ioo_aux_header hdr;
	__u64 code;
	__u32 pid;
	__s32 firstlineno;
	__u32 name_len;    /* bytes kept in name */
	__u32 file_len;
	__u32 table_len;   /* bytes kept in table */
	__u32 table_size;  /* bytes the line table has */
	__u8 name_kind;
	__u8 file_kind;
	__u16 version;     /* the interpreter's: major << 8 | minor (line tables differ) */
	__u32 pad;
	char name[IOO_PY_NAME_BYTES];
	char file[IOO_PY_FILE_BYTES];
	char table[IOO_PY_TABLE_BYTES];
};

/* Keys of the in-kernel tables user space fills. */
struct ioo_file_key {
	__u64 ino;
	__u32 dev;
	__u32 pad;
};

#endif /* IOOBSERVE_COMMON_H */
