/* The Python layer: the Python frames a traced syscall was made from.
 *
 * When a process user space found running CPython (`py_procs`) makes a traced syscall,
 * py_walk (tail-called by the syscall layer's enter program) finds the thread's PyThreadState by its native
 * thread id (the thread released the GIL before the syscall, so "the GIL holder" would be
 * another thread), walks up to `depth` frames and stores the chain's hash in the inflight
 * record; on_sys_exit puts it in the event. A chain is sent once (IOO_AUX_PY_CHAIN), and
 * each of its code objects once per process (IOO_AUX_PY_CODE, from py_codes), so user space
 * names frames of processes that have already exited. Never a probe on the eval loop: the
 * walk costs only on traced I/O.
 *
 * Compiled last (ioobserve/probes/load/loader.py's SOURCES): it uses core.bpf.c's inflight,
 * py_calls, aux and py_procs.
 */

#define PY_CHUNK 128            /* bytes of a frame read at once: every field the walk uses lies in it */
#define PY_WINDOW 4096          /* bytes of a thread's frame stack read at once (3.11+) */
#define PY_WINDOW_BUF 8192      /* room for a window, or for one page read up to a frame's chunk */
#define PY_ALONE_AT (PY_WINDOW_BUF - PY_CHUNK)  /* where a frame outside the window is read */
#define PY_TSTATE_CHUNK 256     /* bytes of a thread state holding its native id and frame pointer */
#define PY_PAGE 4096ULL
#define PY_ARGS 3
#define PY_WALK_STEPS 8     /* frames walked per program run (py_frames tail-calls itself) */
#define PY_MAX_INTERPRETERS 4
#define PY_MAX_THREADS 128
#define PY_ARGCOUNT_SLOTS 1024  /* code objects whose argument count is remembered */
#define PY_LABEL_DOTS 7     /* at most this many dots of a relative import's level in its label */

struct py_thread {
	u64 tstate;    /* this thread's PyThreadState, once found */
	u64 stack_lo;  /* the lowest address of its frame stack the last window read (mapped then) */
	u32 tgid;      /* ... in this process (a thread's storage outlives an exec) */
	u32 calls;     /* traced calls so far, for sampling */
};

/* A code object as sent: its address in a process, and what it names (a code object freed
 * at startup, site.py's module code say, leaves its address to a later function's). */
struct py_code_key {
	u64 code;
	u32 tgid;
	u32 names;  /* hash of its qualname and filename objects' addresses */
};

/* A code object's argument count, remembered: one user-memory read less per frame (a read
 * costs ~0.1 µs here; a slot whose code moved on is read again). */
struct py_argcount {
	u64 code;
	u32 tgid;
	s32 argcount;
};

/* The walk in progress on this CPU, carried across py_walk's tail calls. */
struct py_scratch {
	u64 win_lo;     /* the thread's frame stack as read into py_window: [win_lo, win_hi) */
	u64 win_hi;
	u64 frame;      /* the next frame to read (0: none left) */
	u64 hash;       /* the chain's hash so far */
	u64 ts;         /* the syscall's entry time: the inflight record to give the chain to */
	u32 max_depth;
	u32 layout;     /* the process's py_layouts index (py_frames needs no py_procs lookup) */
	u8 tstate[PY_TSTATE_CHUNK];  /* the fields of the thread state the walk reads, read at once */
	struct ioo_py_chain_record chain;
};

BPF_ARRAY(py_layouts, struct ioo_py_layout, IOO_PY_LAYOUTS);
BPF_TASK_STORAGE(py_threads, struct py_thread);
BPF_TABLE("lru_hash", u64, u8, py_chains_seen, 65536);
BPF_TABLE("lru_hash", struct py_code_key, u8, py_codes_seen, 65536);
BPF_PERCPU_ARRAY(py_scratch, struct py_scratch, 1);
/* 3.11+ keeps a thread's frames side by side in its data stack, each caller below its callee:
 * one read of the few KiB under the innermost frame holds most of a walk's frames (a read
 * costs ~0.1 µs here, whatever its size up to a few KiB). Frames outside it are read one by
 * one into its start. */
