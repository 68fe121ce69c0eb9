/* AIO layer: each Linux AIO request (an iocb of io_submit) from its submission to the
 * io_getevents or io_pgetevents that reaped it. The kernel has no tracepoint for either, so
 * both are read at the syscalls' exit from the caller's memory: the syscall layer's exit
 * program tail-calls these (in its own kind) once its event for the call is sent.
 *
 * aio_submitted reads the iocbs io_submit took (its return says how many), resolves the file
 * of each run of iocbs on one descriptor once, and keeps each request by (process, iocb
 * address); aio_reaped reads the io_events the reaping call returned and sends the event of
 * each request they complete. A request's time runs from its io_submit's entry (+1 ns: it
 * never shares its parent's key) to its reaping: the latency an application sees, and an
 * upper bound of the device's. Requests are read AIO_BATCH at a time; each program tail-
 * calls itself for the next batch (or descriptor), up to the kernel's tail-call limit (33):
 * beyond it, what a call carries is counted lost under its op (bcc cannot build bpf_loop's
 * callbacks).
 */
#ifdef IOO_AGGREGATE
#define AIO_BATCH 8   /* each pass adds to the aggregates: the verifier's work grows fast with it */
#else
#define AIO_BATCH 32
#endif
#define AIO_INFLIGHT 32768

struct aio_key {
	u64 iocb;  /* the iocb's address in the process (what io_event.obj returns) */
	u32 tgid;
	u32 pad;
};

struct aio_request {
	u64 ts;
	u64 ctx_id;
	u64 bytes_req;
	s64 offset;
	struct file_ident file;
	s32 fd;
	u32 tid;
	u32 uid;
	u16 op;
	u8 have_file;
	u8 wanted;
	u64 cgroup_id;
	char comm[IOO_COMM_LEN];
};

/* struct iocb up to aio_offset (uapi, little-endian field order) */
struct iocb_head {
	u64 data;
	u32 key;
	u32 rw_flags;
	u16 opcode;
	s16 reqprio;
	u32 fildes;
	u64 buf;
	u64 nbytes;
	s64 offset;
};

struct aio_completion {  /* struct io_event */
	u64 data;
	u64 obj;
	s64 res;
	s64 res2;
};

BPF_ARRAY(aio_ops, u16, IOO_AIO_CMDS);
/* Requests submitted and not yet reaped. An LRU: a process that exits or destroys its context
 * without reaping leaves its requests behind, and they must not fill the table for good. */
BPF_TABLE("lru_hash", struct aio_key, struct aio_request, aio_requests, AIO_INFLIGHT);

/* The thread's io_submit or io_getevents in flight, if it is `op` and has more to read. */
static __always_inline struct inflight *aio_call(u16 op1, u16 op2)
{
	struct inflight *st = inflight.task_storage_get(bpf_get_current_task_btf(), 0, 0);
	if (!st || (st->op != op1 && st->op != op2))
		return NULL;
	return st;
}

/* Read up to index `i` of what the call returned: on to the next batch by a tail call; what
 * the kernel's tail-call limit leaves unread is counted lost under the call's op. */
static __always_inline void aio_next_batch(void *ctx, struct inflight *st, u32 i, u32 program)
{
	st->aio_next = i;
	u32 n = st->aio_count;
	if (i < n) {
		aio_programs.call(ctx, program);
		count_lost_n(st->op, n - i);
	}
	st->op = 0;
}

/* The iocb at index `i` of io_submit's array; 0 if it cannot be read. */
static __always_inline u64 aio_iocb(struct inflight *st, u32 i, struct iocb_head *cb)
{
	u64 iocb = 0;
	bpf_probe_read_user(&iocb, sizeof(iocb), (void *)(st->args[2] + (u64)i * 8));
	if (!iocb || bpf_probe_read_user(cb, sizeof(*cb), (void *)iocb) != 0)
		return 0;
	return iocb;
}

