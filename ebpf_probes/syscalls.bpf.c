/* Syscall layer: file I/O of every process, from the raw sys_enter/sys_exit tracepoints,
 * plus process lineage from the sched tracepoints.
 *
 * Which syscalls are traced and how their arguments are read comes from the
 * `syscall_specs` map (ioobserve/probes/syscall_table.py); filters come from maps too, so
 * nothing a user types ever becomes C text. Build-time knobs arrive as -D flags:
 * EVENTS_PAGES, AUX_PAGES, KNOWN_FILES, and the OFF_* struct offsets.
 *
 * One file on purpose: bcc rewrites map accessors (`map.lookup(...)`) and finds programs
 * only in the main source file, so helpers that touch maps cannot move into headers.
 * Sections: maps and filters; paths (walk, verdict cache, path arguments); sys_enter;
 * sys_exit; process lineage; block layer.
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

/* known_files values: what was decided for a file, and of which generation of its inode
 * (a new file with a reused inode number is walked and named again) */
#define KNOWN_ADMITTED 0x1
#define KNOWN_EMITTED 0x2
struct known_file {
	u32 gen;
	u8 known;  /* KNOWN_* */
};

struct prefix_key {
	char path[IOO_PREFIX_LEN];
};

struct comm_key {
	char comm[IOO_COMM_LEN];
};

/* What sys_enter saw, kept in task storage until sys_exit. */
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
};
#define HAVE_FILE 0x1
#define HAVE_FILE2 0x2
#define HAVE_POS 0x4
#define HAVE_NO_NAME 0x8  /* the path argument is "" naming the fd: nothing to send */
#define HAVE_CHILD 0x10   /* an event of a layer below names this call as its parent */

/* A thread's Python calls (python_stacks.bpf.c walks them): the call instances of the walk
 * made for the syscall in flight, and those of the last event sent with a stack. An event
 * says how many levels, outermost first, it shares with that last one: user space builds
 * the calls' spans from it (ioobserve/python/spans.py). Kept apart from `inflight`, which
 * sys_exit copies to its stack. */
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
BPF_HASH(py_image_files, struct ioo_file_key, u32, IOO_PY_LAYOUTS);  /* files holding a CPython runtime ... */
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
BPF_PERCPU_ARRAY(lost, u64, IOO_MAX_OPS + IOO_AUX_KINDS);
BPF_PERCPU_ARRAY(path_scratch, struct ioo_path_record, 1);
BPF_PERCPU_ARRAY(name_scratch, struct ioo_name_record, 1);
BPF_PERCPU_ARRAY(proc_scratch, struct ioo_proc_record, 1);
BPF_PERCPU_ARRAY(env_scratch, struct ioo_env_record, 1);
BPF_RINGBUF_OUTPUT(events, EVENTS_PAGES);
BPF_RINGBUF_OUTPUT(aux, AUX_PAGES);

#ifdef IOO_AGGREGATE
/* Not preallocated: a value holds two histograms (~700 B), so memory follows the keys in use. */
BPF_F_TABLE("hash", struct ioo_agg_key, struct ioo_agg_value, agg_calls, AGG_ENTRIES, BPF_F_NO_PREALLOC);
BPF_ARRAY(agg_zero, struct ioo_agg_value, 1);  /* never written: a new key's first value (too big for the stack) */
BPF_HASH(emit_cgroups, u64, u8, 1024);  /* with emit_some: the cgroups whose events leave the kernel */
BPF_TABLE("lru_hash", u64, struct emit_verdict, emit_verdicts, 4096);  /* event_wanted per cgroup, cached */
BPF_ARRAY(agg_dropped, u64, 1);         /* calls not aggregated: a table was full */
#endif

static __always_inline void count_lost(u32 index)
{
	u64 *slot = lost.lookup(&index);
	if (slot)
		*slot += 1;
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

/* The process filters: pid tree, cgroup, comm; ioobserve and its helper processes are never
 * traced. Helpers are our children, never in a traced pid tree, so only a recording without
 * one looks them up. Once the recording stops, nothing is selected: the programs detach
 * while the rings are drained. */
static __always_inline int process_selected(struct ioo_config *cfg, u32 tgid)
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
		bpf_get_current_comm(&key.comm, sizeof(key.comm));
		if (!comms.lookup(&key))
			return 0;
	}
	return 1;
}

static __always_inline int dentry_in_prefix_dirs(void *dentry)
{
	struct file_ident id = {};
	if (inode_ident(read_ptr(dentry, OFF_DENTRY_D_INODE), &id) < 0)
		return 0;
	struct ioo_file_key key = {.ino = id.ino, .dev = id.dev};
	return prefix_dirs.lookup(&key) != NULL;
}

/* Walk dentries and mounts up to the root, decide the path filter, and send the path
 * once per file. Returns KNOWN_* bits: whether the file passes the path filter, and
 * whether its path was delivered.
 *
 * The loop keeps its counters in the per-CPU record, not in registers: values read back
 * from map memory are unknown to the verifier, so every iteration starts in the same
 * state whichever branch it came from, and verification stays linear in the depth. */
static __always_inline int walk_path(struct walk_req *req)
{
	u32 zero = 0;
	struct ioo_config *cfg = get_config();
	struct ioo_path_record *rec = path_scratch.lookup(&zero);
	if (!cfg || !rec)
		return KNOWN_EMITTED;  /* cannot happen; claim delivered so callers do not retry */
	void *vfsmnt = req->vfsmnt;
	void *dentry = req->dentry;
	void *mnt = (char *)vfsmnt - OFF_MOUNT_MNT;
	rec->len = 0;
	rec->depth = 0;
	rec->flags = IOO_PATH_TRUNCATED;
	rec->hdr.kind = !cfg->filter_path;  /* "admitted so far", until the record is sent */

	for (int i = 0; i < MAX_PATH_DEPTH; i++) {
		if (!rec->hdr.kind && dentry_in_prefix_dirs(dentry))
			rec->hdr.kind = 1;
		void *root = read_ptr(vfsmnt, OFF_VFSMOUNT_MNT_ROOT);
		void *parent = read_ptr(dentry, OFF_DENTRY_D_PARENT);
		if (dentry == root || dentry == parent) {
			void *mnt_parent = read_ptr(mnt, OFF_MOUNT_MNT_PARENT);
			if (dentry != root || mnt_parent == mnt || !mnt_parent) {
				rec->flags = 0;
				break;
			}
			dentry = read_ptr(mnt, OFF_MOUNT_MNT_MOUNTPOINT);
			mnt = mnt_parent;
			vfsmnt = (char *)mnt + OFF_MOUNT_MNT;
			continue;
		}
		u32 off = rec->len;
		if (off > IOO_PATH_BYTES - IOO_NAME_LEN)
			break;
		const char *name = read_ptr(dentry, OFF_DENTRY_D_NAME_NAME);
		int n = bpf_probe_read_kernel_str(&rec->data[off], IOO_NAME_LEN, name);
		if (n <= 0)
			break;
		rec->len = off + n;
		rec->depth += 1;
		dentry = parent;
	}

	int admitted = rec->hdr.kind != 0;
	struct ioo_file_key key = {.ino = req->id.ino, .dev = req->id.dev};
	u8 known = admitted ? KNOWN_ADMITTED : 0;
	if (admitted || req->force) {
		rec->hdr.kind = IOO_AUX_PATH;
		rec->ino = req->id.ino;
		rec->dev = req->id.dev;
		rec->mode = req->id.mode;
		u32 len = rec->len;
		if (len > IOO_PATH_BYTES)
			len = IOO_PATH_BYTES;
		u32 size = __builtin_offsetof(struct ioo_path_record, data) + len;
		rec->hdr.size = size;
		if (aux.ringbuf_output(rec, size, 0) == 0)
			known |= KNOWN_EMITTED;
		else
			count_lost(LOST_AUX_BASE + IOO_AUX_PATH);
	}
	/* Only a delivered path is remembered, so a lost one is sent again next time. */
	if (known & KNOWN_EMITTED || !admitted) {
		struct known_file value = {.gen = req->gen, .known = known};
		known_files.update(&key, &value);
	}
	return known;
}

/* Path filter and path delivery for an open file: KNOWN_* bits. */
static __always_inline u8 file_admitted(void *file, struct file_ident *id, int force)
{
	struct ioo_file_key key = {.ino = id->ino, .dev = id->dev};
	u32 gen = read_u32(read_ptr(file, OFF_FILE_F_INODE), OFF_INODE_I_GENERATION);
	struct known_file *seen = known_files.lookup(&key);
	if (seen && seen->gen == gen && (seen->known & KNOWN_EMITTED || (!force && !(seen->known & KNOWN_ADMITTED))))
		return seen->known;
	struct walk_req req = {
		.vfsmnt = read_ptr(file, OFF_FILE_F_PATH_MNT),
		.dentry = read_ptr(file, OFF_FILE_F_PATH_DENTRY),
		.id = *id,
		.gen = gen,
		.force = force,
	};
	return walk_path(&req);
}