struct py_window {
	u8 bytes[PY_WINDOW_BUF];
};
BPF_PERCPU_ARRAY(py_window, struct py_window, 1);
/* Shared by the CPUs: py_codes corrects a slot when a new code object takes an address a
 * freed one had (a stale count would make every call of the new function look alike). */
BPF_ARRAY(py_argcounts, struct py_argcount, PY_ARGCOUNT_SLOTS);
BPF_PERCPU_ARRAY(py_code_scratch, struct ioo_py_code_record, 1);

static __always_inline u32 py_argcount_slot(u64 code)
{
	return ((code >> 4) ^ (code >> 14)) & (PY_ARGCOUNT_SLOTS - 1);
}

static __always_inline u64 py_mix(u64 hash, u64 value)
{
	hash ^= value;
	hash *= 0x9e3779b97f4a7c15ULL;
	return hash ^ (hash >> 31);
}

static __always_inline u64 user_u64(u64 addr)
{
	u64 value = 0;
	bpf_probe_read_user(&value, sizeof(value), (void *)addr);
	return value;
}

/* A field of a frame at `at` in the window, at a layout offset; the masks bound it for the
 * verifier and are applied in asm, where clang cannot drop them. */
static __always_inline u64 frame_u64(u8 *window, u64 at, u32 off)
{
	u64 index = at + (off & (PY_CHUNK - 1));
	asm volatile("%0 &= 0x1ff8" : "+r"(index));  /* 8-aligned, below PY_WINDOW_BUF */
	return *(u64 *)(window + index);
}

static __always_inline u32 frame_u32(u8 *window, u64 at, u32 off)
{
	u64 index = at + (off & (PY_CHUNK - 1));
	asm volatile("%0 &= 0x1ffc" : "+r"(index));
	return *(u32 *)(window + index);
}

static __always_inline u8 frame_u8(u8 *window, u64 at, u32 off)
{
	u64 index = at + (off & (PY_CHUNK - 1));
	asm volatile("%0 &= 0x1fff" : "+r"(index));
	return window[index];
}

/* Read the thread's frame stack under its innermost frame (3.11+) into the window: from
 * where the last window of this thread began, if that lies under the frame and near it (it
 * was mapped then), else PY_WINDOW under it; failing that (the data stack begins nearer),
 * from the frame's own page. Records in scratch what the window holds (nothing: no window). */
static __always_inline void py_read_window(struct py_scratch *scratch, struct py_thread *thread, u64 frame)
{
	u32 zero = 0;
	struct py_window *window = py_window.lookup(&zero);
	scratch->win_lo = scratch->win_hi = 0;
	if (!window)
		return;
	u64 hi = frame + PY_CHUNK;
	u64 lo = hi - PY_WINDOW;
	if (thread->stack_lo > lo && thread->stack_lo <= frame)
		lo = thread->stack_lo;
	u64 size = hi - lo;
	asm volatile("%0 &= 0x1fff" : "+r"(size));  /* at most PY_WINDOW here: bounded for the verifier */
	if (bpf_probe_read_user(window->bytes, size, (void *)lo)) {
		lo = frame & ~(PY_PAGE - 1);
		size = hi - lo;
		asm volatile("%0 &= 0x1fff" : "+r"(size));  /* below PY_PAGE + PY_CHUNK */
		if (bpf_probe_read_user(window->bytes, size, (void *)lo))
			return;
	}
	thread->stack_lo = lo;
	scratch->win_lo = lo;
	scratch->win_hi = hi;
}

/* A field of the thread state chunk read at `base` (see py_frame_field). */
static __always_inline u64 tstate_u64(struct py_scratch *scratch, u32 off, u32 base)
{
	u64 index = off - base;
	asm volatile("%0 &= 0xf8" : "+r"(index));  /* 8-aligned, below PY_TSTATE_CHUNK */
	return *(u64 *)(scratch->tstate + index);
}

