/* Core (compiled first): what every layer shares. The maps of process selection, file
 * verdicts and the rings; the inflight record a syscall keeps from sys_enter to sys_exit and
 * the library-call frames; count_lost, get_config, and process selection (process_selected,
 * kept per thread by selected_inflight). Then, at the end, the one way out of the kernel for
 * an event of any layer: its fill helpers, the gate (serve's aggregates, flood control) and
 * the submit.
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


/* The way out: the one way out of the kernel for an event of any layer, in four steps.
 *
 *   select  the layer's program decides the event is one to trace (process_selected,
 *           file_traced, a block request's origin, ...): nothing below runs for the others.
 *   gate    event_gate(): with IOO_AGGREGATE (`serve`) the event is added to the aggregates
 *           and leaves the kernel only if its cgroup is streamed or recorded (emit_cgroups);
 *           a recording lets every event out. Then, with a flood limit, a cgroup past its
 *           events for this second has the rest counted instead (flood_allows). A syscall is
 *           decided once, at its entry (event_let_out), for all its events: serve's exit
 *           program has no verifier budget left for the check at each of its submits. The
 *           gate reads what the aggregates key and sum: op, flags, ret, dur_ns, bytes_req,
 *           dev, cgroup_id and uid.
 *   fill    the layer fills the rest of its ioo_event (file, offset, parent, the task's
 *           ids and comm with event_task, a Python chain): work only a trace needs.
 *   submit  event_submit(): one copy into the events ring; a full ring counts the op lost.
 *
 * Events are built on the program's stack: one ringbuf_output helper call, where reserve
 * and submit are two.
 */
#ifdef IOO_AGGREGATE
/* Not preallocated: a value holds two histograms (~700 B), so memory follows the keys in use. */
BPF_F_TABLE("hash", struct ioo_agg_key, struct ioo_agg_value, agg_calls, AGG_ENTRIES, BPF_F_NO_PREALLOC);
BPF_ARRAY(agg_zero, struct ioo_agg_value, 1);  /* never written: a new key's first value (too big for the stack) */
BPF_HASH(emit_cgroups, u64, u8, 1024);  /* with emit_some: the cgroups whose events leave the kernel */
BPF_TABLE("lru_hash", u64, struct emit_verdict, emit_verdicts, 4096);  /* event_wanted per cgroup, cached */
BPF_ARRAY(agg_dropped, u64, 1);         /* calls not aggregated: a table was full */
#endif

/* An event the current task caused: the ids the gate keys it by. */
static __always_inline void event_owner(struct ioo_event *ev)
{
	ev->uid = current_uid();
	ev->cgroup_id = current_cgroup_id();
}

/* The fill of an event of the current task: which process, thread and command. */
static __always_inline void event_task(struct ioo_event *ev)
{
	u64 pid_tgid = bpf_get_current_pid_tgid();
	ev->pid = pid_tgid >> 32;
	ev->tid = pid_tgid;
	current_comm(ev->comm);
}

/* The owner and the task of an event completed away from them (a block, AIO or io_uring
 * request), as its submission kept them. */
static __always_inline void event_owner_was(struct ioo_event *ev, u64 cgroup_id, u32 uid)
{
	ev->cgroup_id = cgroup_id;
	ev->uid = uid;
}

static __always_inline void event_task_was(struct ioo_event *ev, u32 pid, u32 tid, const char *comm)
{
	ev->pid = pid;
	ev->tid = tid;
	__builtin_memcpy(ev->comm, comm, IOO_COMM_LEN);
}

/* Every event's fields in two steps, the only places they are set (beside the owner's and
 * the task's above): what the gate and the aggregates read, then, for an event that leaves
 * the kernel, where and when it happened. */
static __always_inline void event_measured(struct ioo_event *ev, u16 op, u16 flags, s64 ret, u64 dur_ns,
					   u64 bytes_req, u32 dev)
{
	ev->op = op;
	ev->flags = flags;
	ev->ret = ret;
	ev->dur_ns = dur_ns;
	ev->bytes_req = bytes_req;
	ev->dev = dev;
}

