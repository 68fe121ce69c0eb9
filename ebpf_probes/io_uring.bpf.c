/* IO_URING layer: each io_uring request from its submission to its completion, from the
 * io_uring tracepoints. Its I/O never passes a read or write syscall: the syscall layer sees
 * only io_uring_enter, which a request submitted inside it names as its parent.
 *
 * At submission (io_uring_submit_req, in the submitter's context: a thread in io_uring_enter,
 * or the ring's SQPOLL thread, a thread of the owner's process) the request's op, descriptor,
 * offset and length are read from its io_kiocb and kept by its address; at completion
 * (io_uring_complete, wherever it runs: the submitter, an io-wq worker) its file is resolved
 * from the request and the event leaves through the emit path. A request of the SQPOLL
 * thread is given to the ring's owner: the thread that set the ring up or last entered it.
 * Which opcodes are traced and how they are read comes from `uring_specs`
 * (ioobserve/probes/maps/async_table.py); the io_kiocb offsets from BTF (kernel_layout.py).
 */
#define IOSQE_FIXED_FILE_ 0x1             /* the low bits of a request's flags are its SQE's */
#define PF_IO_WORKER_ 0x10
#define IORING_ENTER_REGISTERED_RING_ 0x10  /* io_uring_enter's fd is a registered ring's index */
#define URING_INFLIGHT 16384

struct uring_ring {
	u64 fd;     /* the ring's descriptor in its process (IOO_RING_UNKNOWN: not seen) */
	u32 tid;    /* its owner: the thread that set it up or last entered it */
	u32 pad;
	char comm[IOO_COMM_LEN];
};

/* A request between submission and completion: what the event needs of its submitter. */
struct uring_request {
	u64 ts;
	u64 parent_ts;
	u64 cgroup_id;
	u64 bytes_req;
	s64 offset;
	u64 ring;
	struct file_ident file;  /* IOO_U_FD: the file its descriptor named at submission */
	s32 fd;
	u32 pid;
	u32 tid;
	u32 uid;
	u16 op;
	u16 how;
	u16 flags;      /* IOO_F_FIXED, IOO_F_SQPOLL */
	u8 have_file;
	u8 wanted;      /* event_wanted() for its cgroup, decided at submission */
	char comm[IOO_COMM_LEN];
};

BPF_ARRAY(uring_specs, struct ioo_uring_spec, IOO_URING_OPS);
BPF_TABLE("lru_hash", u64, struct uring_ring, uring_rings, 4096);          /* by io_ring_ctx */
BPF_HASH(uring_requests, u64, struct uring_request, URING_INFLIGHT);       /* by io_kiocb */

/* The first URING_SPAN bytes of an io_kiocb: every field read, in one copy. */
struct uring_span {
	u64 words[URING_SPAN / 8];
};

#define SPAN_AT(span, type, off) (*(type *)((char *)(span) + (off)))

/* args: (int fd, void *ctx, u32 sq_entries, u32 cq_entries, u32 flags), in the creator's context */
int on_uring_create(struct bpf_raw_tracepoint_args *ctx)
{
	struct uring_ring ring = {.fd = (u64)(s64)(s32)ctx->args[0], .tid = (u32)bpf_get_current_pid_tgid()};
	current_comm(ring.comm);
	u64 key = ctx->args[1];
	uring_rings.update(&key, &ring);
	return 0;
}

/* The ring a thread in io_uring_enter submits to: learnt from the call's fd argument, so a
 * ring set up before the recording is named too; else as io_uring_create saw it. */
static __always_inline u64 uring_ring_fd(u64 ring_key, struct uring_ring *ring, struct inflight *st)
{
	if (!st || st->op != IOO_OP_IO_URING_ENTER || (st->args[3] & IORING_ENTER_REGISTERED_RING_))
		return ring ? ring->fd : IOO_RING_UNKNOWN;
	u64 fd = (u32)st->args[0];  /* an unsigned int: the register's upper half is not part of it */
	if (!ring || ring->fd != fd || ring->tid != (u32)bpf_get_current_pid_tgid()) {
		struct uring_ring entered = {.fd = fd, .tid = (u32)bpf_get_current_pid_tgid()};
		current_comm(entered.comm);
		uring_rings.update(&ring_key, &entered);
	}
	return fd;
}

