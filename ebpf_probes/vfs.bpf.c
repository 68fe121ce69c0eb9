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
	struct ioo_event ev = {};
	ev.op = call.op;
	ev.flags = IOO_F_FILE;
	ev.ret = PT_REGS_RC(ctx);
	ev.dur_ns = bpf_ktime_get_ns() - call.ts;
	ev.bytes_req = call.count;
	ev.dev = id.dev;
	event_owner(&ev);
	if (!event_gate(&ev, GATE_OWNER))
		return 0;
	ev.ts_ns = call.ts;
	ev.offset = call.offset;
	ev.ino = id.ino;
	ev.parent_ts = syscall_as_parent(st);
	ev.fd = -1;
	event_task(&ev);
	event_submit(&ev);
	return 0;
}
