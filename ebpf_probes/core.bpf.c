/* Core (compiled first): what every layer shares. The maps of process selection, file
 * verdicts and the rings; the inflight record a syscall keeps from sys_enter to sys_exit and
 * the library-call frames; count_lost, get_config, and process selection (process_selected,
 * kept per thread by selected_inflight).
 *
 * The probes are one compilation unit, these files joined in the order of
 * ioobserve/probes/load/loader.py's SOURCES (bcc rewrites map calls only in its main file), so a
 * file uses what the files before it define. Which syscalls and calls are traced and how
 * their arguments are read comes from maps (`syscall_specs`, `call_specs`), and so do the
 * filters: nothing a user types ever becomes C text. Build-time knobs arrive as -D flags:
 * EVENTS_PAGES, AUX_PAGES, KNOWN_FILES, the OFF_* struct offsets, IOO_AGGREGATE.
 */
#include <uapi/linux/ptrace.h>  /* struct pt_regs of uprobes: a user ABI, the same on every kernel */
#include "common.h"
#include "kernel_access.h"

#define SPEC_ENTRIES 512
#define MAX_PATH_DEPTH 48
#define MAX_CGROUP_LEVELS 16
#define MAX_IOV 8
#define AT_FDCWD_ -100
#define AT_EMPTY_PATH_ 0x1000
#define MAP_ANONYMOUS_ 0x20
#define F_DUPFD_ 0
#define F_DUPFD_CLOEXEC_ 1030
#define PROT_EXEC_ 0x4
#define MMAP_PROT_ARG 2
#define MMAP_OFFSET_ARG 5
#define MAX_ERRNO_ 4095
#define LOST_AUX_BASE IOO_MAX_OPS
#define LOST_BLOCK_NO_ORIGIN (IOO_MAX_OPS + IOO_AUX_KINDS)  /* block requests issued with no submitter known */
#define LOST_THROTTLED (IOO_MAX_OPS + IOO_AUX_KINDS + 1)    /* events a cgroup's flood limit kept in the kernel */

/* known_files values: what was decided for a file, and of which generation of its inode
 * (a new file with a reused inode number is walked and named again) */
#define KNOWN_ADMITTED 0x1
#define KNOWN_EMITTED 0x2
struct known_file {
	u32 gen;
	u8 known;  /* KNOWN_* */
	u32 endpoint;  /* a socket's: its service end's hash in endpoint_names (serve); 0 for a file */
};

struct prefix_key {
	char path[IOO_PREFIX_LEN];
};

struct comm_key {
	char comm[IOO_COMM_LEN];
};

/* A thread's record of its traced syscall in flight: what sys_enter saw, kept in task
 * storage until sys_exit; and what stays true of the thread between calls. */
struct inflight {
	u64 ts;
	u64 parent_ts;    /* the library call this syscall happened inside */
	u64 cache_ts;     /* page cache: first page added during the call */
	u64 cache_ino;    /* ... to this file */
	u64 cache_index;  /* ... at this page index */
	u64 py_chain;     /* the Python frames it was made from (python_stacks.bpf.c) */
	u32 cache_dev;
	u32 cache_pages;  /* pages added to the page cache during the call */
	u64 args[6];
	u64 bytes_req;
	s64 pos;
	s64 pos2;
	struct file_ident file;
	struct file_ident file2;
	s32 fd;    /* the descriptor the call used (the dirfd for "" + AT_EMPTY_PATH) */
	u32 nr;
	u16 op;
	u16 have;  /* HAVE_* */
	u32 py_text;  /* an mmap of an interpreter's text: 1 + its py_images index (0: none) */
	u32 aio_next;   /* io_submit, io_getevents: the next iocb or completion to read ... */
	u32 aio_count;  /* ... of this many (the call's return) */
	u32 agg_dev_xor;  /* serve: the socket's device ^ its service end's hash (aggregate_by_endpoint) */
	/* Between calls: */
	u32 calls_open;     /* library calls open on the thread (call_frames' depth) */
	u32 selected;       /* process_selected(), decided ... */
	u32 select_gen;     /* ... under these filters (ioo_config.select_gen; 0: never) */
	u32 select_tgid;    /* ... for this process */
	u64 select_cgroup;  /* ... in this cgroup (with a cgroup filter) */
};
#define HAVE_FILE 0x1
#define HAVE_FILE2 0x2
#define HAVE_POS 0x4
#define HAVE_NO_NAME 0x8  /* the path argument is "" naming the fd: nothing to send */
#define HAVE_CHILD 0x10   /* an event of a layer below names this call as its parent */
#define HAVE_SOCKET 0x20  /* the file is an Internet socket (the net layer): op is the spec's net_op */
#define HAVE_IN_IMPORT 0x40  /* made inside an import the Python layer recorded: its parent names the module */
#define HAVE_HELD 0x80    /* its events stay in the kernel (event_let_out said no at its entry) */

