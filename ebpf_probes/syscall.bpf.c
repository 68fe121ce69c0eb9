/* Syscall layer: file I/O of every process. The enter programs select the call (its
 * syscall_specs row, the process, the file behind its descriptor) and keep what they saw in
 * the thread's inflight record; on_sys_exit completes it (the returned descriptor, stat
 * results, path arguments) and sends it through the emit path. Executable mappings are
 * reported here too (library and interpreter probes follow them). With the net layer on, the
 * calls on Internet sockets are traced too, as its ops (the spec's net_op).
 *
 * Three ways in, one body (probes/attach/syscall.py picks the first the kernel allows):
 * - fentry/fexit on the traced syscall functions only: syscall_fentry/syscall_fexit, loaded
 *   once per function, tail-call on_sys_enter/on_sys_exit (untraced syscalls run nothing);
 * - tp_btf on sys_enter/sys_exit: on_sys_enter and on_sys_exit;
 * - raw tracepoints: on_sys_enter_raw and on_sys_exit.
 * The BTF programs read the arguments straight from the kernel's pt_regs; the raw one copies
 * them with a helper call first.
 */
static __always_inline u64 iov_bytes(u64 iov_ptr, u64 count)
{
	u64 total = 0;
	for (int i = 0; i < MAX_IOV; i++) {
		LOOP_INDEX(i);
		if (i >= count)
			break;
		u64 len = 0;
		bpf_probe_read_user(&len, sizeof(len), (void *)(iov_ptr + i * 16 + 8));
		total += len;
	}
	return total;
}

/* The ts of the innermost library call open on this thread (0 if none): a syscall's parent,
 * marked as one so that its event carries an exact key (IOO_F_PARENT). */
static __always_inline u64 innermost_call_ts(struct inflight *st)
{
	struct call_frames *fr = call_frames.task_storage_get(bpf_get_current_task_btf(), 0, 0);
	if (!fr || fr->depth == 0)
		return 0;
	struct call_frame *frame = frame_at(fr, fr->depth);
	frame->parent = 1;
	if (frame->op == IOO_OP_PY_IMPORT)
		st->have |= HAVE_IN_IMPORT;
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
 * in its inflight record, so on_sys_exit places the runtime at the address the mapping got
 * (even if a filter then leaves the call itself out). */
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
	st->py_text = at + 1;
}

/* The first step of every enter program: the thread's inflight record, its op cleared, if
 * syscall `nr` is traced and the process selected; else NULL, having looked up nothing but
 * the syscall's row for a syscall nobody asked for. */
static __always_inline struct inflight *syscall_selected(u64 nr, struct ioo_syscall_spec **spec,
							 struct ioo_config **cfg)
{
	if (nr >= SPEC_ENTRIES)
		return NULL;
	u32 key = nr;
	*spec = syscall_specs.lookup(&key);
	if (!*spec || !(*spec)->op)
		return NULL;
	*cfg = get_config();
	if (!*cfg)
		return NULL;
	struct inflight *st = selected_inflight(*cfg, bpf_get_current_pid_tgid() >> 32);
	if (!st)
		return NULL;
	/* Filled in place; op, set last, says the record is whole (sys_exit and the walk read it). */
	st->op = 0;
	st->py_text = 0;
	st->nr = key;
	st->ts = bpf_ktime_get_ns();
	return st;
}

/* The six arguments, from `regs` (the kernel's pt_regs, or a copy of its argument span
 * placed so that the same offsets apply). */
static __always_inline void syscall_args(struct inflight *st, const char *regs)
{
	st->args[0] = *(const u64 *)(regs + OFF_SYSCALL_ARG0);
	st->args[1] = *(const u64 *)(regs + OFF_SYSCALL_ARG1);
	st->args[2] = *(const u64 *)(regs + OFF_SYSCALL_ARG2);
	st->args[3] = *(const u64 *)(regs + OFF_SYSCALL_ARG3);
	st->args[4] = *(const u64 *)(regs + OFF_SYSCALL_ARG4);
	st->args[5] = *(const u64 *)(regs + OFF_SYSCALL_ARG5);
}

/* serve: the call on a socket is aggregated by the socket's service end (socket_endpoint)
 * in place of its device, xored in and out around the gate without a branch there. */
static __always_inline void aggregate_by_endpoint(struct inflight *st, u32 endpoint)
{
#ifdef IOO_AGGREGATE
	st->agg_dev_xor = st->file.dev ^ endpoint;
#endif
}

