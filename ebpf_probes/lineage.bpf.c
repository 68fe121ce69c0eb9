/* Lineage: processes forked, exec'd and exited (sched tracepoints), as proc records on the
 * aux ring with their command line and environment; the pid filter grows at fork; a process
 * exec'ing a known CPython gets its interpreter placed (place_python, also used at mmap).
 */
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
	rec->exe_ino = 0;
	rec->exe_dev = 0;
	rec->pad = 0;
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
	struct inflight *st = inflight.task_storage_get(bpf_get_current_task_btf(), 0, 0);
	if (st)
		st->select_gen = 0;  /* its comm changed: selected again at its next call */
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
	rec->exe_ino = exe.ino;
	rec->exe_dev = exe.dev;
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

/* A cgroup made on the default (v2) hierarchy, sent at once: a container that ends before user
 * space reads the cgroup tree is still named (the id is what its events carry). The v1
 * hierarchies' cgroups, made beside it on a hybrid host, have another root and are left out.
 * args: (struct cgroup *cgrp, const char *path) */
int on_cgroup_mkdir(struct bpf_raw_tracepoint_args *ctx)
{
	void *cgrp = (void *)ctx->args[0];
	char *task = (char *)bpf_get_current_task_btf();
	char *css_set = *(char **)(task + OFF_TASK_CGROUPS);
	if (!css_set)
		return 0;
	char *dfl = *(char **)(css_set + OFF_CSS_SET_DFL_CGRP);
	if (!dfl || read_ptr(cgrp, OFF_CGROUP_ROOT) != *(void **)(dfl + OFF_CGROUP_ROOT))
		return 0;
	void *kn = read_ptr(cgrp, OFF_CGROUP_KN);
	u32 zero = 0;
	struct ioo_cgroup_record *rec = cgroup_scratch.lookup(&zero);
	if (!kn || !rec)
		return 0;
	long len = bpf_probe_read_kernel_str(rec->data, sizeof(rec->data), (void *)ctx->args[1]);
	if (len <= 0)
		return 0;
	rec->hdr.kind = IOO_AUX_CGROUP;
	rec->hdr.size = sizeof(*rec);
	rec->ts_ns = bpf_ktime_get_ns();
	rec->id = read_u64(kn, OFF_KERNFS_NODE_ID);
	rec->len = len - 1;  /* the NUL left out */
	rec->flags = len >= sizeof(rec->data) ? IOO_PATH_TRUNCATED : 0;
	if (aux.ringbuf_output(rec, sizeof(*rec), 0) != 0)
		count_lost(LOST_AUX_BASE + IOO_AUX_CGROUP);
	return 0;
}