/* A thread's Python calls (python_stacks.bpf.c walks them): the call instances of the walk
 * made for the syscall in flight, and those of the last event sent with a stack. An event
 * says how many levels, outermost first, it shares with that last one: user space builds
 * the calls' spans from it (ioobserve/python/spans.py). Kept apart from `inflight`: most
 * threads never need it. */
struct py_calls {
	u64 ts;                         /* the syscall the walk was made for */
	u64 last_chain;                 /* the last chain walked that was sent before (none: 0) */
	u32 depth;                      /* frames walked for it */
	u32 sent_depth;                 /* frames of the last event sent with a stack */
	u64 walked[IOO_PY_MAX_FRAMES];  /* the walk's call instances, innermost first */
	u64 sent[IOO_PY_MAX_FRAMES];    /* the last sent event's, outermost first */
};
BPF_TASK_STORAGE(py_calls, struct py_calls);

/* An index into a frame array, masked in asm: clang turns a loop's masked index into a
 * pointer it bumps, which the verifier cannot bound. */
_Static_assert(IOO_PY_MAX_FRAMES == 32, "py_slot masks with IOO_PY_MAX_FRAMES - 1");
static __always_inline u64 py_slot(u64 index)
{
	asm volatile("%0 &= 31" : "+r"(index));  /* IOO_PY_MAX_FRAMES - 1 */
	return index;
}

/* Levels, outermost first, whose calls the walk for `ts` shares with the last event sent. */
static __always_inline u32 py_same_calls(struct py_calls *calls)
{
	u32 depth = calls->depth;
	u32 same = 0;
	for (u32 level = 0; level < IOO_PY_MAX_FRAMES; level++) {
		LOOP_INDEX(level);
		if (level >= depth || level >= calls->sent_depth)
			break;
		if (calls->sent[py_slot(level)] != calls->walked[py_slot(depth - 1 - level)])
			break;
		same++;
	}
	return same;
}

/* The walk's calls become the last sent (only once its event is in the ring: a call filtered
 * out or lost must not be what the next one is compared with). */
static __always_inline void py_sent_calls(struct py_calls *calls)
{
	u32 depth = calls->depth;
	if (!depth)
		return;  /* a cut walk: the next event is compared with the last whole one */
	for (u32 level = 0; level < IOO_PY_MAX_FRAMES; level++) {
		LOOP_INDEX(level);
		if (level >= depth)
			break;
		calls->sent[py_slot(level)] = calls->walked[py_slot(depth - 1 - level)];
	}
	calls->sent_depth = depth;
}

/* A traced-or-not verdict per open file (keyed by its address). */
struct file_verdict {
	u64 inode;
	u64 ino;
	u32 dev;
	u16 mode;
	u8 traced;
	u8 pad;
};

/* event_wanted's answer for one cgroup, as of emit_gen `gen`. */
struct emit_verdict {
	u32 gen;
	u32 wanted;
};

struct walk_req {
	void *vfsmnt;
	void *dentry;
	struct file_ident id;
	u32 gen;  /* the inode's i_generation: an inode number used again (file deleted, another created) is another file */
	u32 force;  /* emit the path even if the path filter rejects it (base directories) */
};