/* The rest of every enter program, once the arguments are in: the file, bytes and offset;
 * then the Python walk, tail-called in the program's own kind (`ctx`). */
static __always_inline int syscall_entered(void *ctx, struct inflight *st, struct ioo_syscall_spec *spec,
					   struct ioo_config *cfg)
{
	st->have = 0;
#ifdef IOO_AGGREGATE
	st->agg_dev_xor = 0;
#endif
	st->parent_ts = 0;
	st->cache_pages = 0;
	st->py_chain = 0;
	st->bytes_req = 0;
	u16 flags = spec->flags;

	if (flags & IOO_S_MMAP) {
		if ((arg_at(st, spec->aux_arg) & MAP_ANONYMOUS_) || (s32)arg_at(st, spec->fd_arg) < 0)
			return 0;
		/* Before the path filter: a library is reported wherever it lives. */
		if (arg_at(st, MMAP_PROT_ARG) & PROT_EXEC_) {
			void *mapped = fd_file((s32)arg_at(st, spec->fd_arg));
			if (cfg->layers & IOO_LAYER_LIBS)
				note_library(mapped, st->ts);
			if (cfg->layers & IOO_LAYER_PYTHON)
				note_python_text(mapped, arg_at(st, MMAP_OFFSET_ARG), st);
		}
	}
	if (st->calls_open)
		st->parent_ts = innermost_call_ts(st);
	if (flags & IOO_S_FCNTL_DUP) {
		u64 cmd = arg_at(st, spec->aux_arg);
		if (cmd != F_DUPFD_ && cmd != F_DUPFD_CLOEXEC_)
			return 0;
	}

	s16 fd_arg = spec->fd_arg;
	if (flags & IOO_S_EMPTY_PATH && spec->path_arg >= 0) {
		char first = 1;
		bpf_probe_read_user(&first, 1, (void *)arg_at(st, spec->path_arg));
		if (first == 0 && (arg_at(st, spec->aux_arg) & AT_EMPTY_PATH_)) {
			fd_arg = spec->dirfd_arg;
			st->have |= HAVE_NO_NAME;
		}
	}
	void *file = NULL;
	s64 file_pos = -1, file2_pos = -1;
	u32 endpoint = 0;
	st->fd = fd_arg >= 0 ? (s32)arg_at(st, fd_arg) : -1;
	if (fd_arg >= 0) {
		file = fd_file(st->fd);
		if (file) {
			if (file_traced(file, &st->file, &file_pos))
				st->have |= HAVE_FILE;
			else if (spec->net_op && socket_traced(file, &st->file, !(flags & IOO_S_PEER_AT_EXIT), &endpoint)) {
				st->have |= HAVE_FILE | HAVE_SOCKET;
				aggregate_by_endpoint(st, endpoint);
			} else if (!(flags & IOO_S_PAIR))
				return 0;
		} else if (cfg->filter_path) {
			return 0;  /* a bad fd names no file a path filter could admit */
		}
	}
	if (flags & IOO_S_PAIR) {
		void *file2 = fd_file((s32)arg_at(st, spec->fd2_arg));
		if (file2 && file_traced(file2, &st->file2, &file2_pos))
			st->have |= HAVE_FILE2;
		if (!(st->have & (HAVE_FILE | HAVE_FILE2)))
			return 0;  /* pipe to socket and the like: not file I/O */
		st->pos2 = file2_pos;
	}

	if (spec->count_arg >= 0) {
		u64 count = arg_at(st, spec->count_arg);
		u64 iov = 0;
		if (flags & IOO_S_IOV) {
			iov = arg_at(st, spec->count_arg - 1);
		} else if (flags & IOO_S_MSGHDR) {
			u64 msg[2] = {};  /* struct user_msghdr's msg_iov and msg_iovlen */
			bpf_probe_read_user(msg, sizeof(msg), (void *)(count + 16));
			iov = msg[0];
			count = msg[1];
		}
		if (flags & (IOO_S_IOV | IOO_S_MSGHDR))
			count = iov_bytes(iov, count);
		st->bytes_req = count;
	}
	s64 pos = -1;
	if (spec->offset_arg >= 0) {
		u64 raw = arg_at(st, spec->offset_arg);
		if (flags & IOO_S_OFFSET_PTR) {
			if (raw)
				bpf_probe_read_user(&pos, sizeof(pos), (void *)raw);
			else if (file)
				st->have |= HAVE_POS;
		} else if ((flags & IOO_S_OFFSET_NEG) && (s64)raw == -1) {
			st->have |= HAVE_POS;
		} else {
			pos = raw;
		}
	} else if (flags & IOO_S_FILE_POS) {
		st->have |= HAVE_POS;
	}
	if (st->have & HAVE_SOCKET)
		st->have &= ~HAVE_POS;  /* a socket has no position */
	if (st->have & HAVE_POS)
		pos = (st->have & HAVE_FILE) ? file_pos : -1;
	st->pos = pos;
	st->op = (st->have & HAVE_SOCKET) ? spec->net_op : spec->op;
	/* Its events' way out, decided once for all of them (an open of a file it turns out not
	 * to trace counts against the flood limit too). */
	u64 cgroup_id = current_cgroup_id();
	if (!event_let_out(cgroup_id, event_wanted(cgroup_id), st->ts)) {
		st->have |= HAVE_HELD;
		return 0;  /* no Python walk for events nobody will see */
	}
	if (cfg->layers & IOO_LAYER_PYTHON)
		py_programs.call(ctx, PY_PROG_WALK);  /* returns only if there is no walk to run */
	return 0;
}