/* Whether an open file is traced (real file type, not on an excluded filesystem, inside
 * the path filter), with its identity and position. The verdict is cached by the file's
 * address and checked against its inode's address (read together with f_pos), so the
 * usual cost is one small read: a reused struct file pointing at another inode misses. */
static __always_inline int file_traced(void *file, struct file_ident *id, s64 *pos)
{
	void *inode = file_inode_pos(file, pos);
	if (!inode)
		return 0;
	u64 key = (u64)file;
	struct file_verdict *cached = file_cache.lookup(&key);
	if (cached && cached->inode == (u64)inode) {
		id->ino = cached->ino;
		id->dev = cached->dev;
		id->mode = cached->mode;
		return cached->traced;
	}
	if (inode_ident(inode, id) < 0)
		return 0;
	int traced = 0;
	u8 known = KNOWN_EMITTED;
	if (mode_is_io(id->mode) && !excluded_devs.lookup(&id->dev)) {
		known = file_admitted(file, id, 0);
		traced = (known & KNOWN_ADMITTED) != 0;
	}
	/* A path that could not be delivered is retried: do not cache that verdict. */
	if (!traced || (known & KNOWN_EMITTED)) {
		struct file_verdict verdict = {
			.inode = (u64)inode, .ino = id->ino, .dev = id->dev, .mode = id->mode, .traced = traced,
		};
		file_cache.update(&key, &verdict);
	}
	return traced;
}

static __always_inline u64 iov_bytes(u64 iov_ptr, u64 count)
{
	u64 total = 0;
	for (int i = 0; i < MAX_IOV; i++) {
		if (i >= count)
			break;
		u64 len = 0;
		bpf_probe_read_user(&len, sizeof(len), (void *)(iov_ptr + i * 16 + 8));
		total += len;
	}
	return total;
}

static __always_inline u64 arg_at(struct inflight *st, s16 index)
{
	if (index < 0 || index > 5)
		return 0;
	return st->args[index & 7];
}

/* The ts of the innermost library call open on this thread (0 if none): a syscall's parent,
 * marked as one so that its event carries an exact key (IOO_F_PARENT). */
static __always_inline u64 innermost_call_ts(void)
{
	struct call_frames *fr = call_frames.task_storage_get(bpf_get_current_task_btf(), 0, 0);
	if (!fr || fr->depth == 0)
		return 0;
	struct call_frame *frame = frame_at(fr, fr->depth);
	frame->parent = 1;
	return frame->ts;
}

/* The ts of the syscall in flight on this thread (0 if none): the parent of an event it
 * causes (a block request, readahead, a VFS call), marked as one (IOO_F_PARENT). */
static __always_inline u64 syscall_as_parent(struct inflight *st)
{
	if (!st || !st->op)
		return 0;
	st->have |= HAVE_CHILD;
	return st->ts;
}

/* A traced syscall (or library call) touched a file: the first one names the open call
 * above it, for calls that hold no descriptor of their own (H5Dwrite, MPI_File_write_all). */
static __always_inline void note_child_file(u64 parent_ts, struct file_ident *id)
{
	struct call_frames *fr = call_frames.task_storage_get(bpf_get_current_task_btf(), 0, 0);
	if (!fr || fr->depth == 0)
		return;
	struct call_frame *frame = frame_at(fr, fr->depth);
	if (frame->ts == parent_ts && !frame->child_ino) {
		frame->child_ino = id->ino;
		frame->child_dev = id->dev;
	}
}

/* Report a file mapped executable for the first time (its path first, if not yet sent), so
 * user space can attach library probes to it while the process is still starting. */
static __always_inline void note_library(void *file, u64 ts)
{
	struct file_ident id = {};
	s64 unused_pos;
	if (!file || inode_ident(file_inode_pos(file, &unused_pos), &id) < 0)
		return;
	struct ioo_file_key key = {.ino = id.ino, .dev = id.dev};
	u8 one = 1;
	if (libraries.lookup(&key))
		return;
	file_admitted(file, &id, 1);
	struct ioo_lib_record rec = {};
	rec.hdr.kind = IOO_AUX_LIB;
	rec.hdr.size = sizeof(rec);
	rec.ts_ns = ts;
	rec.ino = id.ino;
	rec.dev = id.dev;
	rec.pid = bpf_get_current_pid_tgid() >> 32;
	if (aux.ringbuf_output(&rec, sizeof(rec), 0) == 0)
		libraries.update(&key, &one);
	else
		count_lost(LOST_AUX_BASE + IOO_AUX_LIB);
}

/* A process maps the text of a file known to hold a CPython runtime (py_images): remember it
 * in its inflight slot, so on_sys_exit places the runtime at the address the mapping got. */
static __always_inline void note_python_text(void *file, u64 offset, struct inflight *st)
{
	struct file_ident id = {};
	s64 unused_pos;
	if (!file || inode_ident(file_inode_pos(file, &unused_pos), &id) < 0)
		return;
	struct ioo_file_key key = {.ino = id.ino, .dev = id.dev};
	u32 *index = py_image_files.lookup(&key);
	if (!index)
		return;
	u32 at = *index;
	struct ioo_py_image *image = py_images.lookup(&at);
	if (!image || image->text_offset != offset)
		return;
	/* Set in the slot now, since the call may be filtered out before the slot is written. */
	struct inflight *slot = inflight.task_storage_get(bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!slot)
		return;
	slot->py_text = at + 1;
	st->py_text = at + 1;
}

/* Give process `tgid` the interpreter py_images[index], whose text starts at `base` (the address
 * its text mapping got, or mm->start_code). */
static __always_inline void place_python(u32 tgid, u32 index, u64 base, int from_map)
{
	struct ioo_py_image *image = py_images.lookup(&index);
	if (!image)
		return;
	struct ioo_py_proc proc = image->proc;
	proc.runtime = base + (from_map ? image->runtime_from_text_map : image->runtime_from_start_code);
	py_procs.insert(&tgid, &proc);  /* no overwrite: user space's own reading, if there, stands */
}