/* The calling thread's frame field (its current frame, or the _PyCFrame holding it): through
 * the thread state remembered for it, read with its native id at once while that still
 * matches; else the thread state is found again by walking every interpreter's thread list. */
static __always_inline u64 py_frame_field(struct py_scratch *scratch, struct ioo_py_proc *proc,
					  struct ioo_py_layout *lay, struct py_thread *thread, u32 tgid)
{
	if (lay->tstate_native_id == IOO_PY_NO_FIELD)
		return 0;
	/* 3.10 keeps no native id, only pthread_self(): the thread pointer (none off x86_64). */
	u64 native = (lay->flags & IOO_PY_PTHREAD_ID) ? current_thread_pointer() : current_ns_tid();
	if (!native)
		return 0;
	u32 id_at = lay->tstate_native_id, frame_at = lay->tstate_frame;
	u32 base = id_at < frame_at ? id_at : frame_at;
	u32 end = (id_at < frame_at ? frame_at : id_at) + 8;
	if (thread->tgid == tgid && thread->tstate && end - base <= PY_TSTATE_CHUNK &&
	    !bpf_probe_read_user(scratch->tstate, PY_TSTATE_CHUNK, (void *)(thread->tstate + base)) &&
	    tstate_u64(scratch, id_at, base) == native)
		return tstate_u64(scratch, frame_at, base);
	if (thread->tgid == tgid && thread->tstate && user_u64(thread->tstate + id_at) == native)
		return user_u64(thread->tstate + frame_at);  /* fields too far apart to read at once */
	u64 interp = user_u64(proc->runtime + lay->runtime_interpreters);
	for (int i = 0; i < PY_MAX_INTERPRETERS && interp; i++) {
		u64 tstate = user_u64(interp + lay->interp_threads);
		for (int j = 0; j < PY_MAX_THREADS && tstate; j++) {
			if (user_u64(tstate + id_at) == native) {
				thread->tstate = tstate;
				thread->tgid = tgid;
				return user_u64(tstate + frame_at);
			}
			tstate = user_u64(tstate + lay->tstate_next);
		}
		interp = user_u64(interp + lay->interp_next);
	}
	return 0;
}

/* The layout of the interpreter process `tgid` runs (NULL if none), and its entry. */
static __always_inline struct ioo_py_layout *py_layout_of(u32 tgid, struct ioo_py_proc **proc_out)
{
	struct ioo_py_proc *proc = py_procs.lookup(&tgid);
	if (!proc)
		return NULL;
	u32 layout = proc->layout;
	*proc_out = proc;
	return py_layouts.lookup(&layout);
}

/* Record the chain walked in the syscall's inflight record and send it if it is new; then
 * py_codes sends the code objects new to the process. */