/* `ts_ns`: the call's start; `offset`: its place in its file (-1: none); `parent_ts`: the
 * start of the event it happened inside (0: none). */
static __always_inline void event_placed(struct ioo_event *ev, u64 ts_ns, s64 offset, u64 ino, u64 arg,
					 u64 parent_ts, s32 fd)
{
	ev->ts_ns = ts_ns;
	ev->offset = offset;
	ev->ino = ino;
	ev->arg = arg;
	ev->parent_ts = parent_ts;
	ev->fd = fd;
}

#ifdef IOO_AGGREGATE
static __always_inline u64 log2_slot(u64 v)
{
	/* ceil(log2(v)): a bucket's bound is inclusive, as Prometheus's `le` (4096 B is "<= 4 KiB");
	 * bcc's bpf_log2l(x) is floor(log2(x)) + 1 */
	u64 slot = v > 1 ? bpf_log2l(v - 1) : 0;
	CLAMP(slot, IOO_AGG_SLOTS - 1);
	return slot;
}

static __always_inline void agg_dropped_one(void)
{
	u32 zero = 0;
	u64 *dropped = agg_dropped.lookup(&zero);
	if (dropped)
		__sync_fetch_and_add(dropped, 1);
}

/* One event into the aggregates (every event, whatever leaves the kernel). */
static __always_inline void aggregate_event(struct ioo_event *ev)
{
	u16 flags = ev->flags;
	struct ioo_agg_key key = {.cgroup_id = ev->cgroup_id, .uid = ev->uid, .dev = ev->dev, .op = ev->op,
				  .out = (flags & IOO_F_PAIR_OUT) ? ((flags & IOO_F_REPEAT) ? 2 : 1) : 0};
	/* Copied by a helper: the branches below then narrow the copy, not the event's own
	 * fields, and the exit program's paths through them join again (the verifier's
	 * budget). */
	struct {
		u64 dur;
		s64 ret;
		u64 bytes_req;
	} sums;
	bpf_probe_read_kernel(&sums, sizeof(sums), &ev->dur_ns);
	s64 ret = sums.ret;
	u64 dur = sums.dur;
	u64 bytes_req = sums.bytes_req;
	struct ioo_agg_value *value = agg_calls.lookup(&key);
	if (!value) {
		u32 zero = 0;
		struct ioo_agg_value *fresh = agg_zero.lookup(&zero);
		if (fresh)
			agg_calls.insert(&key, fresh);  /* may lose a race to create it: then add to the winner's */
		value = agg_calls.lookup(&key);
		if (!value) {
			agg_dropped_one();
			return;
		}
	}
	__sync_fetch_and_add(&value->calls, 1);
	if (ret < 0 && ret >= -MAX_ERRNO_)
		__sync_fetch_and_add(&value->errors, 1);
	else if (ret > 0)
		__sync_fetch_and_add(&value->ret_sum, ret);
	__sync_fetch_and_add(&value->time_ns, dur);
	__sync_fetch_and_add(&value->latency[log2_slot(dur)], 1);
	if (bytes_req) {
		__sync_fetch_and_add(&value->req_sum, bytes_req);
		__sync_fetch_and_add(&value->size[log2_slot(bytes_req)], 1);
	}
}

/* Whether this task's events leave the kernel: all, or only those of emit_cgroups. The walk up
 * the cgroup tree costs a helper call per level, so its verdict is kept per cgroup, valid while
 * emit_cgroups is unchanged (emit_gen). */