/* args: (struct io_kiocb *req): the request's op data is filled (its prep ran), its file not yet. */
int on_uring_submit(struct bpf_raw_tracepoint_args *ctx)
{
	struct uring_span span = {};
	bpf_probe_read_kernel(&span, sizeof(span), (void *)ctx->args[0]);
	u32 opcode = SPAN_AT(&span, u8, OFF_IO_KIOCB_OPCODE);
	struct ioo_uring_spec *spec = uring_specs.lookup(&opcode);
	if (!spec || !spec->op)
		return 0;
	struct ioo_config *cfg = get_config();
	if (!cfg)
		return 0;
	u64 pid_tgid = bpf_get_current_pid_tgid();
	u32 tgid = pid_tgid >> 32;
	int sqpoll = (*(u32 *)((char *)bpf_get_current_task_btf() + OFF_TASK_FLAGS) & PF_IO_WORKER_) != 0;
	u64 ring_key = SPAN_AT(&span, u64, OFF_IO_KIOCB_CTX);
	struct uring_ring *ring = NULL;
	struct inflight *st = NULL;
	if (sqpoll) {
		/* its comm is iou-sqp-PID: a comm filter asks about the ring's owner */
		ring = uring_rings.lookup(&ring_key);
		if (!process_selected_as(cfg, tgid, ring ? ring->comm : NULL))
			return 0;
	} else if (!(st = selected_inflight(cfg, tgid))) {
		return 0;  /* before the ring's lookup: unselected processes pay for little */
	} else {
		ring = uring_rings.lookup(&ring_key);
	}

	struct uring_request r = {};
	r.ts = bpf_ktime_get_ns();
	r.op = spec->op;
	u16 how = spec->how;
	r.fd = SPAN_AT(&span, s32, OFF_IO_KIOCB_CQE_FD);
	/* flags is a u32 in 6.1 and a u64 since 6.10 (the u64 read on 6.1 is misaligned, which its
	 * verifier refuses): the bit lies in the low half, where a u32 read finds it on both */
	r.flags = (SPAN_AT(&span, u32, OFF_IO_KIOCB_FLAGS) & IOSQE_FIXED_FILE_) ? IOO_F_FIXED : 0;
	r.offset = -1;
	if (how & IOO_U_RW) {
		r.offset = SPAN_AT(&span, s64, OFF_IO_RW_POS);
		u64 addr = SPAN_AT(&span, u64, OFF_IO_RW_ADDR);
		u32 len = SPAN_AT(&span, u32, OFF_IO_RW_LEN);
		r.bytes_req = (how & IOO_U_VEC) ? iov_bytes(addr, len) : len;
	} else if (how & IOO_U_SYNC) {
		r.offset = SPAN_AT(&span, s64, OFF_IO_SYNC_OFF);
		r.bytes_req = SPAN_AT(&span, u64, OFF_IO_SYNC_LEN);
	}
	if ((how & IOO_U_RET_FD) && SPAN_AT(&span, u32, OFF_IO_OPEN_FILE_SLOT))
		how &= ~IOO_U_RET_FD;  /* opened into a registered slot: the result is no descriptor */
	if ((how & IOO_U_FD) && !(r.flags & IOO_F_FIXED)) {
		void *file = fd_file(r.fd);
		s64 unused_pos;
		if (file && !file_traced(file, &r.file, &unused_pos))
			return 0;  /* a socket, a pipe, a file the path filter leaves out */
		r.have_file = file != NULL;
	}
	r.how = how;
	r.ring = uring_ring_fd(ring_key, ring, st);
	r.pid = tgid;
	if (sqpoll) {
		r.flags |= IOO_F_SQPOLL;
		ring = uring_rings.lookup(&ring_key);
		r.tid = ring ? ring->tid : (u32)pid_tgid;
		if (ring)
			__builtin_memcpy(r.comm, ring->comm, IOO_COMM_LEN);
		else
			current_comm(r.comm);
	} else {
		r.tid = pid_tgid;
		r.parent_ts = syscall_as_parent(st);
		current_comm(r.comm);
	}
	r.uid = current_uid();
	r.cgroup_id = current_cgroup_id();
	r.wanted = event_wanted(r.cgroup_id);
	u64 key = ctx->args[0];
	if (uring_requests.update(&key, &r) != 0)
		count_lost(r.op);  /* URING_INFLIGHT requests in flight already */
	return 0;
}

/* The event of request `req` (its submission: r), completed now. */
static __always_inline void uring_completed(void *req, struct uring_request *r)
{
	s32 res = (s32)read_u32(req, OFF_IO_KIOCB_CQE_RES);
	s32 fd = r->fd;
	struct file_ident id = r->file;
	int has_file = r->have_file;
	if (!(r->how & IOO_U_FD)) {
		void *file = read_ptr(req, OFF_IO_KIOCB_FILE);
		if ((r->how & IOO_U_RET_FD) && res >= 0) {
			/* completing in a thread of the opener's process (task work or io-wq), which
			 * shares its descriptors */
			file = (bpf_get_current_pid_tgid() >> 32) == r->pid ? fd_file(res) : NULL;
			u64 addr = (u64)file;
			file_cache.delete(&addr);  /* a new open file: see syscall_returned */
			fd = res;
		}
		s64 unused_pos;
		if (file && !file_traced(file, &id, &unused_pos))
			return;
		has_file = file != NULL;
	}
	if (!has_file) {
		struct ioo_config *cfg = get_config();
		if (!cfg || cfg->filter_path)
			return;  /* no file a path filter could admit */
	}
	struct ioo_event ev = {};
	event_measured(&ev, r->op, r->flags | (has_file ? IOO_F_FILE : 0), res, bpf_ktime_get_ns() - r->ts, r->bytes_req,
		       has_file ? id.dev : 0);
	event_owner_was(&ev, r->cgroup_id, r->uid);
	if (!event_gate(&ev, r->wanted))
		return;
	event_placed(&ev, r->ts, r->offset, has_file ? id.ino : 0, r->ring, r->parent_ts, fd);
	event_task_was(&ev, r->pid, r->tid, r->comm);
	event_submit(&ev);
}

/* args: (ctx, req, ...): the result is in the request's cqe on every kernel's prototype. */
int on_uring_complete(struct bpf_raw_tracepoint_args *ctx)
{
	u64 key = ctx->args[1];
	struct uring_request *found = uring_requests.lookup(&key);
	if (!found)
		return 0;
	uring_completed((void *)key, found);
	uring_requests.delete(&key);
	return 0;
}