static __always_inline int py_chain_done(struct bpf_raw_tracepoint_args *ctx, struct py_scratch *scratch, u32 tgid)
{
	struct ioo_py_chain_record *rec = &scratch->chain;
	struct inflight *st = inflight.task_storage_get(bpf_get_current_task_btf(), 0, 0);
	if (!rec->depth || !st || st->ts != scratch->ts)
		return 0;
	/* The chain's id leaves the top bits of an event's py_chain to its shared levels. */
	u64 chain = scratch->hash & IOO_PY_CHAIN_MASK;
	if (!chain)
		chain = 1;
	st->py_chain = chain;
	struct py_calls *calls = py_calls.task_storage_get(bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (calls) {
		u32 depth = rec->depth;
		for (u32 i = 0; i < IOO_PY_MAX_FRAMES; i++) {
			LOOP_INDEX(i);
			if (i >= depth)
				break;
			calls->walked[py_slot(i)] = rec->frames[py_slot(i)].instance;
		}
		/* A walk cut at the depth asked has no outermost frame to count levels from: no
		 * calls to compare (its event says 0 shared, and is not compared with). */
		calls->depth = scratch->frame ? 0 : depth;
		calls->ts = st->ts;
	}
	/* The thread's last stack again (a loop's calls): known to have been sent, no lookup. */
	if (calls && calls->last_chain == chain)
		return 0;
	if (py_chains_seen.lookup(&chain)) {
		if (calls)
			calls->last_chain = chain;
		return 0;
	}
	rec->hdr.kind = IOO_AUX_PY_CHAIN;
	rec->chain = chain;
	rec->pid = tgid;
	rec->flags = scratch->frame ? IOO_PY_TRUNCATED : 0;
	/* Only the frames walked: a chain is sent for most new stacks, and most are shallow. */
	u64 size = __builtin_offsetof(struct ioo_py_chain_record, frames) + (u64)(rec->depth & 0x3f) * sizeof(struct ioo_py_frame);
	asm volatile("" : "+r"(size));
	if (size > sizeof(*rec))
		size = sizeof(*rec);
	rec->hdr.size = size;
	if (aux.ringbuf_output(rec, size, 0)) {
		count_lost(LOST_AUX_BASE + IOO_AUX_PY_CHAIN);
		return 0;
	}
	u8 one = 1;
	py_chains_seen.update(&chain, &one);
	py_programs.call(ctx, PY_PROG_CODES);
	return 0;
}

/* Walk up to PY_WALK_STEPS frames from scratch->frame (py_walk's first steps, py_frames'
 * later ones), then tail-call py_frames for more (the verifier checks a short loop quickly;
 * a long one, not at all) or finish the chain. */
static __always_inline int py_walk_steps(struct bpf_raw_tracepoint_args *ctx, struct py_scratch *scratch,
					 struct ioo_py_layout *lay, u32 tgid)
{
	u32 zero = 0;
	struct py_window *window = py_window.lookup(&zero);
	if (!window)
		return 0;
	struct ioo_py_chain_record *rec = &scratch->chain;
	u8 *bytes = window->bytes;
	u64 win_lo = scratch->win_lo, win_hi = scratch->win_hi;
	u64 frame = scratch->frame;
	u64 chain = scratch->hash;
	u32 depth = rec->depth;
	u32 max_depth = scratch->max_depth;
	for (int i = 0; i < PY_WALK_STEPS; i++) {
		LOOP_INDEX(i);
		if (!frame || depth >= max_depth)
			break;
		u64 at = frame - win_lo;
		if (frame < win_lo || frame + PY_CHUNK > win_hi) {
			/* outside the window (3.10's frames, a generator's, one deeper than it): alone */
			at = PY_ALONE_AT;
			if (bpf_probe_read_user(bytes + PY_ALONE_AT, PY_CHUNK, (void *)frame)) {
				frame = 0;
				break;
			}
		}
		/* 3.14+ tags the code reference (a _PyStackRef) in its low bits; objects are 8-aligned */
		u64 code = frame_u64(bytes, at, lay->frame_code) & ~7ULL;
		u64 previous = frame_u64(bytes, at, lay->frame_previous);
		if (lay->frame_owner != IOO_PY_NO_FIELD && frame_u8(bytes, at, lay->frame_owner) >= lay->owner_shim) {
			frame = previous;  /* a shim frame of a C call into Python: no code of its own */
			continue;
		}
		if (!code) {
			frame = 0;
			break;
		}
		u32 instr;
		if (lay->flags & IOO_PY_LASTI) {
			instr = frame_u32(bytes, at, lay->frame_instr);
		} else {
			u64 first = code + lay->code_adaptive;
			/* free-threaded 3.14+: a thread may run its own copy of the bytecode, entry
			 * tlbc_index of co_tlbc (entry 0 is co_code_adaptive itself) */
			u32 copy = lay->frame_tlbc_index != IOO_PY_NO_FIELD ? frame_u32(bytes, at, lay->frame_tlbc_index) : 0;
			if (copy) {
				u64 copies = user_u64(code + lay->code_tlbc);
				first = copies ? user_u64(copies + 8 + 8 * (u64)(copy & 0xffff)) : first;
			}
			instr = (frame_u64(bytes, at, lay->frame_instr) - first) / 2;
		}
		/* A call is its frame plus its first arguments: a loop calling the same function
		 * from one line reuses the frame's address, not (usually) its arguments. */
		u32 slot = py_argcount_slot(code);
		struct py_argcount *known = py_argcounts.lookup(&slot);
		s32 argcount = 0;
		if (known && known->code == code && known->tgid == tgid) {
			argcount = known->argcount;
		} else {
			bpf_probe_read_user(&argcount, sizeof(argcount), (void *)(code + lay->code_argcount));
			if (known) {
				known->code = code;
				known->tgid = tgid;
				known->argcount = argcount;
			}
		}
		u64 args[PY_ARGS] = {};
		if (argcount > 0 && lay->frame_localsplus + 8 * PY_ARGS <= PY_CHUNK) {
			/* 3.11+: the first locals lie in the frame's chunk read already */
			args[0] = frame_u64(bytes, at, lay->frame_localsplus);
			args[1] = frame_u64(bytes, at, lay->frame_localsplus + 8);
			args[2] = frame_u64(bytes, at, lay->frame_localsplus + 16);
		} else if (argcount > 0) {
			bpf_probe_read_user(args, sizeof(args), (void *)(frame + lay->frame_localsplus));
		}
		u64 instance = py_mix(frame, argcount > 0 ? args[0] : 0);
		instance = py_mix(instance, argcount > 1 ? args[1] : 0);
		instance = py_mix(instance, argcount > 2 ? args[2] : 0);
		struct ioo_py_frame *out = &rec->frames[depth & (IOO_PY_MAX_FRAMES - 1)];
		out->code = code;
		out->instance = instance;
		out->instr = instr;
		/* the chain is the code and line of each frame: which call it is goes in py_calls */
		chain = py_mix(py_mix(chain, code), instr);
		depth++;
		frame = previous;
	}
	scratch->frame = frame;
	scratch->hash = chain;
	rec->depth = depth;
	if (frame && depth < max_depth)
		py_programs.call(ctx, PY_PROG_FRAMES);
	return py_chain_done(ctx, scratch, tgid);
}

/* py_walk: tail-called by the enter program (on_sys_enter or on_sys_enter_raw) once a traced syscall's inflight record is written,
 * to take the chain. Finds the thread's current frame, reads the frame stack under it and
 * walks its first frames. */
int py_walk(struct bpf_raw_tracepoint_args *ctx)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct ioo_py_proc *proc = py_procs.lookup(&tgid);
	if (!proc)
		return 0;
	u32 layout = proc->layout;
	struct ioo_py_layout *lay = py_layouts.lookup(&layout);
	struct inflight *st = inflight.task_storage_get(bpf_get_current_task_btf(), 0, 0);
	struct py_thread *thread = py_threads.task_storage_get(bpf_get_current_task_btf(), 0,
								BPF_LOCAL_STORAGE_GET_F_CREATE);
	u32 zero = 0;
	struct py_scratch *scratch = py_scratch.lookup(&zero);
	if (!lay || !st || !st->op || !thread || !scratch)
		return 0;
	/* Inside an import the walk would add only importlib's frames to what the import's own
	 * event says (the module): an import storm's thousands of calls walk none. */
	if ((st->have & HAVE_IN_IMPORT) && !(proc->flags & IOO_PY_PROC_WALK_IMPORTS))
		return 0;
	if (proc->sample > 1 && thread->calls++ % proc->sample)
		return 0;
	u64 frame = py_frame_field(scratch, proc, lay, thread, tgid);
	if (lay->cframe_frame != IOO_PY_NO_FIELD && frame)
		frame = user_u64(frame + lay->cframe_frame);
	if (!frame)
		return 0;
	if (lay->flags & IOO_PY_LASTI)
		scratch->win_lo = scratch->win_hi = 0;  /* 3.10: frames are heap objects, each read alone */
	else
		py_read_window(scratch, thread, frame);
	scratch->frame = frame;
	scratch->hash = py_mix(0x10b5, tgid);
	scratch->max_depth = proc->depth < IOO_PY_MAX_FRAMES ? proc->depth : IOO_PY_MAX_FRAMES;
	scratch->layout = layout;
	scratch->chain.depth = 0;
	scratch->ts = st->ts;
	return py_walk_steps(ctx, scratch, lay, tgid);
}

