/* Library calls (libc's stdio and POSIX wrappers, HDF5, MPI-IO, libssl), from a uprobe at
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

/* How many library calls are open on the thread, for its syscalls: they look for the call
 * they are made inside only when one is (at least as many as `depth`: a frame dropped
 * unseen lowers it later). */
static __always_inline void note_calls_open(u32 depth)
{
	struct inflight *st = inflight.task_storage_get(bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (st)
		st->calls_open = depth;
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
	note_calls_open(depth + 1);
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
		/* libssl's calls are on a socket (the net layer's kind of file, named by its ends) */
		if (file_traced(file, id, &unused_pos))
			return 1;
		u32 unused_endpoint = 0;
		return frame->library == IOO_LIB_SSL && socket_traced(file, id, 1, &unused_endpoint);
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
	else if (spec->flags & IOO_C_BIND_HANDLE && ret == 1)
		key.handle = frame->handle;  /* SSL_set_fd: the SSL is on this socket from now on */
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
	note_calls_open(depth - 1);
	u32 key = frame.op;
	struct ioo_call_spec *spec = call_specs.lookup(&key);
	struct ioo_config *cfg = get_config();
	if (!spec || !cfg)
		return 0;
	s64 ret = PT_REGS_RC(ctx);
	if (spec->flags & IOO_C_RET_INT)
		ret = (s32)ret;
	if (spec->flags & IOO_C_OUT_BYTES) {  /* SSL_read_ex, SSL_write_ex: 1 and the bytes, or 0 */
		u64 moved = 0;
		if (ret == 1)
			bpf_probe_read_user(&moved, sizeof(moved), (void *)frame.args[spec->aux_arg & (CALL_ARGS - 1)]);
		ret = ret == 1 ? (s64)moved : -1;
	}
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
	struct ioo_event ev = {};
	u16 flags = (has_file == 1 ? IOO_F_FILE : 0) | (frame.parent ? IOO_F_PARENT : 0);
	/* The plaintext of an HTTPS request or answer; the ops alternate: read, write, read_ex, write_ex. */
	if (frame.op >= IOO_OP_SSL_READ && frame.op <= IOO_OP_SSL_WRITE_EX && ret > 0)
		flags |= send_head(frame.ts, frame.args[1], ret, (frame.op - IOO_OP_SSL_READ) % 2 == 0, frame.handle);
	event_measured(&ev, frame.op, flags, ret, bpf_ktime_get_ns() - frame.ts, count, has_file == 1 ? id.dev : 0);
	event_owner(&ev);
	if (!event_gate(&ev, GATE_OWNER))
		return 0;
	u64 arg = spec->aux_arg >= 0 && !(spec->flags & IOO_C_OUT_BYTES) ? frame.args[spec->aux_arg & (CALL_ARGS - 1)] : 0;
	if (frame.library == IOO_LIB_SSL)
		arg = frame.handle;  /* the SSL's address: it names the connection where no socket does (a memory BIO) */
	event_placed(&ev, frame.ts, spec->offset_arg >= 0 ? (s64)frame.args[spec->offset_arg & (CALL_ARGS - 1)] : -1,
		     has_file == 1 ? id.ino : 0, arg, frame.parent_ts, fd);
	event_task(&ev);
	if (event_submit(&ev) != 0)
		return 0;
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
/* One per op of ioobserve/probes/maps/call_table.py, which lists them; the loader passes the list
 * in as -DIOO_CALL_ENTRIES. */
IOO_CALL_ENTRIES
/* The import probe at _find_and_load's call, where uprobe_multi (and its cookies) is missing. */
int enter_py_import_find_and_load(struct pt_regs *ctx) { return call_enter(ctx, IOO_OP_PY_IMPORT | IOO_COOKIE_FIND_AND_LOAD); }