/* sys_enter as a raw tracepoint: args[0] is an untyped pt_regs pointer, so its argument span
 * is copied with one helper call. */
int on_sys_enter_raw(struct bpf_raw_tracepoint_args *ctx)
{
	struct ioo_syscall_spec *spec;
	struct ioo_config *cfg;
	struct inflight *st = syscall_selected(ctx->args[1], &spec, &cfg);
	if (!st)
		return 0;
	u64 span[(SYSCALL_ARGS_HI - SYSCALL_ARGS_LO) / 8 + 1];
	bpf_probe_read_kernel(span, sizeof(span), (char *)ctx->args[0] + SYSCALL_ARGS_LO);
	syscall_args(st, (const char *)span - SYSCALL_ARGS_LO);
	return syscall_entered(ctx, st, spec, cfg);
}

/* sys_enter through BTF: a tp_btf program on sys_enter, or the body the fentry stubs
 * tail-call. ctx[0] is a typed pt_regs pointer: the arguments and the syscall's number are
 * plain loads. */
int on_sys_enter(u64 *ctx)
{
	const char *regs = (const char *)ctx[0];
	struct ioo_syscall_spec *spec;
	struct ioo_config *cfg;
	struct inflight *st = syscall_selected(*(const u64 *)(regs + OFF_SYSCALL_NR), &spec, &cfg);
	if (!st)
		return 0;
	syscall_args(st, regs);
	return syscall_entered(ctx, st, spec, cfg);
}

/* A traced syscall's event (of one of its files, for two-file calls). */
static __always_inline int submit_syscall(struct inflight *st, s64 ret, u64 dur, struct file_ident *id,
					  int has_file, s32 fd, s64 pos, u64 arg, u16 flags)
{
	struct ioo_event ev = {};
	/* cache_pages: submit_cache's page event, which follows, names this call */
	flags |= (has_file ? IOO_F_FILE : 0) | (((st->have & HAVE_CHILD) || st->cache_pages) ? IOO_F_PARENT : 0);
	event_measured(&ev, st->op, flags, ret, dur, st->bytes_req, has_file ? id->dev : 0);
	event_owner(&ev);
#ifdef IOO_AGGREGATE
	ev.dev ^= st->agg_dev_xor;  /* a socket call is aggregated by its service end, not sockfs's device */
#endif
	if (!event_gate_decided(&ev, !(st->have & HAVE_HELD)))
		return 0;
#ifdef IOO_AGGREGATE
	ev.dev ^= st->agg_dev_xor;
#endif
	event_placed(&ev, st->ts, pos, has_file ? id->ino : 0, arg, st->parent_ts, fd);
	event_task(&ev);
	u64 py_chain = st->py_chain;
	struct py_calls *calls = NULL;
	if (py_chain) {
		calls = py_calls.task_storage_get(bpf_get_current_task_btf(), 0, 0);
		if (calls && calls->ts != st->ts)
			calls = NULL;
		py_chain |= (u64)(calls ? py_same_calls(calls) : 0) << IOO_PY_SAME_SHIFT;
	}
	ev.py_chain = py_chain;
	if (event_submit(&ev) != 0)
		return -1;
	if (calls)
		py_sent_calls(calls);
	return 0;
}

/* The pages a traced call added to the page cache, as one child event: for a read they are
 * what it missed (readahead included), for a write the pages it created. */