/* py_frames: the walk's next steps, tail-called while frames are left. */
int py_frames(struct bpf_raw_tracepoint_args *ctx)
{
	u32 zero = 0;
	struct py_scratch *scratch = py_scratch.lookup(&zero);
	if (!scratch)
		return 0;
	u32 layout = scratch->layout;
	struct ioo_py_layout *lay = py_layouts.lookup(&layout);
	if (!lay)
		return 0;
	return py_walk_steps(ctx, scratch, lay, bpf_get_current_pid_tgid() >> 32);
}

/* `bytes` of a str object's characters into `out`; returns the count and sets `kind`. */
static __always_inline u32 py_string(struct ioo_py_layout *lay, u64 str, char *out, u32 limit, u8 *kind)
{
	u64 length = 0;
	u32 state = 0;
	if (!str || bpf_probe_read_user(&length, sizeof(length), (void *)(str + lay->unicode_length)) ||
	    bpf_probe_read_user(&state, sizeof(state), (void *)(str + lay->unicode_state)))
		return 0;
	u32 char_kind = (state & lay->unicode_kind_mask) >> lay->unicode_kind_shift;
	if (char_kind != 1 && char_kind != 2 && char_kind != 4)
		return 0;
	u64 data = str + ((state & lay->unicode_ascii_mask) ? lay->unicode_ascii_data : lay->unicode_compact_data);
	u64 bytes = length * char_kind;
	if (bytes > limit)
		bytes = limit;
	bytes &= 0xfff;
	if (bytes > limit || bpf_probe_read_user(out, bytes, (void *)data))
		return 0;
	*kind = char_kind;
	return bytes;
}