int on_sys_enter(struct bpf_raw_tracepoint_args *ctx)
{
	u64 nr = ctx->args[1];
	if (nr >= SPEC_ENTRIES)
		return 0;
	u32 key = nr;
	struct ioo_syscall_spec *spec = syscall_specs.lookup(&key);
	if (!spec || !spec->op)
		return 0;
	struct ioo_config *cfg = get_config();
	u64 pid_tgid = bpf_get_current_pid_tgid();
	if (!cfg || !process_selected(cfg, pid_tgid >> 32))
		return 0;

	/* One read of the pt_regs span holding the six syscall arguments. */
	u64 regs[(SYSCALL_ARGS_HI - SYSCALL_ARGS_LO) / 8 + 1];
	bpf_probe_read_kernel(regs, sizeof(regs), (char *)ctx->args[0] + SYSCALL_ARGS_LO);
	struct inflight st = {};
	st.ts = bpf_ktime_get_ns();
	st.nr = key;
	st.op = spec->op;
	st.args[0] = regs[(OFF_SYSCALL_ARG0 - SYSCALL_ARGS_LO) / 8];
	st.args[1] = regs[(OFF_SYSCALL_ARG1 - SYSCALL_ARGS_LO) / 8];
	st.args[2] = regs[(OFF_SYSCALL_ARG2 - SYSCALL_ARGS_LO) / 8];
	st.args[3] = regs[(OFF_SYSCALL_ARG3 - SYSCALL_ARGS_LO) / 8];
	st.args[4] = regs[(OFF_SYSCALL_ARG4 - SYSCALL_ARGS_LO) / 8];
	st.args[5] = regs[(OFF_SYSCALL_ARG5 - SYSCALL_ARGS_LO) / 8];
	u16 flags = spec->flags;

	if (flags & IOO_S_MMAP) {
		if ((arg_at(&st, spec->aux_arg) & MAP_ANONYMOUS_) || (s32)arg_at(&st, spec->fd_arg) < 0)
			return 0;
		/* Before the path filter: a library is reported wherever it lives. */
		if (arg_at(&st, MMAP_PROT_ARG) & PROT_EXEC_) {
			void *mapped = fd_file((s32)arg_at(&st, spec->fd_arg));
			if (cfg->layers & IOO_LAYER_LIBS)
				note_library(mapped, st.ts);
			if (cfg->layers & IOO_LAYER_PYTHON)
				note_python_text(mapped, arg_at(&st, MMAP_OFFSET_ARG), &st);
		}
	}
	if (cfg->layers & IOO_LAYER_CALLS)
		st.parent_ts = innermost_call_ts();
	if (flags & IOO_S_FCNTL_DUP) {
		u64 cmd = arg_at(&st, spec->aux_arg);
		if (cmd != F_DUPFD_ && cmd != F_DUPFD_CLOEXEC_)
			return 0;
	}

	s16 fd_arg = spec->fd_arg;
	if (flags & IOO_S_EMPTY_PATH && spec->path_arg >= 0) {
		char first = 1;
		bpf_probe_read_user(&first, 1, (void *)arg_at(&st, spec->path_arg));
		if (first == 0 && (arg_at(&st, spec->aux_arg) & AT_EMPTY_PATH_)) {
			fd_arg = spec->dirfd_arg;
			st.have |= HAVE_NO_NAME;
		}
	}
	void *file = NULL;
	s64 file_pos = -1, file2_pos = -1;
	st.fd = fd_arg >= 0 ? (s32)arg_at(&st, fd_arg) : -1;
	if (fd_arg >= 0) {
		file = fd_file(st.fd);
		if (file) {
			if (file_traced(file, &st.file, &file_pos))
				st.have |= HAVE_FILE;
			else if (!(flags & IOO_S_PAIR))
				return 0;
		} else if (cfg->filter_path) {
			return 0;  /* a bad fd names no file a path filter could admit */
		}
	}
	if (flags & IOO_S_PAIR) {
		void *file2 = fd_file((s32)arg_at(&st, spec->fd2_arg));
		if (file2 && file_traced(file2, &st.file2, &file2_pos))
			st.have |= HAVE_FILE2;
		if (!(st.have & (HAVE_FILE | HAVE_FILE2)))
			return 0;  /* pipe to socket and the like: not file I/O */
		st.pos2 = file2_pos;
	}

	if (spec->count_arg >= 0) {
		u64 count = arg_at(&st, spec->count_arg);
		if (flags & IOO_S_IOV)
			count = iov_bytes(arg_at(&st, spec->count_arg - 1), count);
		st.bytes_req = count;
	}
	st.pos = -1;
	if (spec->offset_arg >= 0) {
		u64 raw = arg_at(&st, spec->offset_arg);
		if (flags & IOO_S_OFFSET_PTR) {
			if (raw)
				bpf_probe_read_user(&st.pos, sizeof(st.pos), (void *)raw);
			else if (file)
				st.have |= HAVE_POS;
		} else if ((flags & IOO_S_OFFSET_NEG) && (s64)raw == -1) {
			st.have |= HAVE_POS;
		} else {
			st.pos = raw;
		}
	} else if (flags & IOO_S_FILE_POS) {
		st.have |= HAVE_POS;
	}
	if (st.have & HAVE_POS)
		st.pos = (st.have & HAVE_FILE) ? file_pos : -1;
	struct inflight *slot = inflight.task_storage_get(bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!slot)
		return 0;
	*slot = st;
	return 0;
}

/* Resolve the directory a relative path starts from and make sure its path is sent. */
static __always_inline void path_base(struct inflight *st, s16 dirfd_arg, struct ioo_name_record *rec)
{
	void *task = (void *)bpf_get_current_task();
	struct walk_req req = {.force = 1};
	s32 dirfd = dirfd_arg >= 0 ? (s32)arg_at(st, dirfd_arg) : AT_FDCWD_;
	if (dirfd == AT_FDCWD_) {
		void *fs = read_ptr(task, OFF_TASK_FS);
		if (!fs)
			return;
		req.vfsmnt = read_ptr(fs, OFF_FS_STRUCT_PWD_MNT);
		req.dentry = read_ptr(fs, OFF_FS_STRUCT_PWD_DENTRY);
	} else {
		void *file = fd_file(dirfd);
		if (!file)
			return;
		req.vfsmnt = read_ptr(file, OFF_FILE_F_PATH_MNT);
		req.dentry = read_ptr(file, OFF_FILE_F_PATH_DENTRY);
	}
	if (!req.dentry || inode_ident(read_ptr(req.dentry, OFF_DENTRY_D_INODE), &req.id) < 0)
		return;
	rec->base_ino = req.id.ino;
	rec->base_dev = req.id.dev;
	struct ioo_file_key key = {.ino = req.id.ino, .dev = req.id.dev};
	req.gen = read_u32(read_ptr(req.dentry, OFF_DENTRY_D_INODE), OFF_INODE_I_GENERATION);
	struct known_file *seen = known_files.lookup(&key);
	if (!seen || seen->gen != req.gen || !(seen->known & KNOWN_EMITTED))
		walk_path(&req);
}

/* Absolute path strings against the --path-prefix strings: one hash lookup per distinct
 * prefix length (no byte loops), then a component boundary check. */
static __always_inline int prefix_matches(struct ioo_name_record *rec)
{
	u32 zero = 0;
	struct prefix_key *key = prefix_key_scratch.lookup(&zero);
	if (!key)
		return 0;
	for (u32 i = 0; i < IOO_MAX_PREFIXES; i++) {
		u32 index = i;
		u32 *len = prefix_lens.lookup(&index);
		if (!len || *len == 0)
			break;
		u32 n = *len & (IOO_PREFIX_LEN - 1);
		__builtin_memset(key, 0, sizeof(*key));
		bpf_probe_read_kernel(key->path, n, rec->data);
		char next = rec->data[n];
		if ((next == '/' || next == 0 || key->path[n - 1 & (IOO_PREFIX_LEN - 1)] == '/') && prefix_strings.lookup(key))
			return 1;
	}
	return 0;
}

/* Send the user's path argument; returns 0 if a filter rejects it. */
static __always_inline int emit_name(struct ioo_config *cfg, struct inflight *st, s16 path_arg,
				     s16 dirfd_arg, u16 index, int decided)
{
	u32 zero = 0;
	struct ioo_name_record *rec = name_scratch.lookup(&zero);
	if (!rec)
		return 1;
	int n = bpf_probe_read_user_str(rec->data, IOO_NAME_LEN, (void *)arg_at(st, path_arg));
	if (n < 0)
		n = 0;
	rec->base_ino = 0;
	rec->base_dev = 0;
	if (rec->data[0] == '/') {
		/* Pseudo-filesystems are excluded by name when no file identity decides. */
		if (!decided && (
		    (rec->data[1] == 'p' && rec->data[2] == 'r' && rec->data[3] == 'o' && rec->data[4] == 'c' && (rec->data[5] == '/' || rec->data[5] == 0)) ||
		    (rec->data[1] == 's' && rec->data[2] == 'y' && rec->data[3] == 's' && (rec->data[4] == '/' || rec->data[4] == 0)) ||
		    (rec->data[1] == 'd' && rec->data[2] == 'e' && rec->data[3] == 'v' && (rec->data[4] == '/' || rec->data[4] == 0))))
			return 0;
		if (!decided && cfg->filter_path && !prefix_matches(rec))
			return 0;
	} else if (n > 0) {
		/* Relative: the path filter is finished in user space once the base is known. */
		path_base(st, dirfd_arg, rec);
	}
	rec->hdr.kind = IOO_AUX_NAME;
	rec->ts_ns = st->ts;
	rec->tid = bpf_get_current_pid_tgid();
	rec->index = index;
	rec->len = n > 0 ? n - 1 : 0;
	u32 size = __builtin_offsetof(struct ioo_name_record, data) + (n > 0 ? n : 0);
	if (size > sizeof(*rec))
		size = sizeof(*rec);
	rec->hdr.size = size;
	if (aux.ringbuf_output(rec, size, 0) != 0) {
		count_lost(LOST_AUX_BASE + IOO_AUX_NAME);
		return 1;
	}
	return 2;
}

static __always_inline u32 kernel_dev_from_user(u64 dev)
{
	/* userspace dev_t (new_encode_dev) back to the kernel's MAJOR << 20 | MINOR */
	u32 major = ((dev >> 8) & 0xfff) | ((dev >> 32) & ~0xfffULL);
	u32 minor = (dev & 0xff) | ((dev >> 12) & ~0xffULL);
	return (major << 20) | (minor & 0xfffff);
}

/* The fields of an event that describe the current task. */
static __always_inline void event_task(struct ioo_event *ev)
{
	u64 pid_tgid = bpf_get_current_pid_tgid();
	ev->pid = pid_tgid >> 32;
	ev->tid = pid_tgid;
	ev->uid = current_uid();
	ev->cgroup_id = current_cgroup_id();
	current_comm(ev->comm);
}

#ifdef IOO_AGGREGATE
static __always_inline u32 log2_slot(u64 v)
{
	/* ceil(log2(v)): a bucket's bound is inclusive, as Prometheus's `le` (4096 B is "<= 4 KiB");
	 * bcc's bpf_log2l(x) is floor(log2(x)) + 1 */
	u32 slot = v > 1 ? bpf_log2l(v - 1) : 0;
	return slot < IOO_AGG_SLOTS ? slot : IOO_AGG_SLOTS - 1;
}

