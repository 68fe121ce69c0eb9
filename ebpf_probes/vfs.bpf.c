/* The VFS (opt-in): the kernel's own file operations below the syscalls, which every syscall
 * path and in-kernel reader (exec's loader, nfsd, loop devices, overlayfs) goes through:
 * vfs_read, vfs_write, vfs_open, vfs_fsync_range, kernel_read (exec's reads of its binary),
 * vfs_copy_file_range, do_splice_direct (sendfile) and do_splice (splice). Each function has
 * an entry program of each kind, vfs_k_<fn> (kprobe) and vfs_f_<fn> (fentry), around one
 * body; the return is vfs_k_return (kretprobe) or vfs_x_<fn> (fexit: the return value follows
 * the function's arguments). probes/attach/vfs.py attaches one kind, the cheapest the kernel
 * allows. A call's parent is the syscall in flight on the thread. Calls nest
 * (copy_file_range may fall back to do_splice_direct): a small stack per thread. */
#define VFS_DEPTH 4

struct vfs_call {
	u64 ts;
	u64 file;
	u64 file2;     /* the output side of a copy (0: none) */
	u64 count;
	s64 offset;    /* -1: the file position */
	s64 offset2;
	u16 op;        /* 0: a call of a process not selected, kept to balance the stack */
	u16 pad[3];
};

struct vfs_stack {
	struct vfs_call calls[VFS_DEPTH];
	u32 depth;     /* calls entered and not returned, past VFS_DEPTH too (those are not kept) */
	u32 pad;
};

BPF_TASK_STORAGE(vfs_calls, struct vfs_stack);

static __always_inline s64 vfs_pos(u64 pos_ptr)
{
	s64 pos = -1;
	if (pos_ptr)
		bpf_probe_read_kernel(&pos, sizeof(pos), (void *)pos_ptr);
	return pos;
}