/* py_codes: tail-called by py_walk after a new chain; sends the code objects not yet sent
 * for this process. */
int py_codes(struct bpf_raw_tracepoint_args *ctx)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct ioo_py_proc *proc = NULL;
	struct ioo_py_layout *lay = py_layout_of(tgid, &proc);
	u32 zero = 0;
	struct py_scratch *scratch = py_scratch.lookup(&zero);
	struct ioo_py_code_record *rec = py_code_scratch.lookup(&zero);
	if (!lay || !scratch || !rec)
		return 0;
	u32 depth = scratch->chain.depth;
	u8 one = 1;
	for (int i = 0; i < IOO_PY_MAX_FRAMES; i++) {
		LOOP_INDEX(i);
		if (i >= depth)
			break;
		u64 code = scratch->chain.frames[i & (IOO_PY_MAX_FRAMES - 1)].code;
		u64 qualname = user_u64(code + lay->code_qualname);
		u64 filename = user_u64(code + lay->code_filename);
		struct py_code_key key = {.code = code, .tgid = tgid, .names = py_mix(qualname, filename)};
		if (py_codes_seen.lookup(&key))
			continue;
		/* A code object new to this address: its argument count, not a freed one's. */
		u32 slot = py_argcount_slot(code);
		struct py_argcount *known = py_argcounts.lookup(&slot);
		if (known) {
			s32 argcount = 0;
			bpf_probe_read_user(&argcount, sizeof(argcount), (void *)(code + lay->code_argcount));
			known->code = code;
			known->tgid = tgid;
			known->argcount = argcount;
		}
		rec->hdr.kind = IOO_AUX_PY_CODE;
		rec->code = code;
		rec->pid = tgid;
		rec->version = lay->version;
		rec->firstlineno = 0;
		bpf_probe_read_user(&rec->firstlineno, sizeof(rec->firstlineno), (void *)(code + lay->code_firstlineno));
		rec->name_len = py_string(lay, qualname, rec->name, IOO_PY_NAME_BYTES, &rec->name_kind);
		rec->file_len = py_string(lay, filename, rec->file, IOO_PY_FILE_BYTES, &rec->file_kind);
		u64 table = user_u64(code + lay->code_linetable);
		u64 size = table ? user_u64(table + lay->bytes_size) : 0;
		u64 keep = size < IOO_PY_TABLE_BYTES ? size : IOO_PY_TABLE_BYTES;
		keep &= 0xfff;
		rec->table_size = size;
		rec->table_len = 0;
		if (keep && keep <= IOO_PY_TABLE_BYTES &&
		    bpf_probe_read_user(rec->table, keep, (void *)(table + lay->bytes_data)) == 0)
			rec->table_len = keep;
		/* Up to the line table's end: most tables are a few hundred bytes of the 2 KiB kept. */
		u64 record = __builtin_offsetof(struct ioo_py_code_record, table) + (rec->table_len & 0xfff);
		asm volatile("" : "+r"(record));
		if (record > sizeof(*rec))
			record = sizeof(*rec);
		rec->hdr.size = record;
		if (aux.ringbuf_output(rec, record, 0)) {
			count_lost(LOST_AUX_BASE + IOO_AUX_PY_CODE);
			/* The chain names a code object user space will not know: send the chain again. */
			py_chains_seen.delete(&scratch->chain.chain);
			return 0;
		}
		py_codes_seen.update(&key, &one);
	}
	return 0;
}