/* Library calls open on a thread (uprobe entered, uretprobe not yet), innermost last. */
#define MAX_FRAMES 8
#define CALL_ARGS 8  /* six register arguments kept; a power of two for the index mask */
struct call_frame {
	u64 ts;
	u64 sp;         /* stack pointer at entry: matches the frame to its return */
	u64 args[CALL_ARGS];
	u64 parent_ts;  /* the enclosing call one layer up, if any */
	u64 file;       /* struct file * the call's descriptor named at entry */
	u64 handle;     /* the library handle it works on (hid_t, MPI_File), read at entry */
	u64 child_ino;  /* the first traced file a call below it touched (0: none yet) */
	u32 child_dev;
	s32 fd;
	u16 op;
	u16 library;
	u32 parent;     /* an event of a layer below names this call as its parent */
};

/* The file each open library handle was opened on, per process and library. */
struct handle_key {
	u64 handle;
	u32 tgid;
	u32 library;
};

struct call_frames {
	u32 depth;
	u32 pad;
	struct call_frame frames[MAX_FRAMES];
};

/* frames[depth - 1]. The mask is applied in asm: clang would drop a C one it can prove
 * redundant, and the verifier, which cannot, then refuses the access. */
static __always_inline struct call_frame *frame_at(struct call_frames *fr, u32 depth)
{
	u64 index = depth - 1;
	asm volatile("%0 &= 7" : "+r"(index));  /* MAX_FRAMES - 1 */
	return &fr->frames[index];
}

BPF_ARRAY(config, struct ioo_config, 1);
BPF_ARRAY(syscall_specs, struct ioo_syscall_spec, SPEC_ENTRIES);
BPF_TASK_STORAGE(inflight, struct inflight);
BPF_TASK_STORAGE(call_frames, struct call_frames);
BPF_ARRAY(call_specs, struct ioo_call_spec, IOO_MAX_OPS);
BPF_TABLE("lru_hash", struct ioo_file_key, u8, libraries, 4096);  /* executable files reported */
BPF_TABLE("lru_hash", struct handle_key, struct file_ident, handles, 65536);
BPF_HASH(traced_tgids, u32, u8, 65536);
BPF_HASH(own_tgids, u32, u8, 256);  /* ioobserve's helper processes (capture, disk writers) */
BPF_HASH(py_procs, u32, struct ioo_py_proc, 16384);  /* processes running CPython (python_stacks.bpf.c) */
BPF_HASH(py_image_files, struct ioo_file_key, u32, 4096);  /* files holding a CPython runtime (an overlay each root) ... */
BPF_ARRAY(py_images, struct ioo_py_image, IOO_PY_LAYOUTS);           /* ... and how to place it */
BPF_HASH(cgroups, u64, u8, 1024);
BPF_HASH(comms, struct comm_key, u8, 256);
BPF_HASH(prefix_dirs, struct ioo_file_key, u8, 64);
BPF_ARRAY(prefix_lens, u32, IOO_MAX_PREFIXES);          /* distinct prefix lengths, 0-terminated */
BPF_HASH(prefix_strings, struct prefix_key, u8, 64);     /* prefixes, zero-padded */
BPF_PERCPU_ARRAY(prefix_key_scratch, struct prefix_key, 1);
BPF_HASH(excluded_devs, u32, u8, 64);
BPF_TABLE("lru_hash", struct ioo_file_key, struct known_file, known_files, KNOWN_FILES);
BPF_TABLE("lru_hash", u64, struct file_verdict, file_cache, KNOWN_FILES);
#ifdef IOO_AGGREGATE
BPF_TABLE("lru_hash", u32, struct ioo_endpoint, endpoint_names, 4096);  /* a hash -> the service end it names */
#endif
BPF_PERCPU_ARRAY(lost, u64, IOO_MAX_OPS + IOO_AUX_KINDS + 2);
BPF_PERCPU_ARRAY(path_scratch, struct ioo_path_record, 1);
BPF_PERCPU_ARRAY(name_scratch, struct ioo_name_record, 1);
BPF_PERCPU_ARRAY(head_scratch, struct ioo_head_record, 1);
BPF_PERCPU_ARRAY(proc_scratch, struct ioo_proc_record, 1);
BPF_PERCPU_ARRAY(env_scratch, struct ioo_env_record, 1);
BPF_PERCPU_ARRAY(cgroup_scratch, struct ioo_cgroup_record, 1);
BPF_RINGBUF_OUTPUT(events, EVENTS_PAGES);
BPF_RINGBUF_OUTPUT(aux, AUX_PAGES);
/* Programs tail-called by index: the Python stack walk (python_stacks.bpf.c), which
 * the syscall layer's enter program calls, and its own next steps; loaded as that program's kind. */
