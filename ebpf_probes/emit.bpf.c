/* Emit: the one way out of the kernel for an event of any layer, in four steps.
 *
 *   select  the layer's program decides the event is one to trace (process_selected,
 *           file_traced, a block request's origin, ...): nothing below runs for the others.
 *   gate    event_gate(): with IOO_AGGREGATE (`serve`) the event is added to the aggregates
 *           and leaves the kernel only if its cgroup is streamed or recorded (emit_cgroups);
 *           a recording lets every event out. Then, with a flood limit, a cgroup past its
 *           events for this second has the rest counted instead (flood_allows). A syscall is
 *           decided once, at its entry (event_let_out), for all its events: serve's exit
 *           program has no verifier budget left for the check at each of its submits. The
 *           gate reads what the aggregates key and sum: op, flags, ret, dur_ns, bytes_req,
 *           dev, cgroup_id and uid.
 *   fill    the layer fills the rest of its ioo_event (file, offset, parent, the task's
 *           ids and comm with event_task, a Python chain): work only a trace needs.
 *   submit  event_submit(): one copy into the events ring; a full ring counts the op lost.
 *
 * Events are built on the program's stack: one ringbuf_output helper call, where reserve
 * and submit are two.
 */
#ifdef IOO_AGGREGATE
/* Not preallocated: a value holds two histograms (~700 B), so memory follows the keys in use. */
BPF_F_TABLE("hash", struct ioo_agg_key, struct ioo_agg_value, agg_calls, AGG_ENTRIES, BPF_F_NO_PREALLOC);
BPF_ARRAY(agg_zero, struct ioo_agg_value, 1);  /* never written: a new key's first value (too big for the stack) */
BPF_HASH(emit_cgroups, u64, u8, 1024);  /* with emit_some: the cgroups whose events leave the kernel */
BPF_TABLE("lru_hash", u64, struct emit_verdict, emit_verdicts, 4096);  /* event_wanted per cgroup, cached */
BPF_ARRAY(agg_dropped, u64, 1);         /* calls not aggregated: a table was full */
#endif

/* An event the current task caused: the ids the gate keys it by. */
static __always_inline void event_owner(struct ioo_event *ev)
{
	ev->uid = current_uid();
	ev->cgroup_id = current_cgroup_id();
}

/* The fill of an event of the current task: which process, thread and command. */
static __always_inline void event_task(struct ioo_event *ev)
{
	u64 pid_tgid = bpf_get_current_pid_tgid();
	ev->pid = pid_tgid >> 32;
	ev->tid = pid_tgid;
	current_comm(ev->comm);
}

/* The owner and the task of an event completed away from them (a block, AIO or io_uring
 * request), as its submission kept them. */
static __always_inline void event_owner_was(struct ioo_event *ev, u64 cgroup_id, u32 uid)
{
	ev->cgroup_id = cgroup_id;
	ev->uid = uid;
}

static __always_inline void event_task_was(struct ioo_event *ev, u32 pid, u32 tid, const char *comm)
{
	ev->pid = pid;
	ev->tid = tid;
	__builtin_memcpy(ev->comm, comm, IOO_COMM_LEN);
}

/* Every event's fields in two steps, the only places they are set (beside the owner's and
 * the task's above): what the gate and the aggregates read, then, for an event that leaves
 * the kernel, where and when it happened. */
static __always_inline void event_measured(struct ioo_event *ev, u16 op, u16 flags, s64 ret, u64 dur_ns,
					   u64 bytes_req, u32 dev)
{
	ev->op = op;
	ev->flags = flags;
	ev->ret = ret;
	ev->dur_ns = dur_ns;
	ev->bytes_req = bytes_req;
	ev->dev = dev;
}

/* `ts_ns`: the call's start; `offset`: its place in its file (-1: none); `parent_ts`: the
 * start of the event it happened inside (0: none). */
static __always_inline void event_placed(struct ioo_event *ev, u64 ts_ns, s64 offset, u64 ino, u64 arg,
					 u64 parent_ts, s32 fd)
{
	ev->ts_ns = ts_ns;
	ev->offset = offset;
	ev->ino = ino;
	ev->arg = arg;
	ev->parent_ts = parent_ts;
	ev->fd = fd;
}