/* An import's module name as a name record of the event of this thread at `ts` (index
 * IOO_NAME_LABEL): the str at `str` after one dot per `level` of a relative import
 * ("from . import x" names "."). One-byte characters only: a module name is ASCII all but
 * always. */
static __always_inline void py_send_label(u64 str, u64 level, u64 ts)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct ioo_py_proc *proc = NULL;
	struct ioo_py_layout *lay = py_layout_of(tgid, &proc);
	u32 zero = 0;
	struct ioo_name_record *rec = name_scratch.lookup(&zero);
	if (!lay || !rec)
		return;
	u32 dots = (u32)level < PY_LABEL_DOTS ? (u32)level : PY_LABEL_DOTS;  /* a C int */
	for (int i = 0; i < PY_LABEL_DOTS; i++) {
		if (i < dots)
			rec->data[i] = '.';
	}
	u64 at = dots;
	asm volatile("%0 &= 7" : "+r"(at));  /* PY_LABEL_DOTS at most, kept by the verifier */
	u8 kind = 1;
	u32 n = py_string(lay, str, rec->data + at, IOO_NAME_LEN - 1 - PY_LABEL_DOTS, &kind);
	if (kind != 1)
		return;
	n += dots;
	if (!n)
		return;
	rec->hdr.kind = IOO_AUX_NAME;
	rec->ts_ns = ts;
	rec->tid = bpf_get_current_pid_tgid();
	rec->index = IOO_NAME_LABEL;
	rec->base_ino = 0;
	rec->base_dev = 0;
	u64 len = n;
	asm volatile("%0 &= 0xff" : "+r"(len));  /* below IOO_NAME_LEN, kept by the verifier */
	rec->len = len;
	u64 size = __builtin_offsetof(struct ioo_name_record, data) + len;
	rec->hdr.size = size;
	if (aux.ringbuf_output(rec, size, 0) != 0)
		count_lost(LOST_AUX_BASE + IOO_AUX_NAME);
}