int aio_submitted(void *ctx)
{
	struct inflight *st = aio_call(IOO_OP_IO_SUBMIT, IOO_OP_IO_SUBMIT);
	if (!st)
		return 0;
	u32 n = st->aio_count;
	u32 i = st->aio_next;
	struct iocb_head cb = {};
	if (i >= n || !aio_iocb(st, i, &cb)) {
		st->op = 0;
		return 0;
	}
	/* The run of iocbs on this descriptor shares one file resolution. */
	struct aio_request r = {};
	u32 fd = cb.fildes;
	void *file = fd_file((s32)fd);
	s64 unused_pos;
	int traced = file ? file_traced(file, &r.file, &unused_pos) : 0;
	r.have_file = traced;
	struct ioo_config *cfg = get_config();
	/* a socket or eventfd is no file I/O; a bad descriptor names no file a path filter admits */
	int keep = traced || (!file && cfg && !cfg->filter_path);
	u64 pid_tgid = bpf_get_current_pid_tgid();
	r.ts = st->ts + 1;
	r.ctx_id = st->args[0];
	r.fd = fd;
	r.tid = pid_tgid;
	r.uid = current_uid();
	r.cgroup_id = current_cgroup_id();
	r.wanted = event_wanted(r.cgroup_id);
	current_comm(r.comm);
	struct aio_key key = {.tgid = pid_tgid >> 32};

	for (int k = 0; k < AIO_BATCH; k++) {
		LOOP_INDEX(k);
		if (i >= n)
			break;
		u64 iocb = aio_iocb(st, i, &cb);
		if (!iocb || cb.fildes != fd)
			break;
		u32 cmd = cb.opcode;
		u16 *op = aio_ops.lookup(&cmd);
		if (keep && op && *op) {
			r.op = *op;
			r.offset = (cmd == 0 || cmd == 1 || cmd == 7 || cmd == 8) ? cb.offset : -1;  /* the data commands */
			r.bytes_req = (cmd == 7 || cmd == 8) ? iov_bytes(cb.buf, cb.nbytes) : (cmd <= 1 ? cb.nbytes : 0);
			key.iocb = iocb;
			aio_requests.update(&key, &r);
		}
		i++;
	}
	aio_next_batch(ctx, st, i, AIO_PROG_SUBMITTED);
	return 0;
}

int aio_reaped(void *ctx)
{
	struct inflight *st = aio_call(IOO_OP_IO_GETEVENTS, IOO_OP_IO_PGETEVENTS);
	if (!st)
		return 0;
	u32 n = st->aio_count;
	u32 i = st->aio_next;
	u64 now = bpf_ktime_get_ns();
	u64 events = st->args[3];
	struct aio_key key = {.tgid = bpf_get_current_pid_tgid() >> 32};

	for (int k = 0; k < AIO_BATCH; k++) {
		LOOP_INDEX(k);
		if (i >= n)
			break;
		struct aio_completion done = {};
		bpf_probe_read_user(&done, sizeof(done), (void *)(events + (u64)i * sizeof(done)));
		i++;
		key.iocb = done.obj;
		struct aio_request *r = aio_requests.lookup(&key);
		if (!r)
			continue;  /* submitted before the recording, or by a process not selected */
		struct ioo_event ev = {};
		event_measured(&ev, r->op, r->have_file ? IOO_F_FILE : 0, done.res, now - r->ts, r->bytes_req,
			       r->have_file ? r->file.dev : 0);
		event_owner_was(&ev, r->cgroup_id, r->uid);
		if (event_gate(&ev, r->wanted)) {
			event_placed(&ev, r->ts, r->offset, r->have_file ? r->file.ino : 0, r->ctx_id, r->ts - 1, r->fd);
			event_task_was(&ev, key.tgid, r->tid, r->comm);
			event_submit(&ev);
		}
		aio_requests.delete(&key);
	}
	aio_next_batch(ctx, st, i, AIO_PROG_REAPED);
	return 0;
}