static __always_inline int event_wanted(u64 cgroup_id)
{
	struct ioo_config *cfg = get_config();
	if (!cfg || !cfg->emit_some)
		return 1;
	if (!cfg->emit_count)
		return 0;
	u32 gen = cfg->emit_gen;
	struct emit_verdict *cached = emit_verdicts.lookup(&cgroup_id);
	if (cached && cached->gen == gen)
		return cached->wanted;
	struct emit_verdict verdict = {.gen = gen};
	for (int level = 0; level < MAX_CGROUP_LEVELS; level++) {
		u64 id = bpf_get_current_ancestor_cgroup_id(level);
		if (!id)
			break;
		if (emit_cgroups.lookup(&id)) {
			verdict.wanted = 1;
			break;
		}
	}
	emit_verdicts.update(&cgroup_id, &verdict);
	return verdict.wanted;
}
#else
static __always_inline int event_wanted(u64 cgroup_id)
{
	return 1;  /* a recording: every selected event leaves the kernel */
}
#endif

/* A cgroup's flood control: the events it caused this second (sent or not), and those held
 * back past the limit over the recording, which user space reads each second to mark the
 * throttle's start and end in the trace. Shared by the CPUs without a lock: a second's first
 * events may be counted in the one before; the totals are exact. */
struct flood_state {
	u64 window;            /* the second counted (ktime / 1 s) */
	u64 count;             /* events this second */
	u64 dropped;           /* events held back, since the start */
	u64 last_drop_ns;
	u64 throttle_start_ns; /* the first held back after a second with none */
};
BPF_TABLE("lru_hash", u64, struct flood_state, flood_states, 4096);
#define NS_PER_SECOND 1000000000ULL

/* Whether one more event of this cgroup may leave the kernel this second. `at`: the time of
 * the event if the caller has read the clock already (a syscall's entry), else 0. */
static __always_inline int flood_allows(u64 cgroup_id, u64 at)
{
	struct ioo_config *cfg = get_config();
	if (!cfg || !cfg->flood_limit)
		return 1;
	u64 now = at ? at : bpf_ktime_get_ns();
	u64 window = now / NS_PER_SECOND;
	struct flood_state *st = flood_states.lookup(&cgroup_id);
	if (!st) {
		struct flood_state fresh = {.window = window};
		flood_states.insert(&cgroup_id, &fresh);  /* may lose a race to create it: then count in the winner's */
		st = flood_states.lookup(&cgroup_id);
		if (!st)
			return 1;
	}
	if (st->window != window) {
		st->window = window;
		st->count = 0;
	}
	__sync_fetch_and_add(&st->count, 1);
	if (st->count <= cfg->flood_limit)
		return 1;
	if (now - st->last_drop_ns > NS_PER_SECOND)
		st->throttle_start_ns = now;
	st->last_drop_ns = now;
	__sync_fetch_and_add(&st->dropped, 1);
	count_lost(LOST_THROTTLED);
	return 0;
}

/* Whether an event of this cgroup that is `wanted` (event_wanted) leaves the kernel: it does
 * if its cgroup is within its flood limit this second (`at` as flood_allows takes it). */
static __always_inline int event_let_out(u64 cgroup_id, int wanted, u64 at)
{
	return wanted && flood_allows(cgroup_id, at);
}

#define GATE_OWNER 2  /* event_gate: decide for the event's cgroup now (the current task's) */

/* Select → gate: aggregate the event, and say whether it leaves the kernel. `wanted` is
 * GATE_OWNER for an event of the current task, or event_wanted() as it was decided in its
 * owner's context (a block request completes in another's). */
static __always_inline int event_gate(struct ioo_event *ev, int wanted)
{
#ifdef IOO_AGGREGATE
	aggregate_event(ev);
#endif
	return event_let_out(ev->cgroup_id, wanted == GATE_OWNER ? event_wanted(ev->cgroup_id) : wanted, 0);
}

/* event_gate for an event whose way out was decided before (a syscall's, at its entry):
 * aggregate it, and say whether it leaves the kernel (`out`). */
static __always_inline int event_gate_decided(struct ioo_event *ev, int out)
{
#ifdef IOO_AGGREGATE
	aggregate_event(ev);
#endif
	return out;
}

