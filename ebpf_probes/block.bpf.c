/* Block layer: a request from its first bio's submission to its completion. The bio is
 * submitted in the context of whoever caused it, so a traced syscall in flight on that
 * thread is its parent; writeback and async readahead come from kernel threads (no parent).
 * Bios merged into a request ride on it. Every submission is noted, a selected process's with
 * what the event needs and any other's as not selected, and every issue too: a request issued
 * with no origin at all is one the recording could not attribute, and is counted when it
 * completes (block_no_origin); another process's request is left at its issue. A request
 * the driver gives back is issued again: the second issue keeps the first's record. */
#define REQ_OP_MASK_ 0xff
#define REQ_OP_DRV_IN_ 34  /* and above: passthrough commands, never submitted as bios */
#define ORIGIN_OTHER 0     /* submitted by a process the recording does not select */
#define ORIGIN_SELECTED 1
#define ORIGIN_UNKNOWN 2   /* issued, never seen submitted: its note evicted, or made before we attached */
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
	u32 wanted;         /* event_wanted() for its cgroup, decided in the submitter's context */
	u32 selected;       /* ORIGIN_OTHER, ORIGIN_SELECTED or ORIGIN_UNKNOWN */
	u32 pad;            /* comm 8-byte aligned: the verifier refuses a misaligned 8-byte store */
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
	struct inflight *st = cfg ? selected_inflight(cfg, pid_tgid >> 32) : NULL;
	struct block_origin origin = {};
	if (!st) {
		/* Known, and not ours. A request at this address was most likely another process's
		 * too (requests are reused from the queue's tags): its note stands, and a lookup
		 * costs a quarter of an update. */
		struct block_origin *before = block_origins.lookup(&key);
		if (!before || before->selected != ORIGIN_OTHER)
			block_origins.update(&key, &origin);
		return;
	}
	origin.selected = ORIGIN_SELECTED;
	origin.start_ts = bpf_ktime_get_ns();
	origin.parent_ts = syscall_as_parent(st);
	origin.cgroup_id = current_cgroup_id();
	origin.dev = bdev ? read_u32(bdev, OFF_BLOCK_DEVICE_BD_DEV) : 0;
	origin.pid = pid_tgid >> 32;
	origin.tid = pid_tgid;
	origin.uid = current_uid();
	origin.kernel_thread = (*(u32 *)((char *)bpf_get_current_task_btf() + OFF_TASK_FLAGS) & PF_KTHREAD_) != 0;
	current_comm(origin.comm);
	origin.wanted = event_wanted(origin.cgroup_id);
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
	/* Another process's request: nothing to keep for its completion. Its note stays (a
	 * requeued request's second issue finds it again) until the next request noted at
	 * this address replaces it, or the table's LRU lets it go. */
	if (origin && origin->selected == ORIGIN_OTHER)
		return 0;
	if (!origin && block_requests.lookup(&rq))
		return 0;  /* issued again (requeued): the first issue's record stands */
	struct block_request req = {};
	if (origin)
		req.origin = *origin;
	else
		req.origin.selected = ORIGIN_UNKNOWN;
	req.issue_ts = bpf_ktime_get_ns();
	req.sector = read_u64((void *)rq, OFF_REQUEST_SECTOR);
	req.bytes = read_u32((void *)rq, OFF_REQUEST_DATA_LEN);
	req.op = read_u32((void *)rq, OFF_REQUEST_CMD_FLAGS) & REQ_OP_MASK_;
	block_requests.update(&rq, &req);
	if (origin)
		block_origins.delete(&key);
	return 0;
}

/* args: (struct request *rq), merged into another request and about to be freed: its note
 * (by request, or before 6.5 by its first bio) must not pass to the next request allocated
 * at its address. */
int on_block_rq_merge(struct bpf_raw_tracepoint_args *ctx)
{
	u64 rq = ctx->args[0];
	block_origins.delete(&rq);
	u64 bio = (u64)read_ptr((void *)rq, OFF_REQUEST_BIO);
	if (bio)
		block_origins.delete(&bio);
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
		return 0;  /* another process's, or issued before the recording began */
	if (!ctx->args[1] && (u32)ctx->args[2] < read_u32((void *)rq, OFF_REQUEST_DATA_LEN))
		return 0;  /* a part of it: the request ends with its last part */
	if (req->origin.selected == ORIGIN_UNKNOWN) {
		/* A request with data whose submitter was never seen: the trace lacks it. A flush
		 * the kernel makes for a barrier carries none. */
		if (req->bytes && req->op < REQ_OP_DRV_IN_)
			count_lost(LOST_BLOCK_NO_ORIGIN);
		block_requests.delete(&rq);
		return 0;
	}
	struct ioo_event ev = {};
	u16 op = block_op(req->op);
	u16 flags = IOO_F_BLOCK | (req->origin.parent_ts ? 0 : IOO_F_ASYNC) |
		    (req->origin.kernel_thread && op == IOO_OP_BLOCK_WRITE ? IOO_F_WRITEBACK : 0);
	event_measured(&ev, op, flags, ctx->args[1] ? -5 /* EIO */ : (s64)req->bytes, bpf_ktime_get_ns() - req->issue_ts,
		       req->bytes, req->origin.dev);
	event_owner_was(&ev, req->origin.cgroup_id, req->origin.uid);
	if (event_gate(&ev, req->origin.wanted)) {
		/* no inode: a request names blocks of a device, not a file */
		event_placed(&ev, req->issue_ts, (s64)(req->sector << SECTOR_SHIFT_), 0, req->issue_ts - req->origin.start_ts,
			     req->origin.parent_ts, -1);
		event_task_was(&ev, req->origin.pid, req->origin.tid, req->origin.comm);
		event_submit(&ev);
	}
	block_requests.delete(&rq);
	return 0;
}