static __always_inline int vfs_enter(u16 op, u64 file, u64 count, s64 offset, u64 file2, s64 offset2)
{
	struct ioo_config *cfg = get_config();
	u64 pid_tgid = bpf_get_current_pid_tgid();
	int selected = cfg && process_selected(cfg, pid_tgid >> 32);
	struct vfs_stack *stack = vfs_calls.task_storage_get(bpf_get_current_task_btf(), 0,
							     selected ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
	if (!stack)
		return 0;
	u32 depth = stack->depth;
	stack->depth = depth + 1;
	if (depth >= VFS_DEPTH)
		return 0;
	struct vfs_call *call = &stack->calls[depth & (VFS_DEPTH - 1)];
	call->op = selected ? op : 0;
	call->ts = bpf_ktime_get_ns();
	call->file = file;
	call->count = count;
	call->offset = offset;
	call->file2 = file2;
	call->offset2 = offset2;
	return 0;
}

/* One side of a call as an event; whether it passed the filters (a pipe's side does not). */
static __always_inline int vfs_submit(struct vfs_call *call, struct inflight *st, void *file, s64 offset, s64 ret,
				      u16 flags)
{
	struct file_ident id = {};
	s64 unused_pos;
	if (!file || !file_traced(file, &id, &unused_pos))
		return 0;
	struct ioo_event ev = {};
	event_measured(&ev, call->op, IOO_F_FILE | flags, ret, bpf_ktime_get_ns() - call->ts, call->count, id.dev);
	event_owner(&ev);
	if (!event_gate(&ev, GATE_OWNER))
		return 0;
	event_placed(&ev, call->ts, offset, id.ino, 0, syscall_as_parent(st), -1);
	event_task(&ev);
	event_submit(&ev);
	return 1;
}

static __always_inline int vfs_exit(s64 ret)
{
	struct vfs_stack *stack = vfs_calls.task_storage_get(bpf_get_current_task_btf(), 0, 0);
	if (!stack || !stack->depth)
		return 0;
	u32 depth = stack->depth - 1;
	stack->depth = depth;
	if (depth >= VFS_DEPTH)
		return 0;
	struct vfs_call call = stack->calls[depth & (VFS_DEPTH - 1)];
	if (!call.op)
		return 0;
	struct inflight *st = inflight.task_storage_get(bpf_get_current_task_btf(), 0, 0);
	int first = vfs_submit(&call, st, (void *)call.file, call.offset, ret, 0);
	/* the output side counts the call again only if the input side was a file too */
	if (call.file2)
		vfs_submit(&call, st, (void *)call.file2, call.offset2, ret, IOO_F_PAIR_OUT | (first ? IOO_F_REPEAT : 0));
	return 0;
}

/* Each function's entry from its arguments `a` (the kernel's C arguments, in order). */
/* (struct file *, char __user *, size_t, loff_t *) */
static __always_inline int vfs_read_entry(const u64 *a) { return vfs_enter(IOO_OP_VFS_READ, a[0], a[2], vfs_pos(a[3]), 0, 0); }
static __always_inline int vfs_write_entry(const u64 *a) { return vfs_enter(IOO_OP_VFS_WRITE, a[0], a[2], vfs_pos(a[3]), 0, 0); }
/* (const struct path *, struct file *): the file is whole only at return */
static __always_inline int vfs_open_entry(const u64 *a) { return vfs_enter(IOO_OP_VFS_OPEN, a[1], 0, -1, 0, 0); }
/* (struct file *, loff_t start, loff_t end, int datasync) */
static __always_inline int vfs_fsync_range_entry(const u64 *a)
{
	return vfs_enter(IOO_OP_VFS_FSYNC, a[0], a[2] - a[1], a[1], 0, 0);
}
/* (struct file *, void *, size_t, loff_t *) */
static __always_inline int kernel_read_entry(const u64 *a)
{
	return vfs_enter(IOO_OP_VFS_KERNEL_READ, a[0], a[2], vfs_pos(a[3]), 0, 0);
}
/* (struct file *in, loff_t pos_in, struct file *out, loff_t pos_out, size_t len, unsigned int flags) */
static __always_inline int vfs_copy_file_range_entry(const u64 *a)
{
	return vfs_enter(IOO_OP_VFS_COPY_FILE_RANGE, a[0], a[4], a[1], a[2], a[3]);
}
/* (struct file *in, loff_t *ppos, struct file *out, loff_t *opos, size_t len, unsigned int flags) */
static __always_inline int do_splice_direct_entry(const u64 *a)
{
	return vfs_enter(IOO_OP_VFS_SPLICE_DIRECT, a[0], a[4], vfs_pos(a[1]), a[2], vfs_pos(a[3]));
}
static __always_inline int do_splice_entry(const u64 *a)
{
	return vfs_enter(IOO_OP_VFS_SPLICE, a[0], a[4], vfs_pos(a[1]), a[2], vfs_pos(a[3]));
}

/* The programs of one function: kprobe and fentry entries, and its fexit (the return value
 * is the fexit's argument after the function's own). A fentry program reads only as many
 * arguments as the function has: the verifier refuses more. */
#define VFS_FUNCTION(fn, nargs, ret_type)                                               \
	int vfs_k_##fn(struct pt_regs *ctx)                                             \
	{                                                                               \
		u64 a[6] = {PT_REGS_PARM1(ctx), PT_REGS_PARM2(ctx), PT_REGS_PARM3(ctx),  \
			    PT_REGS_PARM4(ctx), PT_REGS_PARM5(ctx), PT_REGS_PARM6(ctx)}; \
		return fn##_entry(a);                                                   \
	}                                                                               \
	int vfs_f_##fn(u64 *ctx)                                                        \
	{                                                                               \
		u64 a[6] = {};                                                          \
		_Pragma("unroll") for (int i = 0; i < nargs; i++) a[i] = ctx[i];        \
		return fn##_entry(a);                                                   \
	}                                                                               \
	int vfs_x_##fn(u64 *ctx)                                                        \
	{                                                                               \
		return vfs_exit((s64)(ret_type)ctx[nargs]);                             \
	}

VFS_FUNCTION(vfs_read, 4, s64)
VFS_FUNCTION(vfs_write, 4, s64)
VFS_FUNCTION(vfs_open, 2, s32)
VFS_FUNCTION(vfs_fsync_range, 4, s32)
VFS_FUNCTION(kernel_read, 4, s64)
VFS_FUNCTION(vfs_copy_file_range, 6, s64)
VFS_FUNCTION(do_splice_direct, 6, s64)
VFS_FUNCTION(do_splice, 6, s64)

int vfs_k_return(struct pt_regs *ctx)
{
	return vfs_exit(PT_REGS_RC(ctx));
}
