/* Page cache: folios added to it and readahead, from the filemap and readahead tracepoints.
 * These are classic (not raw) tracepoints, read by the field offsets of their format files
 * (-DTP_<EVENT>_<FIELD>, ioobserve/probes/kernel/tracepoint_format.py): their raw arguments differ
 * from kernel to kernel, their formats say where each field is. A traced call in flight on
 * the thread tallies the pages (one event at its exit, see submit_cache); without one, a
 * page fault on a mapping or an untraced call brought them in: one event each, no parent. */
static __always_inline u64 tp_u64(void *ctx, int off)
{
	return off < 0 ? 0 : *(u64 *)((char *)ctx + off);
}

static __always_inline u32 tp_u32(void *ctx, int off)
{
	return off < 0 ? 0 : *(u32 *)((char *)ctx + off);
}

int on_filemap_add(void *ctx)
{
	struct ioo_config *cfg = get_config();
	struct inflight *st = cfg ? selected_inflight(cfg, bpf_get_current_pid_tgid() >> 32) : NULL;
	if (!st)
		return 0;
	u64 ino = tp_u64(ctx, TP_FILEMAP_ADD_I_INO);
	u64 index = tp_u64(ctx, TP_FILEMAP_ADD_INDEX);
	u32 dev = tp_u32(ctx, TP_FILEMAP_ADD_S_DEV);
	u32 order = TP_FILEMAP_ADD_ORDER < 0 ? 0 : *((u8 *)ctx + (TP_FILEMAP_ADD_ORDER < 0 ? 0 : TP_FILEMAP_ADD_ORDER));
	u32 pages = 1U << (order & 31);
	u64 now = bpf_ktime_get_ns();
	if (st->op) {
		if (!st->cache_pages) {
			st->cache_ts = now;
			st->cache_ino = ino;
			st->cache_dev = dev;
			st->cache_index = index;
		}
		st->cache_pages += pages;
		return 0;
	}
	if (cache_file_selected(cfg, dev, ino))
		submit_page_event(IOO_OP_CACHE_MISS, now, dev, ino, index, pages, pages, 0, GATE_OWNER);
	return 0;
}

static __always_inline int on_readahead(void *ctx, u16 op)
{
	struct ioo_config *cfg = get_config();
	struct inflight *st = cfg ? selected_inflight(cfg, bpf_get_current_pid_tgid() >> 32) : NULL;
	if (!st)
		return 0;
	u64 ino = tp_u64(ctx, TP_READAHEAD_I_INO);
	u32 dev = tp_u32(ctx, TP_READAHEAD_S_DEV);
	u64 parent_ts = syscall_as_parent(st);
	if (!parent_ts && !cache_file_selected(cfg, dev, ino))
		return 0;
	u64 pages = tp_u64(ctx, TP_READAHEAD_REQ_COUNT);
	submit_page_event(op, bpf_ktime_get_ns(), dev, ino, tp_u64(ctx, TP_READAHEAD_INDEX), pages, pages, parent_ts, GATE_OWNER);
	return 0;
}

int on_readahead_sync(void *ctx)
{
	return on_readahead(ctx, IOO_OP_READAHEAD);
}

int on_readahead_async(void *ctx)
{
	return on_readahead(ctx, IOO_OP_READAHEAD_ASYNC);
}