static __always_inline void submit_cache(struct inflight *st)
{
	u16 op = (st->op >= IOO_OP_WRITE && st->op <= IOO_OP_PWRITEV2) ? IOO_OP_CACHE_ADD : IOO_OP_CACHE_MISS;
	submit_page_event(op, st->cache_ts, st->cache_dev, st->cache_ino, st->cache_index, st->cache_pages,
			  st->cache_pages, st->ts, !(st->have & HAVE_HELD));
}

/* A call on a socket that moved `ret` bytes: the head record of the HTTP request a write's
 * bytes begin, or of the answer a read's begin (send_head), from the call's first buffer. */
static __always_inline u16 net_head(struct inflight *st, s64 ret)
{
	u16 op = st->op;
	if (op < IOO_OP_NET_READ || op > IOO_OP_SENDMSG)
		return 0;
	int answer = (op - IOO_OP_NET_READ) % 2 == 0;  /* the ops alternate: read, write, readv, writev, ... */
	u64 buf = st->args[1];
	u64 len = ret;
	if (op == IOO_OP_SENDMSG || op == IOO_OP_RECVMSG) {
		bpf_probe_read_user(&buf, sizeof(buf), (void *)(buf + 16));  /* struct user_msghdr's msg_iov */
		op = IOO_OP_NET_READV;
	}
	if (op == IOO_OP_NET_READV || op == IOO_OP_NET_WRITEV) {
		u64 iov[2] = {};  /* the first struct iovec */
		bpf_probe_read_user(iov, sizeof(iov), (void *)buf);
		buf = iov[0];
		if (iov[1] < len)
			len = iov[1];
	}
	return send_head(st->ts, buf, len, answer, st->file.ino);
}

/* The traced syscall in flight (st, the thread's inflight record) returned `ret`: its events. */
static __always_inline void syscall_returned(struct inflight *st, s64 ret)
{
	u64 dur = bpf_ktime_get_ns() - st->ts;
	struct ioo_syscall_spec *spec = syscall_specs.lookup(&st->nr);
	if (!spec)
		return;
	u16 flags = spec->flags;
	u16 ev_flags = (st->have & HAVE_POS) ? IOO_F_POS : 0;
	int decided = st->have & HAVE_FILE;
	s32 fd = st->fd;

	if ((flags & IOO_S_RET_FD) && ret >= 0) {
		s64 unused_pos;
		void *file = fd_file(ret);
		if (!file)
			return;
		/* A new open file: a verdict cached for a closed one at the same address (and an
		 * inode at the same address since) is not this file's. */
		u64 addr = (u64)file;
		file_cache.delete(&addr);
		if (!file_traced(file, &st->file, &unused_pos)) {
			u32 endpoint = 0;
			if (!(spec->net_op && socket_traced(file, &st->file, 1, &endpoint)))
				return;
			aggregate_by_endpoint(st, endpoint);
		}
		st->have |= HAVE_FILE;
		decided = 1;
		fd = ret;
	}
	if ((flags & (IOO_S_STATBUF | IOO_S_STATX)) && ret == 0 && !(st->have & HAVE_FILE)) {
		u64 buf = arg_at(st, spec->buf_arg);
		if (flags & IOO_S_STATBUF) {
			u64 dev = 0;
			bpf_probe_read_user(&dev, sizeof(dev), (void *)buf);
			bpf_probe_read_user(&st->file.ino, sizeof(st->file.ino), (void *)(buf + 8));
			st->file.dev = kernel_dev_from_user(dev);
		} else {
			u32 dev[2] = {};
			bpf_probe_read_user(&st->file.ino, sizeof(st->file.ino), (void *)(buf + 32));
			bpf_probe_read_user(dev, sizeof(dev), (void *)(buf + 136));
			st->file.dev = (dev[0] << 20) | (dev[1] & 0xfffff);
		}
		if (excluded_devs.lookup(&st->file.dev))
			return;
		st->have |= HAVE_FILE;
	}
	/* A connect sets the socket's peer: its ends are sent now, before its event. */
	if ((flags & IOO_S_PEER_AT_EXIT) && (st->have & HAVE_SOCKET)) {
		void *file = fd_file(fd);
		u32 endpoint = 0;
		if (file && socket_traced(file, &st->file, 1, &endpoint))
			aggregate_by_endpoint(st, endpoint);
	}
	/* An opened file's path comes from the kernel's own walk; other path arguments are sent
	 * (not a held call's: its event stays in the kernel). */
	int opened = (flags & IOO_S_RET_FD) && ret >= 0;
	if (spec->path_arg >= 0 && !(st->have & (HAVE_NO_NAME | HAVE_HELD)) && !opened) {
		/* The config is needed only here (path filter), not on the data-op path. */
		struct ioo_config *cfg = get_config();
		if (!cfg)
			return;
		int sent = emit_name(cfg, st, spec->path_arg, spec->dirfd_arg, 0, decided);
		if (!sent)
			return;
		if (sent == 2)
			ev_flags |= IOO_F_NAME;
		if (spec->path2_arg >= 0 && emit_name(cfg, st, spec->path2_arg, spec->dirfd2_arg, 1, decided) == 2)
			ev_flags |= IOO_F_NAME2;
	}
	if ((st->have & HAVE_SOCKET) && ret > 0)
		ev_flags |= net_head(st, ret);
	u64 arg = spec->aux_arg >= 0 ? arg_at(st, spec->aux_arg) : 0;
	if (flags & IOO_S_HOW_FLAGS) {
		u64 how_flags = 0;
		bpf_probe_read_user(&how_flags, sizeof(how_flags), (void *)arg);
		arg = how_flags;
	}
	if (flags & IOO_S_PAIR) {
		s32 fd2 = (s32)arg_at(st, spec->fd2_arg);
		if (st->have & HAVE_FILE)
			submit_syscall(st, ret, dur, &st->file, 1, fd, st->pos, fd2, ev_flags);
		if (st->have & HAVE_FILE2)
			submit_syscall(st, ret, dur, &st->file2, 1, fd2, st->pos2, fd,
				       IOO_F_PAIR_OUT | ((st->have & HAVE_FILE) ? IOO_F_REPEAT : 0));
	} else {
		submit_syscall(st, ret, dur, &st->file, st->have & HAVE_FILE, fd, st->pos, arg, ev_flags);
	}
	if (st->parent_ts && (st->have & HAVE_FILE))
		note_child_file(st->parent_ts, &st->file);
	if (st->cache_pages)
		submit_cache(st);
}