/* Fill → submit: the event into the events ring. */
static __always_inline int event_submit(struct ioo_event *ev)
{
	if (events.ringbuf_output(ev, sizeof(*ev), BPF_RB_NO_WAKEUP) != 0) {
		count_lost(ev->op);
		return -1;
	}
	return 0;
}

/* Little-endian first four bytes of the HTTP requests and answers whose heads are kept. */
#define HTTP_GET 0x20544547   /* "GET " */
#define HTTP_PUT 0x20545550   /* "PUT " */
#define HTTP_HEAD 0x44414548  /* "HEAD" */
#define HTTP_POST 0x54534f50  /* "POST" */
#define HTTP_DELE 0x454c4544  /* "DELE" */
#define HTTP_ANSWER 0x50545448  /* "HTTP", as in "HTTP/1.1 200 OK" */
#define TLS_HANDSHAKE 0x0316  /* a TLS record of type handshake (22), version 3.x */

/* Bytes a program wrote (`len` of them at `buf`) that begin an HTTP request, or bytes it read
 * (`answer`) that begin an HTTP answer, on connection `conn`: their first IOO_HEAD_BYTES go out
 * as a head record of the event at `ts` (the request or status line and headers; nothing past
 * them, nothing of other calls). The flag the event takes: IOO_F_HEAD or IOO_F_ANSWER if the head was sent,
 * IOO_F_TLS_HELLO if written bytes begin a TLS handshake (a client doing TLS itself, not
 * through a probed libssl), else 0. */
static __always_inline u16 send_head(u64 ts, u64 buf, s64 len, int answer, u64 conn)
{
	u32 first = 0;
	if (len < 4 || bpf_probe_read_user(&first, sizeof(first), (void *)buf) < 0)
		return 0;
	if (answer) {
		if (first != HTTP_ANSWER)
			return 0;
	} else {
		if ((first & 0xffff) == TLS_HANDSHAKE)
			return IOO_F_TLS_HELLO;
		if (first != HTTP_GET && first != HTTP_PUT && first != HTTP_HEAD && first != HTTP_POST && first != HTTP_DELE)
			return 0;
	}
	u32 zero = 0;
	struct ioo_head_record *rec = head_scratch.lookup(&zero);
	if (!rec)
		return 0;
	u64 n = len;
	CLAMP(n, IOO_HEAD_BYTES);
	if (bpf_probe_read_user(rec->data, n, (void *)buf) < 0)
		return 0;
	rec->hdr.kind = IOO_AUX_HEAD;
	rec->ts_ns = ts;
	u64 pid_tgid = bpf_get_current_pid_tgid();
	rec->tid = pid_tgid;
	rec->pid = pid_tgid >> 32;
	rec->len = n;
	rec->cgroup_id = bpf_get_current_cgroup_id();
	rec->conn = conn;
	u64 size = __builtin_offsetof(struct ioo_head_record, data) + n;
	CLAMP(size, sizeof(*rec));
	rec->hdr.size = size;
	if (aux.ringbuf_output(rec, size, 0) != 0) {
		count_lost(LOST_AUX_BASE + IOO_AUX_HEAD);
		return 0;
	}
	return answer ? IOO_F_ANSWER : IOO_F_HEAD;
}

/* A page cache event of the current task: `pages` pages of (dev, ino) from page `index`.
 * `out`: GATE_OWNER to gate it now, or whether it leaves the kernel as its syscall's entry
 * decided. */
static __always_inline void submit_page_event(u16 op, u64 ts, u32 dev, u64 ino, u64 index, u64 pages,
					      u64 arg, u64 parent_ts, int out)
{
	struct ioo_event ev = {};
	event_measured(&ev, op, IOO_F_FILE, pages * PAGE_SIZE_, 0, pages * PAGE_SIZE_, dev);
	event_owner(&ev);
	if (!(out == GATE_OWNER ? event_gate(&ev, GATE_OWNER) : event_gate_decided(&ev, out)))
		return;
	event_placed(&ev, ts, index * PAGE_SIZE_, ino, arg, parent_ts, -1);
	event_task(&ev);
	event_submit(&ev);
}