static __always_inline void agg_dropped_one(void)
{
	u32 zero = 0;
	u64 *dropped = agg_dropped.lookup(&zero);
	if (dropped)
		__sync_fetch_and_add(dropped, 1);
}

/* One traced call into the aggregates (every call, whatever leaves the kernel). */
static __always_inline void aggregate_call(struct inflight *st, s64 ret, u64 dur, u32 dev, u16 flags, u64 cgroup_id)
{
	struct ioo_agg_key key = {.cgroup_id = cgroup_id, .uid = current_uid(), .dev = dev, .op = st->op,
				  .out = (flags & IOO_F_PAIR_OUT) ? ((flags & IOO_F_REPEAT) ? 2 : 1) : 0};
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
	if (st->bytes_req) {
		__sync_fetch_and_add(&value->req_sum, st->bytes_req);
		__sync_fetch_and_add(&value->size[log2_slot(st->bytes_req)], 1);
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
#endif

static __always_inline int submit_event(struct inflight *st, s64 ret, u64 dur, struct file_ident *id,
					int has_file, s32 fd, s64 pos, u64 arg, u16 flags)
{
#ifdef IOO_AGGREGATE
	u64 cgroup_id = current_cgroup_id();
	aggregate_call(st, ret, dur, has_file ? id->dev : 0, flags, cgroup_id);
	if (!event_wanted(cgroup_id))
		return 0;
#endif
	u64 py_chain = st->py_chain;
	struct py_calls *calls = NULL;
	if (py_chain) {
		calls = py_calls.task_storage_get(bpf_get_current_task_btf(), 0, 0);
		if (calls && calls->ts != st->ts)
			calls = NULL;
		py_chain |= (u64)(calls ? py_same_calls(calls) : 0) << IOO_PY_SAME_SHIFT;
	}
	struct ioo_event *ev = events.ringbuf_reserve(sizeof(struct ioo_event));
	if (!ev) {
		count_lost(st->op);
		return -1;
	}
	ev->ts_ns = st->ts;
	ev->dur_ns = dur;
	ev->ret = ret;
	ev->bytes_req = st->bytes_req;
	ev->offset = pos;
	ev->ino = has_file ? id->ino : 0;
	ev->dev = has_file ? id->dev : 0;
	ev->arg = arg;
	ev->parent_ts = st->parent_ts;
	ev->py_chain = py_chain;
	ev->fd = fd;
	ev->op = st->op;
	/* cache_pages: submit_cache's page event, which follows, names this call */
	ev->flags = flags | (has_file ? IOO_F_FILE : 0) | (((st->have & HAVE_CHILD) || st->cache_pages) ? IOO_F_PARENT : 0);
	event_task(ev);
	events.ringbuf_submit(ev, BPF_RB_NO_WAKEUP);
	if (calls)
		py_sent_calls(calls);
	return 0;
}

/* A page cache event of the current task: `pages` pages of (dev, ino) from page `index`. */
static __always_inline void submit_page_event(u16 op, u64 ts, u32 dev, u64 ino, u64 index, u64 pages,
					      u64 arg, u64 parent_ts)
{
	struct ioo_event *ev = events.ringbuf_reserve(sizeof(struct ioo_event));
	if (!ev) {
		count_lost(op);
		return;
	}
	ev->ts_ns = ts;
	ev->dur_ns = 0;
	ev->ret = pages * PAGE_SIZE_;
	ev->bytes_req = pages * PAGE_SIZE_;
	ev->offset = index * PAGE_SIZE_;
	ev->ino = ino;
	ev->dev = dev;
	ev->arg = arg;
	ev->parent_ts = parent_ts;
	ev->py_chain = 0;
	ev->fd = -1;
	ev->op = op;
	ev->flags = IOO_F_FILE;
	event_task(ev);
	events.ringbuf_submit(ev, BPF_RB_NO_WAKEUP);
}

/* The pages a traced call added to the page cache, as one child event: for a read they are
 * what it missed (readahead included), for a write the pages it created. */
static __always_inline void submit_cache(struct inflight *st)
{
	u16 op = (st->op >= IOO_OP_WRITE && st->op <= IOO_OP_PWRITEV2) ? IOO_OP_CACHE_ADD : IOO_OP_CACHE_MISS;
	submit_page_event(op, st->cache_ts, st->cache_dev, st->cache_ino, st->cache_index, st->cache_pages,
			  st->cache_pages, st->ts);
}

int on_sys_exit(struct bpf_raw_tracepoint_args *ctx)
{
	struct inflight *stored = inflight.task_storage_get(bpf_get_current_task_btf(), 0, 0);
	if (!stored)
		return 0;
	s64 ret = ctx->args[1];
	if (stored->py_text) {
		if ((u64)ret < (u64)-MAX_ERRNO_)
			place_python(bpf_get_current_pid_tgid() >> 32, stored->py_text - 1, ret, 1);
		stored->py_text = 0;
	}
	if (!stored->op)
		return 0;
	struct inflight st = *stored;
	stored->op = 0;
	u64 dur = bpf_ktime_get_ns() - st.ts;
	struct ioo_syscall_spec *spec = syscall_specs.lookup(&st.nr);
	if (!spec)
		return 0;
	u16 flags = spec->flags;
	u16 ev_flags = (st.have & HAVE_POS) ? IOO_F_POS : 0;
	int decided = st.have & HAVE_FILE;
	s32 fd = st.fd;

	if ((flags & IOO_S_RET_FD) && ret >= 0) {
		s64 unused_pos;
		void *file = fd_file(ret);
		if (!file)
			return 0;
		/* A new open file: a verdict cached for a closed one at the same address (and an
		 * inode at the same address since) is not this file's. */
		u64 addr = (u64)file;
		file_cache.delete(&addr);
		if (!file_traced(file, &st.file, &unused_pos))
			return 0;
		st.have |= HAVE_FILE;
		decided = 1;
		fd = ret;
	}
	if ((flags & (IOO_S_STATBUF | IOO_S_STATX)) && ret == 0 && !(st.have & HAVE_FILE)) {
		u64 buf = arg_at(&st, spec->buf_arg);
		if (flags & IOO_S_STATBUF) {
			u64 dev = 0;
			bpf_probe_read_user(&dev, sizeof(dev), (void *)buf);
			bpf_probe_read_user(&st.file.ino, sizeof(st.file.ino), (void *)(buf + 8));
			st.file.dev = kernel_dev_from_user(dev);
		} else {
			u32 dev[2] = {};
			bpf_probe_read_user(&st.file.ino, sizeof(st.file.ino), (void *)(buf + 32));
			bpf_probe_read_user(dev, sizeof(dev), (void *)(buf + 136));
			st.file.dev = (dev[0] << 20) | (dev[1] & 0xfffff);
		}
		if (excluded_devs.lookup(&st.file.dev))
			return 0;
		st.have |= HAVE_FILE;
	}
	/* An opened file's path comes from the kernel's own walk; other path arguments are sent. */
	int opened = (flags & IOO_S_RET_FD) && ret >= 0;
	if (spec->path_arg >= 0 && !(st.have & HAVE_NO_NAME) && !opened) {
		/* The config is needed only here (path filter), not on the data-op path. */
		struct ioo_config *cfg = get_config();
		if (!cfg)
			return 0;
		int sent = emit_name(cfg, &st, spec->path_arg, spec->dirfd_arg, 0, decided);
		if (!sent)
			return 0;
		if (sent == 2)
			ev_flags |= IOO_F_NAME;
		if (spec->path2_arg >= 0 && emit_name(cfg, &st, spec->path2_arg, spec->dirfd2_arg, 1, decided) == 2)
			ev_flags |= IOO_F_NAME2;
	}
	u64 arg = spec->aux_arg >= 0 ? arg_at(&st, spec->aux_arg) : 0;
	if (flags & IOO_S_HOW_FLAGS) {
		u64 how_flags = 0;
		bpf_probe_read_user(&how_flags, sizeof(how_flags), (void *)arg);
		arg = how_flags;
	}
	if (flags & IOO_S_PAIR) {
		s32 fd2 = (s32)arg_at(&st, spec->fd2_arg);
		if (st.have & HAVE_FILE)
			submit_event(&st, ret, dur, &st.file, 1, fd, st.pos, fd2, ev_flags);
		if (st.have & HAVE_FILE2)
			submit_event(&st, ret, dur, &st.file2, 1, fd2, st.pos2, fd,
				     IOO_F_PAIR_OUT | ((st.have & HAVE_FILE) ? IOO_F_REPEAT : 0));
	} else {
		submit_event(&st, ret, dur, &st.file, st.have & HAVE_FILE, fd, st.pos, arg, ev_flags);
	}
	if (st.parent_ts && (st.have & HAVE_FILE))
		note_child_file(st.parent_ts, &st.file);
	if (st.cache_pages)
		submit_cache(&st);
	return 0;
}

static __always_inline struct ioo_proc_record *proc_record(u32 kind)
{
	u32 zero = 0;
	struct ioo_proc_record *rec = proc_scratch.lookup(&zero);
	if (!rec)
		return NULL;
	rec->hdr.kind = IOO_AUX_PROC;
	rec->proc_kind = kind;
	rec->ts_ns = bpf_ktime_get_ns();
	rec->cgroup_id = bpf_get_current_cgroup_id();
	rec->uid = bpf_get_current_uid_gid();
	rec->ppid = 0;
	rec->ptid = 0;
	rec->exit_code = 0;
	rec->len = 0;
	bpf_get_current_comm(&rec->comm, sizeof(rec->comm));
	return rec;
}

static __always_inline void send_proc(struct ioo_proc_record *rec)
{
	u32 size = __builtin_offsetof(struct ioo_proc_record, data) + (rec->len & (IOO_EXEC_BYTES - 1));
	if (rec->len >= IOO_EXEC_BYTES)
		size = sizeof(*rec);
	rec->hdr.size = size;
	if (aux.ringbuf_output(rec, size, 0) != 0)
		count_lost(LOST_AUX_BASE + IOO_AUX_PROC);
}

/* The environment of a program just exec'd: its strings sit on the new stack, resident,
 * so a non-sleeping read gets them even from a process that exits a moment later. */
static __always_inline void send_env(void *mm, u64 ts_ns, u32 pid)
{
	u32 zero = 0;
	struct ioo_env_record *rec = env_scratch.lookup(&zero);
	if (!rec || !mm)
		return;
	u64 start = read_u64(mm, OFF_MM_STRUCT_ENV_START);
	u64 end = read_u64(mm, OFF_MM_STRUCT_ENV_END);
	u64 len = end > start ? end - start : 0;
	rec->flags = 0;
	if (len > IOO_ENV_BYTES - 1) {
		len = IOO_ENV_BYTES - 1;
		rec->flags = IOO_ENV_TRUNCATED;
	}
	len &= IOO_ENV_BYTES - 1;
	if (len == 0 || bpf_probe_read_user(rec->data, len, (void *)start) != 0)
		return;
	rec->hdr.kind = IOO_AUX_ENV;
	rec->ts_ns = ts_ns;
	rec->pid = pid;
	rec->len = len;
	u32 size = __builtin_offsetof(struct ioo_env_record, data) + len;
	rec->hdr.size = size;
	if (aux.ringbuf_output(rec, size, 0) != 0)
		count_lost(LOST_AUX_BASE + IOO_AUX_ENV);
}

/* args: (struct task_struct *parent, struct task_struct *child) */
int on_fork(struct bpf_raw_tracepoint_args *ctx)
{
	void *parent = (void *)ctx->args[0];
	void *child = (void *)ctx->args[1];
	u32 child_tgid = read_u32(child, OFF_TASK_TGID);
	u32 child_pid = read_u32(child, OFF_TASK_PID);
	if (child_tgid != child_pid)
		return 0;  /* a new thread: its events carry the process id already */
	struct ioo_config *cfg = get_config();
	u32 parent_tgid = read_u32(parent, OFF_TASK_TGID);
	if (!cfg || parent_tgid == cfg->self_tgid)
		return 0;
	if (cfg->filter_pid && traced_tgids.lookup(&parent_tgid)) {
		u8 one = 1;
		traced_tgids.update(&child_tgid, &one);
	}
	/* A forked child runs the parent's interpreter at the same addresses, from its first call. */
	struct ioo_py_proc *py = py_procs.lookup(&parent_tgid);
	if (py)
		py_procs.update(&child_tgid, py);
	if (!process_selected(cfg, parent_tgid))
		return 0;
	struct ioo_proc_record *rec = proc_record(IOO_PROC_FORK);
	if (!rec)
		return 0;
	rec->pid = child_tgid;
	rec->tid = child_pid;
	rec->ppid = parent_tgid;
	rec->ptid = read_u32(parent, OFF_TASK_PID);
	send_proc(rec);
	return 0;
}

/* args: (struct task_struct *task, pid_t old_pid, struct linux_binprm *bprm) */
int on_exec(struct bpf_raw_tracepoint_args *ctx)
{
	struct ioo_config *cfg = get_config();
	u64 pid_tgid = bpf_get_current_pid_tgid();
	u32 tgid = pid_tgid >> 32;
	void *task = (void *)ctx->args[0];
	void *bprm = (void *)ctx->args[2];
	void *mm = read_ptr(task, OFF_TASK_MM);
	py_procs.delete(&tgid);  /* a new program: its interpreter, if a known one, is placed anew */
	struct file_ident exe = {};
	s64 unused_pos;
	if (mm && inode_ident(file_inode_pos(read_ptr(bprm, OFF_LINUX_BINPRM_FILE), &unused_pos), &exe) == 0) {
		struct ioo_file_key key = {.ino = exe.ino, .dev = exe.dev};
		u32 *index = py_image_files.lookup(&key);
		if (index)
			place_python(tgid, *index, read_u64(mm, OFF_MM_STRUCT_START_CODE), 0);
	}
	if (!cfg || !process_selected(cfg, tgid))
		return 0;
	struct ioo_proc_record *rec = proc_record(IOO_PROC_EXEC);
	if (!rec)
		return 0;
	rec->pid = pid_tgid >> 32;
	rec->tid = pid_tgid;
	void *real_parent = read_ptr(task, OFF_TASK_REAL_PARENT);
	rec->ppid = real_parent ? read_u32(real_parent, OFF_TASK_TGID) : 0;
	int n = bpf_probe_read_kernel_str(rec->data, IOO_EXEC_BYTES / 2, read_ptr(bprm, OFF_LINUX_BINPRM_FILENAME));
	u32 off = n > 0 ? n : 0;
	if (mm && off < IOO_EXEC_BYTES / 2) {
		u64 start = read_u64(mm, OFF_MM_STRUCT_ARG_START);
		u64 end = read_u64(mm, OFF_MM_STRUCT_ARG_END);
		u64 len = end > start ? end - start : 0;
		if (len > IOO_EXEC_BYTES / 2 - 1)
			len = IOO_EXEC_BYTES / 2 - 1;
		if (bpf_probe_read_user(&rec->data[off], len, (void *)start) == 0)
			off += len;
	}
	rec->len = off;
	send_proc(rec);
	send_env(mm, rec->ts_ns, rec->pid);
	return 0;
}

/* args: (struct task_struct *task) */
int on_exit(struct bpf_raw_tracepoint_args *ctx)
{
	u64 pid_tgid = bpf_get_current_pid_tgid();
	u32 tid = pid_tgid;
	u32 tgid = pid_tgid >> 32;
	if (tid != tgid)
		return 0;
	struct ioo_config *cfg = get_config();
	if (cfg && process_selected(cfg, tgid)) {
		struct ioo_proc_record *rec = proc_record(IOO_PROC_EXIT);
		if (rec) {
			rec->pid = tgid;
			rec->tid = tid;
			rec->exit_code = read_u32((void *)ctx->args[0], OFF_TASK_EXIT_CODE);
			send_proc(rec);
		}
	}
	traced_tgids.delete(&tgid);
	own_tgids.delete(&tgid);  /* its pid may be reused by anyone */
	py_procs.delete(&tgid);
	return 0;
}

/* Block layer: a request from its first bio's submission to its completion. The bio is
 * submitted in the context of whoever caused it, so a traced syscall in flight on that
 * thread is its parent; writeback and async readahead come from kernel threads (no parent).
 * Bios merged into a request ride on it. */
#define REQ_OP_MASK_ 0xff
#define PF_KTHREAD_ 0x00200000
#define SECTOR_SHIFT_ 9

struct block_origin {
	u64 start_ts;
	u64 parent_ts;
	u64 cgroup_id;
	u32 dev;
	u32 pid;
	u32 tid;
	u32 uid;
	u32 kernel_thread;  /* submitted by a kernel thread: a write is writeback */
	u32 pad;
	char comm[IOO_COMM_LEN];
};

struct block_request {
	struct block_origin origin;
	u64 issue_ts;
	u64 sector;
	u32 bytes;
	u32 op;
};

BPF_TABLE("lru_hash", u64, struct block_origin, block_origins, 16384);  /* by request or bio */
BPF_TABLE("lru_hash", u64, struct block_request, block_requests, 16384);

/* Who submitted a request (or, before kernel 6.5, its first bio), from its context. */
static __always_inline void note_origin(u64 key, void *bdev)
{
	struct ioo_config *cfg = get_config();
	u64 pid_tgid = bpf_get_current_pid_tgid();
	if (!cfg || !process_selected(cfg, pid_tgid >> 32))
		return;
	struct block_origin origin = {};
	origin.start_ts = bpf_ktime_get_ns();
	struct inflight *st = inflight.task_storage_get(bpf_get_current_task_btf(), 0, 0);
	origin.parent_ts = syscall_as_parent(st);
	origin.cgroup_id = current_cgroup_id();
	origin.dev = bdev ? read_u32(bdev, OFF_BLOCK_DEVICE_BD_DEV) : 0;
	origin.pid = pid_tgid >> 32;
	origin.tid = pid_tgid;
	origin.uid = current_uid();
	origin.kernel_thread = (*(u32 *)((char *)bpf_get_current_task_btf() + OFF_TASK_FLAGS) & PF_KTHREAD_) != 0;
	current_comm(origin.comm);
	block_origins.update(&key, &origin);
}

static __always_inline void *request_bdev(u64 rq)
{
	void *bio = read_ptr((void *)rq, OFF_REQUEST_BIO);
	return bio ? read_ptr(bio, OFF_BIO_BI_BDEV) : NULL;
}

/* args: (struct request *rq); kernel 6.5 and later, in the submitter's context */
int on_block_io_start(struct bpf_raw_tracepoint_args *ctx)
{
	note_origin(ctx->args[0], request_bdev(ctx->args[0]));
	return 0;
}

/* args: (struct bio *bio); kernels before 6.5, in the submitter's context */
int on_block_bio_queue(struct bpf_raw_tracepoint_args *ctx)
{
	note_origin(ctx->args[0], read_ptr((void *)ctx->args[0], OFF_BIO_BI_BDEV));
	return 0;
}

/* args: (struct request *rq) */
int on_block_rq_issue(struct bpf_raw_tracepoint_args *ctx)
{
	u64 rq = ctx->args[0];
	u64 key = rq;
	struct block_origin *origin = block_origins.lookup(&key);
	if (!origin) {
		key = (u64)read_ptr((void *)rq, OFF_REQUEST_BIO);  /* noted by its first bio */
		origin = block_origins.lookup(&key);
	}
	if (!origin)
		return 0;  /* not submitted by a selected process */
	struct block_request req = {};
	req.origin = *origin;
	req.issue_ts = bpf_ktime_get_ns();
	req.sector = read_u64((void *)rq, OFF_REQUEST_SECTOR);
	req.bytes = read_u32((void *)rq, OFF_REQUEST_DATA_LEN);
	req.op = read_u32((void *)rq, OFF_REQUEST_CMD_FLAGS) & REQ_OP_MASK_;
	block_requests.update(&rq, &req);
	block_origins.delete(&key);
	return 0;
}

static __always_inline u16 block_op(u32 req_op)
{
	switch (req_op) {
	case 0: return IOO_OP_BLOCK_READ;
	case 1: return IOO_OP_BLOCK_WRITE;
	case 2: return IOO_OP_BLOCK_FLUSH;
	case 3: return IOO_OP_BLOCK_DISCARD;
	default: return IOO_OP_BLOCK_OTHER;
	}
}

/* args: (struct request *rq, blk_status_t error, unsigned int nr_bytes) */
int on_block_rq_complete(struct bpf_raw_tracepoint_args *ctx)
{
	u64 rq = ctx->args[0];
	struct block_request *req = block_requests.lookup(&rq);
	if (!req)
		return 0;
	u16 op = block_op(req->op);
	struct ioo_event *ev = events.ringbuf_reserve(sizeof(struct ioo_event));
	if (!ev) {
		count_lost(op);
		block_requests.delete(&rq);
		return 0;
	}
	u64 now = bpf_ktime_get_ns();
	ev->ts_ns = req->issue_ts;
	ev->dur_ns = now - req->issue_ts;
	ev->ret = ctx->args[1] ? -5 /* EIO */ : (s64)req->bytes;
	ev->bytes_req = req->bytes;
	ev->offset = (s64)(req->sector << SECTOR_SHIFT_);
	ev->ino = 0;
	ev->cgroup_id = req->origin.cgroup_id;
	ev->arg = req->issue_ts - req->origin.start_ts;
	ev->parent_ts = req->origin.parent_ts;
	ev->py_chain = 0;
	ev->dev = req->origin.dev;
	ev->fd = -1;
	ev->pid = req->origin.pid;
	ev->tid = req->origin.tid;
	ev->uid = req->origin.uid;
	ev->op = op;
	ev->flags = IOO_F_BLOCK | (req->origin.parent_ts ? 0 : IOO_F_ASYNC) |
		    (req->origin.kernel_thread && op == IOO_OP_BLOCK_WRITE ? IOO_F_WRITEBACK : 0);
	__builtin_memcpy(ev->comm, req->origin.comm, IOO_COMM_LEN);
	events.ringbuf_submit(ev, BPF_RB_NO_WAKEUP);
	block_requests.delete(&rq);
	return 0;
}

/* Page cache: folios added to it and readahead, from the filemap and readahead tracepoints.
 * These are classic (not raw) tracepoints, read by the field offsets of their format files
 * (-DTP_<EVENT>_<FIELD>, ioobserve/probes/tracepoint_format.py): their raw arguments differ
 * from kernel to kernel, their formats say where each field is. A traced call in flight on
 * the thread tallies the pages (one event at its exit, see submit_cache); without one, a
 * page fault on a mapping or an untraced call brought them in: one event each, no parent. */
static __always_inline u64 tp_u64(void *ctx, int off)
{
	return off < 0 ? 0 : *(u64 *)((char *)ctx + off);
}

static __always_inline u32 tp_u32(void *ctx, int off)
{
	return off < 0 ? 0 : *(u32 *)((char *)ctx + off);
}

/* Whether a page cache change of (dev, ino) outside a traced call is to be reported. */
static __always_inline int cache_file_selected(struct ioo_config *cfg, u32 dev, u64 ino)
{
	if (excluded_devs.lookup(&dev))
		return 0;
	if (!cfg->filter_path)
		return 1;
	struct ioo_file_key key = {.ino = ino, .dev = dev};
	struct known_file *seen = known_files.lookup(&key);
	return seen && (seen->known & KNOWN_ADMITTED);
}

int on_filemap_add(void *ctx)
{
	struct ioo_config *cfg = get_config();
	u64 pid_tgid = bpf_get_current_pid_tgid();
	if (!cfg || !process_selected(cfg, pid_tgid >> 32))
		return 0;
	u64 ino = tp_u64(ctx, TP_FILEMAP_ADD_I_INO);
	u64 index = tp_u64(ctx, TP_FILEMAP_ADD_INDEX);
	u32 dev = tp_u32(ctx, TP_FILEMAP_ADD_S_DEV);
	u32 order = TP_FILEMAP_ADD_ORDER < 0 ? 0 : *((u8 *)ctx + (TP_FILEMAP_ADD_ORDER < 0 ? 0 : TP_FILEMAP_ADD_ORDER));
	u32 pages = 1U << (order & 31);
	u64 now = bpf_ktime_get_ns();
	struct inflight *st = inflight.task_storage_get(bpf_get_current_task_btf(), 0, 0);
	if (st && st->op) {
		if (!st->cache_pages) {
			st->cache_ts = now;
			st->cache_ino = ino;
			st->cache_dev = dev;
			st->cache_index = index;
		}
		st->cache_pages += pages;
		return 0;
	}
	if (cache_file_selected(cfg, dev, ino))
		submit_page_event(IOO_OP_CACHE_MISS, now, dev, ino, index, pages, pages, 0);
	return 0;
}

static __always_inline int on_readahead(void *ctx, u16 op)
{
	struct ioo_config *cfg = get_config();
	u64 pid_tgid = bpf_get_current_pid_tgid();
	if (!cfg || !process_selected(cfg, pid_tgid >> 32))
		return 0;
	u64 ino = tp_u64(ctx, TP_READAHEAD_I_INO);
	u32 dev = tp_u32(ctx, TP_READAHEAD_S_DEV);
	struct inflight *st = inflight.task_storage_get(bpf_get_current_task_btf(), 0, 0);
	u64 parent_ts = syscall_as_parent(st);
	if (!parent_ts && !cache_file_selected(cfg, dev, ino))
		return 0;
	u64 pages = tp_u64(ctx, TP_READAHEAD_REQ_COUNT);
	submit_page_event(op, bpf_ktime_get_ns(), dev, ino, tp_u64(ctx, TP_READAHEAD_INDEX), pages, pages, parent_ts);
	return 0;
}

int on_readahead_sync(void *ctx)
{
	return on_readahead(ctx, IOO_OP_READAHEAD);
}

int on_readahead_async(void *ctx)
{
	return on_readahead(ctx, IOO_OP_READAHEAD_ASYNC);
}

/* Library calls (libc's stdio and POSIX wrappers, HDF5, MPI-IO), from a uprobe at
 * each function's entry and one shared uretprobe. Each thread keeps a stack of its open
 * calls (task storage): an event's parent is the call below it, a syscall's the innermost.
 * A call made inside an open call of its own library is that library's internal business
 * (fflush calling write) and is not recorded. Returns find their frame by stack pointer, so
 * a frame whose return was never seen (longjmp, exceptions) is dropped by the next call or
 * return above it instead of mislinking what follows. */
#define GLIBC_FILE_FILENO 112  /* offsetof(struct _IO_FILE, _fileno), stable glibc LP64 ABI */

static __always_inline s32 stream_fd(u64 stream)
{
	s32 fd = -1;
	if (!stream || bpf_probe_read_user(&fd, sizeof(fd), (void *)(stream + GLIBC_FILE_FILENO)) < 0)
		return -1;
	return fd;
}

/* How many frames are still open given a stack pointer (frames lying under it have
 * returned unseen), stored as the thread's depth. Unrolled with constant indexes, which the
 * verifier checks once each; the result is read back from the map so that the verifier
 * goes on with one unknown depth rather than walking the rest of the program once per value. */
static __always_inline u32 live_depth(struct call_frames *fr, u64 sp)
{
	u32 depth = fr->depth;
	u32 live = 0;
#pragma unroll
	for (u32 i = MAX_FRAMES; i > 0; i--) {
		if (!live && i <= depth && fr->frames[i - 1].sp >= sp)
			live = i;
	}
	fr->depth = live;
	return *(volatile u32 *)&fr->depth;
}

/* python_stacks.bpf.c: the text of a Python str as a name record of the event at `ts`. */
static __always_inline void py_send_label(u64 str, u64 level, u64 ts);

static __always_inline int call_enter(struct pt_regs *ctx, u64 cookie)
{
	u16 op = cookie & IOO_COOKIE_OP;
	int find_and_load = cookie & IOO_COOKIE_FIND_AND_LOAD;
	struct ioo_config *cfg = get_config();
	u64 pid_tgid = bpf_get_current_pid_tgid();
	if (!cfg || !process_selected(cfg, pid_tgid >> 32))
		return 0;
	u32 key = op;
	struct ioo_call_spec *spec = call_specs.lookup(&key);
	struct call_frames *fr = call_frames.task_storage_get(bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!spec || !fr)
		return 0;
	u64 sp = PT_REGS_SP(ctx);
	if (find_and_load)
		sp -= RETURN_SP_ADJUST;  /* as the called function sees it: the return probe finds it so */
	u32 depth = live_depth(fr, sp);
	u64 parent_ts = 0;
	if (depth > 0) {
		struct call_frame *outer = frame_at(fr, depth);
		if (outer->library == spec->library && !(spec->flags & IOO_C_NESTS))
			return 0;
		parent_ts = outer->ts;
		outer->parent = 1;
	}
	if (depth >= MAX_FRAMES)
		return 0;
	struct call_frame *frame = frame_at(fr, depth + 1);
	frame->ts = bpf_ktime_get_ns();
	frame->sp = sp;
	/* Every register read the same way whatever the probe (the verifier refuses a load
	 * through a context pointer clang has moved by a chosen offset). */
	frame->args[0] = PT_REGS_PARM1(ctx);
	frame->args[1] = PT_REGS_PARM2(ctx);
	frame->args[2] = PT_REGS_PARM3(ctx);
	frame->args[3] = PT_REGS_PARM4(ctx);
	frame->args[4] = PT_REGS_PARM5(ctx);
	frame->args[5] = PT_REGS_PARM6(ctx);
	if (find_and_load) {
		/* _find_and_load(abs_name, import_) called as a method of importlib: the absolute
		 * name is the third argument; as the import op's (name, ..., level), level 0. */
		frame->args[0] = frame->args[2];
		frame->args[4] = 0;
	}
	frame->parent_ts = parent_ts;
	frame->op = op;
	frame->library = spec->library;
	frame->child_ino = 0;
	frame->child_dev = 0;
	frame->parent = 0;
	/* The handle as it is at entry: MPI_File_close resets the caller's by return. */
	u64 handle = 0;
	if (spec->handle_arg >= 0 && !(spec->flags & IOO_C_OUT_HANDLE)) {
		handle = frame->args[spec->handle_arg & (CALL_ARGS - 1)];
		if (spec->flags & IOO_C_HANDLE_PTR && bpf_probe_read_user(&handle, sizeof(handle), (void *)handle) < 0)
			handle = 0;
	}
	frame->handle = handle;
	/* The descriptor and its file as they are at entry: a close has removed them by return. */
	s32 fd = -1;
	if (spec->stream_arg >= 0)
		fd = stream_fd(frame->args[spec->stream_arg & (CALL_ARGS - 1)]);
	else if (spec->fd_arg >= 0)
		fd = frame->args[spec->fd_arg & (CALL_ARGS - 1)];
	frame->fd = fd;
	frame->file = (u64)fd_file(fd);
	fr->depth = depth + 1;
	return 0;
}

/* The file a returning call names: (dev, ino) if it is traced; 0 if a filter rejects it. */
static __always_inline int call_file(struct ioo_config *cfg, struct ioo_call_spec *spec, struct call_frame *frame,
				     s64 ret, struct file_ident *id, s32 *fd)
{
	s64 unused_pos;
	void *file = (void *)frame->file;
	if (spec->flags & IOO_C_RET_STREAM) {
		*fd = stream_fd(ret);
		file = fd_file(*fd);
	} else if (spec->flags & IOO_C_RET_FD) {
		*fd = ret;
		file = fd_file(ret);
	}
	if (file) {
		if (frame->op == IOO_OP_FCLOSE || frame->op == IOO_OP_POSIX_CLOSE) {
			/* Closed by now: only the verdict cached while it was open can be trusted. */
			u64 addr = (u64)file;
			struct file_verdict *cached = file_cache.lookup(&addr);
			if (!cached || !cached->traced)
				return 0;
			id->ino = cached->ino;
			id->dev = cached->dev;
			return 1;
		}
		return file_traced(file, id, &unused_pos);
	}
	if (spec->stat_arg >= 0 && ret == 0) {
		u64 buf = frame->args[spec->stat_arg & (CALL_ARGS - 1)];
		u64 dev = 0;
		bpf_probe_read_user(&dev, sizeof(dev), (void *)buf);
		bpf_probe_read_user(&id->ino, sizeof(id->ino), (void *)(buf + 8));
		id->dev = kernel_dev_from_user(dev);
		return cache_file_selected(cfg, id->dev, id->ino);
	}
	/* A library handle names the file it was opened on; else the first file touched below. */
	if (frame->handle) {
		struct handle_key key = {.handle = frame->handle, .tgid = bpf_get_current_pid_tgid() >> 32,
					 .library = frame->library};
		struct file_ident *known = handles.lookup(&key);
		if (known) {
			*id = *known;
			return 1;
		}
	}
	if (spec->flags & IOO_C_KNOWN_HANDLE)
		return 0;
	if (frame->child_ino) {
		id->ino = frame->child_ino;
		id->dev = frame->child_dev;
		return 1;
	}
	if (spec->flags & IOO_C_NEEDS_IO)
		return 0;
	/* No file (a failed open, a bad descriptor, nothing touched): kept unless a path filter is on. */
	return cfg->filter_path ? 0 : 2;
}

/* After a call on a file returned: remember the handle it opened, forget the one it closed. */
static __always_inline void track_handles(struct ioo_call_spec *spec, struct call_frame *frame, s64 ret,
					  struct file_ident *id, int has_file)
{
	struct handle_key key = {.tgid = bpf_get_current_pid_tgid() >> 32, .library = frame->library};
	if (spec->flags & IOO_C_CLOSE_HANDLE && frame->handle && ret == 0) {
		key.handle = frame->handle;
		handles.delete(&key);
		return;
	}
	if (has_file != 1)
		return;
	if (spec->flags & IOO_C_RET_HANDLE && ret >= 0)
		key.handle = ret;  /* hid_t: negative on failure */
	else if (spec->flags & IOO_C_OUT_HANDLE && ret == 0)  /* MPI_SUCCESS */
		bpf_probe_read_user(&key.handle, sizeof(key.handle), (void *)frame->args[spec->handle_arg & (CALL_ARGS - 1)]);
	if (key.handle)
		handles.update(&key, id);
}

static __always_inline int call_return(struct pt_regs *ctx)
{
	struct call_frames *fr = call_frames.task_storage_get(bpf_get_current_task_btf(), 0, 0);
	if (!fr)
		return 0;
	u64 entry_sp = PT_REGS_SP(ctx) - RETURN_SP_ADJUST;  /* the stack pointer the call was entered with */
	u32 depth = live_depth(fr, entry_sp);
	if (depth == 0)
		return 0;
	struct call_frame frame = *frame_at(fr, depth);
	if (frame.sp != entry_sp)
		return 0;  /* the return of an internal call, whose frame was never pushed */
	fr->depth = depth - 1;
	u32 key = frame.op;
	struct ioo_call_spec *spec = call_specs.lookup(&key);
	struct ioo_config *cfg = get_config();
	if (!spec || !cfg)
		return 0;
	s64 ret = PT_REGS_RC(ctx);
	if (spec->flags & IOO_C_RET_INT)
		ret = (s32)ret;
	struct file_ident id = {};
	s32 fd = frame.fd;
	int has_file = call_file(cfg, spec, &frame, ret, &id, &fd);
	if (!has_file)
		return 0;
	track_handles(spec, &frame, ret, &id, has_file);
	if (has_file == 1 && depth > 1) {
		struct call_frame *outer = frame_at(fr, depth - 1);
		if (!outer->child_ino) {
			outer->child_ino = id.ino;
			outer->child_dev = id.dev;
		}
	}
	if (spec->flags & IOO_C_RET_STREAM)
		ret = ret ? fd : -1;  /* the new stream's descriptor: its address means nothing later */
	if (spec->flags & IOO_C_RET_OBJECT)
		ret = ret != 0;
	u64 count = spec->count_arg >= 0 ? frame.args[spec->count_arg & (CALL_ARGS - 1)] : 0;
	if (spec->size_arg >= 0) {
		u64 size = frame.args[spec->size_arg & (CALL_ARGS - 1)];
		if (spec->flags & IOO_C_MPI_TYPE)  /* MPICH builtin: kind 01 in bits 30-31, size in bits 8-15 */
			size = (size >> 30) == 1 ? (size >> 8) & 0xff : 0;
		count *= size;
		if (ret > 0 && spec->flags & IOO_C_RET_ITEMS)
			ret *= size;  /* items to bytes */
	}
	struct ioo_event *ev = events.ringbuf_reserve(sizeof(struct ioo_event));
	if (!ev) {
		count_lost(frame.op);
		return 0;
	}
	ev->ts_ns = frame.ts;
	ev->dur_ns = bpf_ktime_get_ns() - frame.ts;
	ev->ret = ret;
	ev->bytes_req = count;
	ev->offset = spec->offset_arg >= 0 ? (s64)frame.args[spec->offset_arg & (CALL_ARGS - 1)] : -1;
	ev->ino = has_file == 1 ? id.ino : 0;
	ev->dev = has_file == 1 ? id.dev : 0;
	ev->arg = spec->aux_arg >= 0 ? frame.args[spec->aux_arg & (CALL_ARGS - 1)] : 0;
	ev->parent_ts = frame.parent_ts;
	ev->py_chain = 0;
	ev->fd = fd;
	ev->op = frame.op;
	ev->flags = (has_file == 1 ? IOO_F_FILE : 0) | (frame.parent ? IOO_F_PARENT : 0);
	event_task(ev);
	events.ringbuf_submit(ev, BPF_RB_NO_WAKEUP);
	if (spec->flags & IOO_C_PY_NAME)
		py_send_label(frame.args[0], frame.args[4], frame.ts);  /* (name, ..., level) */
	return 0;
}

/* Attached through uprobe_multi links (kernel 6.6+): one link per library file for every
 * entry, its cookie the op (IOO_COOKIE_*), and one for every return. */
int on_call_enter_multi(struct pt_regs *ctx)
{
	u64 cookie = bpf_get_attach_cookie(ctx);
	if (cookie & IOO_COOKIE_RETURN)
		return call_return(ctx);
	return call_enter(ctx, cookie);
}

int on_call_return_multi(struct pt_regs *ctx)
{
	return call_return(ctx);
}

/* Attached one perf event each where uprobe_multi is missing: the op is the entry program's
 * constant, as those carry no cookie here. */
int on_call_return(struct pt_regs *ctx)
{
	return call_return(ctx);
}

#define CALL_ENTRY(name, op) int enter_##name(struct pt_regs *ctx) { return call_enter(ctx, op); }
/* One per op of ioobserve/probes/call_table.py, which lists them; the loader passes the list
 * in as -DIOO_CALL_ENTRIES. */
IOO_CALL_ENTRIES
/* The import probe at _find_and_load's call, where uprobe_multi (and its cookies) is missing. */
int enter_py_import_find_and_load(struct pt_regs *ctx) { return call_enter(ctx, IOO_OP_PY_IMPORT | IOO_COOKIE_FIND_AND_LOAD); }

/* The VFS (opt-in, kprobes where the kernel has them): vfs_read, vfs_write, vfs_open and
 * vfs_fsync_range, the file operations every syscall path and in-kernel reader (nfsd,
 * loop devices, overlayfs) goes through. A call's parent is the syscall in flight on the
 * thread. One slot per thread: these do not nest on the paths that matter. */
struct vfs_call {
	u64 ts;
	u64 file;
	u64 count;
	s64 offset;
	u16 op;
	u16 pad[3];
};

BPF_TASK_STORAGE(vfs_calls, struct vfs_call);

static __always_inline int vfs_enter(struct pt_regs *ctx, u16 op, u64 file, u64 count, s64 offset)
{
	struct ioo_config *cfg = get_config();
	u64 pid_tgid = bpf_get_current_pid_tgid();
	if (!cfg || !process_selected(cfg, pid_tgid >> 32))
		return 0;
	struct vfs_call *call = vfs_calls.task_storage_get(bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!call)
		return 0;
	call->ts = bpf_ktime_get_ns();
	call->file = file;
	call->count = count;
	call->offset = offset;
	call->op = op;
	return 0;
}

/* (struct file *, char __user *, size_t, loff_t *) */
int vfs_enter_read(struct pt_regs *ctx)
{
	s64 pos = -1;
	bpf_probe_read_kernel(&pos, sizeof(pos), (void *)PT_REGS_PARM4(ctx));
	return vfs_enter(ctx, IOO_OP_VFS_READ, PT_REGS_PARM1(ctx), PT_REGS_PARM3(ctx), pos);
}

/* (struct file *, const char __user *, size_t, loff_t *) */
int vfs_enter_write(struct pt_regs *ctx)
{
	s64 pos = -1;
	bpf_probe_read_kernel(&pos, sizeof(pos), (void *)PT_REGS_PARM4(ctx));
	return vfs_enter(ctx, IOO_OP_VFS_WRITE, PT_REGS_PARM1(ctx), PT_REGS_PARM3(ctx), pos);
}

/* (const struct path *, struct file *): the file is whole only at return */
int vfs_enter_open(struct pt_regs *ctx)
{
	return vfs_enter(ctx, IOO_OP_VFS_OPEN, PT_REGS_PARM2(ctx), 0, -1);
}

/* (struct file *, loff_t start, loff_t end, int datasync) */
int vfs_enter_fsync(struct pt_regs *ctx)
{
	return vfs_enter(ctx, IOO_OP_VFS_FSYNC, PT_REGS_PARM1(ctx), PT_REGS_PARM3(ctx) - PT_REGS_PARM2(ctx), PT_REGS_PARM2(ctx));
}

int vfs_return(struct pt_regs *ctx)
{
	struct vfs_call *stored = vfs_calls.task_storage_get(bpf_get_current_task_btf(), 0, 0);
	if (!stored || !stored->op)
		return 0;
	struct vfs_call call = *stored;
	stored->op = 0;
	struct file_ident id = {};
	s64 unused_pos;
	if (!call.file || !file_traced((void *)call.file, &id, &unused_pos))
		return 0;
	struct inflight *st = inflight.task_storage_get(bpf_get_current_task_btf(), 0, 0);
	struct ioo_event *ev = events.ringbuf_reserve(sizeof(struct ioo_event));
	if (!ev) {
		count_lost(call.op);
		return 0;
	}
	ev->ts_ns = call.ts;
	ev->dur_ns = bpf_ktime_get_ns() - call.ts;
	ev->ret = PT_REGS_RC(ctx);
	ev->bytes_req = call.count;
	ev->offset = call.offset;
	ev->ino = id.ino;
	ev->dev = id.dev;
	ev->arg = 0;
	ev->parent_ts = syscall_as_parent(st);
	ev->py_chain = 0;
	ev->fd = -1;
	ev->op = call.op;
	ev->flags = IOO_F_FILE;
	event_task(ev);
	events.ringbuf_submit(ev, BPF_RB_NO_WAKEUP);
	return 0;
}