/* Whether the AIO layer reads what this io_submit or io_getevents call returned. */
static __always_inline int aio_follows(struct inflight *st, s64 ret)
{
	u16 op = st->op;
	if (ret <= 0 || (op != IOO_OP_IO_SUBMIT && op != IOO_OP_IO_GETEVENTS && op != IOO_OP_IO_PGETEVENTS))
		return 0;
	struct ioo_config *cfg = get_config();
	return cfg && (cfg->layers & IOO_LAYER_AIO);
}

int on_sys_exit(struct bpf_raw_tracepoint_args *ctx)
{
	struct inflight *st = inflight.task_storage_get(bpf_get_current_task_btf(), 0, 0);
	if (!st)
		return 0;
	s64 ret = ctx->args[1];
	if (st->py_text) {
		if ((u64)ret < (u64)-MAX_ERRNO_)
			place_python(bpf_get_current_pid_tgid() >> 32, st->py_text - 1, ret, 1);
		st->py_text = 0;
	}
	if (!st->op)
		return 0;
	/* Worked on in place (no copy: the stack holds the event); the thread's next syscall
	 * rewrites the record, and nothing reads it once op is 0. Whether the AIO layer follows
	 * is decided twice, on copies of the return read afresh: a branch on `ret` itself, or a
	 * verdict kept in a register, would split the states the verifier walks through
	 * syscall_returned (its bounds differ on each side). */
	if (st->op == IOO_OP_IO_SUBMIT && aio_follows(st, ctx->args[1]))
		st->have |= HAVE_CHILD;  /* its iocbs, sent next, name it as their parent */
	syscall_returned(st, ret);
	if (aio_follows(st, ctx->args[1])) {
		st->aio_next = 0;
		st->aio_count = ret;
		aio_programs.call(ctx, st->op == IOO_OP_IO_SUBMIT ? AIO_PROG_SUBMITTED : AIO_PROG_REAPED);  /* ends the call */
	}
	st->op = 0;
	return 0;
}

/* The fentry/fexit way in: one tiny program of each, loaded once per traced syscall function
 * (ctx[0] its pt_regs, and for fexit ctx[1] its return value, as sys_enter/sys_exit pass
 * them), which tail-calls the body loaded once: the verifier checks the body once, not once
 * per function. */
BPF_PROG_ARRAY(syscall_enter_body, 1);
BPF_PROG_ARRAY(syscall_exit_body, 1);

int syscall_fentry(u64 *ctx)
{
	syscall_enter_body.call(ctx, 0);
	return 0;
}

int syscall_fexit(u64 *ctx)
{
	syscall_exit_body.call(ctx, 0);
	return 0;
}