#ifdef IOO_AGGREGATE
static __always_inline u64 log2_slot(u64 v)
{
	/* ceil(log2(v)): a bucket's bound is inclusive, as Prometheus's `le` (4096 B is "<= 4 KiB");
	 * bcc's bpf_log2l(x) is floor(log2(x)) + 1 */
	u64 slot = v > 1 ? bpf_log2l(v - 1) : 0;
	CLAMP(slot, IOO_AGG_SLOTS - 1);
	return slot;
}

static __always_inline void agg_dropped_one(void)
{
	u32 zero = 0;
	u64 *dropped = agg_dropped.lookup(&zero);
	if (dropped)
		__sync_fetch_and_add(dropped, 1);
}

/* One event into the aggregates (every event, whatever leaves the kernel). */
static __always_inline void aggregate_event(struct ioo_event *ev)
{
	u16 flags = ev->flags;
	struct ioo_agg_key key = {.cgroup_id = ev->cgroup_id, .uid = ev->uid, .dev = ev->dev, .op = ev->op,
				  .out = (flags & IOO_F_PAIR_OUT) ? ((flags & IOO_F_REPEAT) ? 2 : 1) : 0};
	/* Copied by a helper: the branches below then narrow the copy, not the event's own
	 * fields, and the exit program's paths through them join again (the verifier's
	 * budget). */
	struct {
		u64 dur;
		s64 ret;
		u64 bytes_req;
	} sums;
	bpf_probe_read_kernel(&sums, sizeof(sums), &ev->dur_ns);
	s64 ret = sums.ret;
	u64 dur = sums.dur;
	u64 bytes_req = sums.bytes_req;
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
	if (bytes_req) {
		__sync_fetch_and_add(&value->req_sum, bytes_req);
		__sync_fetch_and_add(&value->size[log2_slot(bytes_req)], 1);
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
#else
static __always_inline int event_wanted(u64 cgroup_id)
{
	return 1;  /* a recording: every selected event leaves the kernel */
}
#endif

/* A cgroup's flood control: the events it caused this second (sent or not), and those held
 * back past the limit over the recording, which user space reads each second to mark the
 * throttle's start and end in the trace. Shared by the CPUs without a lock: a second's first
 * events may be counted in the one before; the totals are exact. */
struct flood_state {
	u64 window;            /* the second counted (ktime / 1 s) */
	u64 count;             /* events this second */
	u64 dropped;           /* events held back, since the start */
	u64 last_drop_ns;
	u64 throttle_start_ns; /* the first held back after a second with none */
};
BPF_TABLE("lru_hash", u64, struct flood_state, flood_states, 4096);
#define NS_PER_SECOND 1000000000ULL

/* Whether one more event of this cgroup may leave the kernel this second. `at`: the time of
 * the event if the caller has read the clock already (a syscall's entry), else 0. */
static __always_inline int flood_allows(u64 cgroup_id, u64 at)
{
	struct ioo_config *cfg = get_config();
	if (!cfg || !cfg->flood_limit)
		return 1;
	u64 now = at ? at : bpf_ktime_get_ns();
	u64 window = now / NS_PER_SECOND;
	struct flood_state *st = flood_states.lookup(&cgroup_id);
	if (!st) {
		struct flood_state fresh = {.window = window};
		flood_states.insert(&cgroup_id, &fresh);  /* may lose a race to create it: then count in the winner's */
		st = flood_states.lookup(&cgroup_id);
		if (!st)
			return 1;
	}
	if (st->window != window) {
		st->window = window;
		st->count = 0;
	}
	__sync_fetch_and_add(&st->count, 1);
	if (st->count <= cfg->flood_limit)
		return 1;
	if (now - st->last_drop_ns > NS_PER_SECOND)
		st->throttle_start_ns = now;
	st->last_drop_ns = now;
	__sync_fetch_and_add(&st->dropped, 1);
	count_lost(LOST_THROTTLED);
	return 0;
}

/* Whether an event of this cgroup that is `wanted` (event_wanted) leaves the kernel: it does
 * if its cgroup is within its flood limit this second (`at` as flood_allows takes it). */
static __always_inline int event_let_out(u64 cgroup_id, int wanted, u64 at)
{
	return wanted && flood_allows(cgroup_id, at);
}

#define GATE_OWNER 2  /* event_gate: decide for the event's cgroup now (the current task's) */

/* Select → gate: aggregate the event, and say whether it leaves the kernel. `wanted` is
 * GATE_OWNER for an event of the current task, or event_wanted() as it was decided in its
 * owner's context (a block request completes in another's). */
static __always_inline int event_gate(struct ioo_event *ev, int wanted)
{
#ifdef IOO_AGGREGATE
	aggregate_event(ev);
#endif
	return event_let_out(ev->cgroup_id, wanted == GATE_OWNER ? event_wanted(ev->cgroup_id) : wanted, 0);
}

/* event_gate for an event whose way out was decided before (a syscall's, at its entry):
 * aggregate it, and say whether it leaves the kernel (`out`). */
static __always_inline int event_gate_decided(struct ioo_event *ev, int out)
{
#ifdef IOO_AGGREGATE
	aggregate_event(ev);
#endif
	return out;
}

/* Fill → submit: the event into the events ring. */
static __always_inline int event_submit(struct ioo_event *ev)
{
	if (events.ringbuf_output(ev, sizeof(*ev), BPF_RB_NO_WAKEUP) != 0) {
		count_lost(ev->op);
		return -1;
	}
	return 0;
}

/* Little-endian first four bytes of the HTTP requests whose heads are kept. */
#define HTTP_GET 0x20544547   /* "GET " */
#define HTTP_PUT 0x20545550   /* "PUT " */
#define HTTP_HEAD 0x44414548  /* "HEAD" */
#define HTTP_POST 0x54534f50  /* "POST" */
#define HTTP_DELE 0x454c4544  /* "DELE" */
#define TLS_HANDSHAKE 0x0316  /* a TLS record of type handshake (22), version 3.x */

/* Bytes a program wrote (`len` of them at `buf`) that begin an HTTP request: their first
 * IOO_HEAD_BYTES go out as a head record of the event at `ts` (the request line and headers;
 * nothing past them, nothing of other writes). The flag the event takes: IOO_F_HEAD if the
 * head was sent, IOO_F_TLS_HELLO if the bytes begin a TLS handshake (a client doing TLS itself,
 * not through a probed libssl), else 0. */
static __always_inline u16 send_head(u64 ts, u64 buf, s64 len)
{
	u32 first = 0;
	if (len < 4 || bpf_probe_read_user(&first, sizeof(first), (void *)buf) < 0)
		return 0;
	if ((first & 0xffff) == TLS_HANDSHAKE)
		return IOO_F_TLS_HELLO;
	if (first != HTTP_GET && first != HTTP_PUT && first != HTTP_HEAD && first != HTTP_POST && first != HTTP_DELE)
		return 0;
	u32 zero = 0;
	struct ioo_head_record *rec = head_scratch.lookup(&zero);
	if (!rec)
		return 0;
	u64 n = len;
	CLAMP(n, IOO_HEAD_BYTES);
	if (bpf_probe_read_user(rec->data, n, (void *)buf) < 0)
		return 0;
	rec->hdr.kind = IOO_AUX_HEAD;
	rec->ts_ns = ts;
	rec->tid = bpf_get_current_pid_tgid();
	rec->len = n;
	u64 size = __builtin_offsetof(struct ioo_head_record, data) + n;
	CLAMP(size, sizeof(*rec));
	rec->hdr.size = size;
	if (aux.ringbuf_output(rec, size, 0) != 0) {
		count_lost(LOST_AUX_BASE + IOO_AUX_HEAD);
		return 0;
	}
	return IOO_F_HEAD;
}

/* A page cache event of the current task: `pages` pages of (dev, ino) from page `index`.
 * `out`: GATE_OWNER to gate it now, or whether it leaves the kernel as its syscall's entry
 * decided. */
static __always_inline void submit_page_event(u16 op, u64 ts, u32 dev, u64 ino, u64 index, u64 pages,
					      u64 arg, u64 parent_ts, int out)
{
	struct ioo_event ev = {};
	event_measured(&ev, op, IOO_F_FILE, pages * PAGE_SIZE_, 0, pages * PAGE_SIZE_, dev);
	event_owner(&ev);
	if (!(out == GATE_OWNER ? event_gate(&ev, GATE_OWNER) : event_gate_decided(&ev, out)))
		return;
	event_placed(&ev, ts, index * PAGE_SIZE_, ino, arg, parent_ts, -1);
	event_task(&ev);
	event_submit(&ev);
}