#define PY_PROG_FRAMES 0
#define PY_PROG_CODES 1
#define PY_PROG_WALK 2
BPF_PROG_ARRAY(py_programs, 3);
/* The AIO layer's programs (aio.bpf.c), which the syscall layer's exit program tail-calls
 * after io_submit and io_getevents; loaded as that program's kind. */
#define AIO_PROG_SUBMITTED 0
#define AIO_PROG_REAPED 1
BPF_PROG_ARRAY(aio_programs, 2);


static __always_inline void count_lost_n(u32 index, u64 n)
{
	u64 *slot = lost.lookup(&index);
	if (slot)
		*slot += n;
}

static __always_inline void count_lost(u32 index)
{
	count_lost_n(index, 1);
}

static __always_inline struct ioo_config *get_config(void)
{
	u32 zero = 0;
	return config.lookup(&zero);
}

static __always_inline int cgroup_selected(void)
{
	for (int level = 0; level < MAX_CGROUP_LEVELS; level++) {
		u64 id = bpf_get_current_ancestor_cgroup_id(level);
		if (!id)
			return 0;
		if (cgroups.lookup(&id))
			return 1;
	}
	return 0;
}

/* The process filters: pid tree, cgroup, comm (`comm`, or the current thread's if NULL);
 * ioobserve and its helper processes are never traced. Helpers are our children, never in a
 * traced pid tree, so only a recording without one looks them up. Once the recording stops,
 * nothing is selected: the programs detach while the rings are drained. */
static __always_inline int process_selected_as(struct ioo_config *cfg, u32 tgid, const char *comm)
{
	if (tgid == cfg->self_tgid || tgid == 0 || cfg->stopped)
		return 0;
	if (cfg->filter_pid) {
		if (!traced_tgids.lookup(&tgid))
			return 0;
	} else if (own_tgids.lookup(&tgid)) {
		return 0;
	}
	if (cfg->filter_cgroup && !cgroup_selected())
		return 0;
	if (cfg->filter_comm) {
		struct comm_key key = {};
		if (comm)
			__builtin_memcpy(key.comm, comm, IOO_COMM_LEN);
		else
			bpf_get_current_comm(&key.comm, sizeof(key.comm));
		if (!comms.lookup(&key))
			return 0;
	}
	return 1;
}

static __always_inline int process_selected(struct ioo_config *cfg, u32 tgid)
{
	return process_selected_as(cfg, tgid, NULL);
}

/* The current thread's inflight record if its process is selected, else NULL. Whether it is
 * (process_selected: hash lookups per filter) is kept in the record, valid while the filters
 * (select_gen), the thread's process and its cgroup are the ones it was decided for: the
 * usual cost is the record's one task storage lookup, which a traced call needs anyway. A
 * comm filter is decided afresh each time (a thread may rename itself). */
static __always_inline struct inflight *selected_inflight(struct ioo_config *cfg, u32 tgid)
{
	if (cfg->stopped)
		return NULL;
	struct inflight *st = inflight.task_storage_get(bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st)
		return NULL;
	u64 cgroup_id = cfg->filter_cgroup ? current_cgroup_id() : 0;
	if (st->select_gen != cfg->select_gen || st->select_tgid != tgid || st->select_cgroup != cgroup_id ||
	    cfg->filter_comm) {
		st->selected = process_selected(cfg, tgid);
		st->select_gen = cfg->select_gen;
		st->select_tgid = tgid;
		st->select_cgroup = cgroup_id;
	}
	return st->selected ? st : NULL;
}

static __always_inline u64 arg_at(struct inflight *st, s16 index)
{
	if (index < 0 || index > 5)
		return 0;
	return st->args[index & 7];
}


static __always_inline u32 kernel_dev_from_user(u64 dev)
{
	/* userspace dev_t (new_encode_dev) back to the kernel's MAJOR << 20 | MINOR */
	u32 major = ((dev >> 8) & 0xfff) | ((dev >> 32) & ~0xfffULL);
	u32 minor = (dev & 0xff) | ((dev >> 12) & ~0xffULL);
	return (major << 20) | (minor & 0xfffff);
}
