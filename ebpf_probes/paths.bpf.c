/* Paths: which files are traced and their names. A file's path is walked from its dentry
 * once per (dev, ino) and sent on the aux ring (walk_path); the verdict for an open file is
 * cached by its struct file (file_traced); a path argument a call names is sent as typed
 * (emit_name), with the directory a relative one starts from. The --path-prefix filter is
 * decided here: by directory identity for open files, by string for path arguments.
 * An Internet socket (the net layer) is named by its two ends instead (socket_traced).
 */
static __always_inline int dentry_in_prefix_dirs(void *dentry)
{
	struct file_ident id = {};
	if (inode_ident(read_ptr(dentry, OFF_DENTRY_D_INODE), &id) < 0)
		return 0;
	struct ioo_file_key key = {.ino = id.ino, .dev = id.dev};
	return prefix_dirs.lookup(&key) != NULL;
}

/* Walk dentries and mounts up to the root, decide the path filter, and send the path
 * once per file. Returns KNOWN_* bits: whether the file passes the path filter, and
 * whether its path was delivered.
 *
 * The loop keeps its counters in the per-CPU record, not in registers: values read back
 * from map memory are unknown to the verifier, so every iteration starts in the same
 * state whichever branch it came from, and verification stays linear in the depth. */
static __always_inline int walk_path(struct walk_req *req)
{
	u32 zero = 0;
	struct ioo_config *cfg = get_config();
	struct ioo_path_record *rec = path_scratch.lookup(&zero);
	if (!cfg || !rec)
		return KNOWN_EMITTED;  /* cannot happen; claim delivered so callers do not retry */
	void *vfsmnt = req->vfsmnt;
	void *dentry = req->dentry;
	void *mnt = (char *)vfsmnt - OFF_MOUNT_MNT;
	rec->len = 0;
	rec->depth = 0;
	rec->flags = IOO_PATH_TRUNCATED;
	rec->hdr.kind = !cfg->filter_path;  /* "admitted so far", until the record is sent */

	for (int i = 0; i < MAX_PATH_DEPTH; i++) {
		if (!rec->hdr.kind && dentry_in_prefix_dirs(dentry))
			rec->hdr.kind = 1;
		void *root = read_ptr(vfsmnt, OFF_VFSMOUNT_MNT_ROOT);
		void *parent = read_ptr(dentry, OFF_DENTRY_D_PARENT);
		if (dentry == root || dentry == parent) {
			void *mnt_parent = read_ptr(mnt, OFF_MOUNT_MNT_PARENT);
			if (dentry != root || mnt_parent == mnt || !mnt_parent) {
				rec->flags = 0;
				break;
			}
			dentry = read_ptr(mnt, OFF_MOUNT_MNT_MOUNTPOINT);
			mnt = mnt_parent;
			vfsmnt = (char *)mnt + OFF_MOUNT_MNT;
			continue;
		}
		u32 off = rec->len;
		if (off > IOO_PATH_BYTES - IOO_NAME_LEN)
			break;
		const char *name = read_ptr(dentry, OFF_DENTRY_D_NAME_NAME);
		int n = bpf_probe_read_kernel_str(&rec->data[off], IOO_NAME_LEN, name);
		if (n <= 0)
			break;
		rec->len = off + n;
		rec->depth += 1;
		dentry = parent;
	}

	int admitted = rec->hdr.kind != 0;
	struct ioo_file_key key = {.ino = req->id.ino, .dev = req->id.dev};
	u8 known = admitted ? KNOWN_ADMITTED : 0;
	if (admitted || req->force) {
		rec->hdr.kind = IOO_AUX_PATH;
		rec->ino = req->id.ino;
		rec->dev = req->id.dev;
		rec->mode = req->id.mode;
		u32 len = rec->len;
		if (len > IOO_PATH_BYTES)
			len = IOO_PATH_BYTES;
		u32 size = __builtin_offsetof(struct ioo_path_record, data) + len;
		rec->hdr.size = size;
		if (aux.ringbuf_output(rec, size, 0) == 0)
			known |= KNOWN_EMITTED;
		else
			count_lost(LOST_AUX_BASE + IOO_AUX_PATH);
	}
	/* Only a delivered path is remembered, so a lost one is sent again next time. */
	if (known & KNOWN_EMITTED || !admitted) {
		struct known_file value = {.gen = req->gen, .known = known};
		known_files.update(&key, &value);
	}
	return known;
}

/* Path filter and path delivery for an open file: KNOWN_* bits. */
static __always_inline u8 file_admitted(void *file, struct file_ident *id, int force)
{
	struct ioo_file_key key = {.ino = id->ino, .dev = id->dev};
	u32 gen = read_u32(read_ptr(file, OFF_FILE_F_INODE), OFF_INODE_I_GENERATION);
	struct known_file *seen = known_files.lookup(&key);
	if (seen && seen->gen == gen && (seen->known & KNOWN_EMITTED || (!force && !(seen->known & KNOWN_ADMITTED))))
		return seen->known;
	struct walk_req req = {
		.vfsmnt = read_ptr(file, OFF_FILE_F_PATH_MNT),
		.dentry = read_ptr(file, OFF_FILE_F_PATH_DENTRY),
		.id = *id,
		.gen = gen,
		.force = force,
	};
	return walk_path(&req);
}

/* Whether an open file is traced (real file type, not on an excluded filesystem, inside
 * the path filter), with its identity and position. The verdict is cached by the file's
 * address and checked against its inode's address (read together with f_pos), so the
 * usual cost is one small read: a reused struct file pointing at another inode misses.
 * A socket is checked against its inode number too: socket() makes a file no traced call
 * returns (so nothing drops the closed one's verdict), and a closed socket's struct file and
 * inode are both often reused at once by the next socket, which has a new number. */
static __always_inline int file_traced(void *file, struct file_ident *id, s64 *pos)
{
	void *inode = file_inode_pos(file, pos);
	if (!inode)
		return 0;
	u64 key = (u64)file;
	struct file_verdict *cached = file_cache.lookup(&key);
	if (cached && cached->inode == (u64)inode &&
	    ((cached->mode & S_IFMT_) != S_IFSOCK_ || read_u64(inode, OFF_INODE_I_INO) == cached->ino)) {
		id->ino = cached->ino;
		id->dev = cached->dev;
		id->mode = cached->mode;
		return cached->traced;
	}
	if (inode_ident(inode, id) < 0)
		return 0;
	int traced = 0;
	u8 known = KNOWN_EMITTED;
	if (mode_is_io(id->mode) && !excluded_devs.lookup(&id->dev)) {
		known = file_admitted(file, id, 0);
		traced = (known & KNOWN_ADMITTED) != 0;
	}
	/* A path that could not be delivered is retried: do not cache that verdict. */
	if (!traced || (known & KNOWN_EMITTED)) {
		struct file_verdict verdict = {
			.inode = (u64)inode, .ino = id->ino, .dev = id->dev, .mode = id->mode, .traced = traced,
		};
		file_cache.update(&key, &verdict);
	}
	return traced;
}

/* A connection's identity for known_files: its ends, so that a connect sends it again (and a
 * socket inode number used again by another connection does not keep the earlier name). */
static __always_inline u32 peer_generation(struct ioo_sock_desc *desc)
{
	u32 words[4] = {};
	__builtin_memcpy(words, desc->peer_addr, sizeof(words));
	return (words[0] ^ words[1] ^ words[2] ^ words[3]) ^ ((u32)desc->peer_port << 16 | desc->local_port);
}

/* The hash serve keys a socket's calls by: its service end's (struct ioo_endpoint), named in
 * endpoint_names; never 0. The service end is the one with the lower port. */
static __always_inline u32 socket_endpoint(struct ioo_sock_desc *desc)
{
#ifdef IOO_AGGREGATE
	struct ioo_endpoint end = {.family = desc->family, .type = desc->type};
	int peer_side = desc->peer_port && desc->peer_port <= desc->local_port;
	end.port = peer_side ? desc->peer_port : desc->local_port;
	__builtin_memcpy(end.addr, peer_side ? desc->peer_addr : desc->local_addr, sizeof(end.addr));
	u32 words[4] = {};
	__builtin_memcpy(words, end.addr, sizeof(words));
	u32 hash = 2166136261u;  /* FNV-1a over 32-bit words */
	hash = (hash ^ ((u32)end.family << 16 | end.type)) * 16777619u;
	hash = (hash ^ words[0]) * 16777619u;
	hash = (hash ^ words[1]) * 16777619u;
	hash = (hash ^ words[2]) * 16777619u;
	hash = (hash ^ words[3]) * 16777619u;
	hash = (hash ^ end.port) * 16777619u;
	hash = hash ? hash : 1;
	endpoint_names.update(&hash, &end);
	return hash;
#else
	return 0;
#endif
}

/* Send a socket's ends as its path record, once per (dev, ino) and peer; returns serve's
 * hash of its service end (0: not aggregating, or not known). */
static __always_inline u32 describe_socket(void *sock, void *sk, u16 family, struct file_ident *id)
{
	u32 zero = 0;
	struct ioo_path_record *rec = path_scratch.lookup(&zero);
	if (!rec)
		return 0;
	struct ioo_sock_desc *desc = (struct ioo_sock_desc *)rec->data;
	__builtin_memset(desc, 0, sizeof(*desc));
	desc->family = family;
	desc->type = read_u16(sock, OFF_SOCKET_TYPE);
	desc->local_port = read_u16(sk, OFF_SOCK_COMMON_SKC_NUM);
	desc->peer_port = __builtin_bswap16(read_u16(sk, OFF_SOCK_COMMON_SKC_DPORT));
	if (family == AF_INET_) {
		bpf_probe_read_kernel(desc->local_addr, 4, (char *)sk + OFF_SOCK_COMMON_SKC_RCV_SADDR);
		bpf_probe_read_kernel(desc->peer_addr, 4, (char *)sk + OFF_SOCK_COMMON_SKC_DADDR);
	} else if (OFF_SOCK_COMMON_SKC_V6_DADDR >= 0) {
		bpf_probe_read_kernel(desc->local_addr, 16, (char *)sk + OFF_SOCK_COMMON_SKC_V6_RCV_SADDR);
		bpf_probe_read_kernel(desc->peer_addr, 16, (char *)sk + OFF_SOCK_COMMON_SKC_V6_DADDR);
	}
	struct ioo_file_key key = {.ino = id->ino, .dev = id->dev};
	u32 gen = peer_generation(desc);
	struct known_file *seen = known_files.lookup(&key);
	if (seen && seen->gen == gen) {
#ifdef IOO_AGGREGATE
		return seen->endpoint;
#else
		return 0;
#endif
	}
	rec->hdr.kind = IOO_AUX_PATH;
	rec->hdr.size = __builtin_offsetof(struct ioo_path_record, data) + sizeof(*desc);
	rec->ino = id->ino;
	rec->dev = id->dev;
	rec->mode = id->mode;
	rec->flags = 0;
	rec->len = sizeof(*desc);
	rec->depth = 0;
	if (aux.ringbuf_output(rec, __builtin_offsetof(struct ioo_path_record, data) + sizeof(*desc), 0) != 0) {
		count_lost(LOST_AUX_BASE + IOO_AUX_PATH);
		return 0;  /* not remembered: sent again on the next call */
	}
	struct known_file value = {.gen = gen, .known = KNOWN_ADMITTED | KNOWN_EMITTED, .endpoint = socket_endpoint(desc)};
	known_files.update(&key, &value);
	return value.endpoint;
}

/* Whether an open file that file_traced() turned down (id: what it read of it) is an Internet
 * socket, which the net layer traces; with `describe`, its ends are sent if not yet known, and
 * *endpoint is serve's hash of its service end. The path filter does not apply: a socket has
 * no path. */
static __always_inline int socket_traced(void *file, struct file_ident *id, int describe, u32 *endpoint)
{
	if ((id->mode & S_IFMT_) != S_IFSOCK_)
		return 0;
	void *sock = read_ptr(file, OFF_FILE_PRIVATE_DATA);
	void *sk = sock ? read_ptr(sock, OFF_SOCKET_SK) : NULL;
	if (!sk)
		return 0;
	u16 family = read_u16(sk, OFF_SOCK_COMMON_SKC_FAMILY);
	if (family != AF_INET_ && family != AF_INET6_)
		return 0;
	if (describe)
		*endpoint = describe_socket(sock, sk, family, id);
	return 1;
}

/* Resolve the directory a relative path starts from and make sure its path is sent. */
static __always_inline void path_base(struct inflight *st, s16 dirfd_arg, struct ioo_name_record *rec)
{
	void *task = (void *)bpf_get_current_task();
	struct walk_req req = {.force = 1};
	s32 dirfd = dirfd_arg >= 0 ? (s32)arg_at(st, dirfd_arg) : AT_FDCWD_;
	if (dirfd == AT_FDCWD_) {
		void *fs = read_ptr(task, OFF_TASK_FS);
		if (!fs)
			return;
		req.vfsmnt = read_ptr(fs, OFF_FS_STRUCT_PWD_MNT);
		req.dentry = read_ptr(fs, OFF_FS_STRUCT_PWD_DENTRY);
	} else {
		void *file = fd_file(dirfd);
		if (!file)
			return;
		req.vfsmnt = read_ptr(file, OFF_FILE_F_PATH_MNT);
		req.dentry = read_ptr(file, OFF_FILE_F_PATH_DENTRY);
	}
	if (!req.dentry || inode_ident(read_ptr(req.dentry, OFF_DENTRY_D_INODE), &req.id) < 0)
		return;
	rec->base_ino = req.id.ino;
	rec->base_dev = req.id.dev;
	struct ioo_file_key key = {.ino = req.id.ino, .dev = req.id.dev};
	req.gen = read_u32(read_ptr(req.dentry, OFF_DENTRY_D_INODE), OFF_INODE_I_GENERATION);
	struct known_file *seen = known_files.lookup(&key);
	if (!seen || seen->gen != req.gen || !(seen->known & KNOWN_EMITTED))
		walk_path(&req);
}

/* Absolute path strings against the --path-prefix strings: one hash lookup per distinct
 * prefix length (no byte loops), then a component boundary check. */
static __always_inline int prefix_matches(struct ioo_name_record *rec)
{
	u32 zero = 0;
	struct prefix_key *key = prefix_key_scratch.lookup(&zero);
	if (!key)
		return 0;
	for (u32 i = 0; i < IOO_MAX_PREFIXES; i++) {
		u32 index = i;
		u32 *len = prefix_lens.lookup(&index);
		if (!len || *len == 0)
			break;
		u32 n = *len & (IOO_PREFIX_LEN - 1);
		__builtin_memset(key, 0, sizeof(*key));
		bpf_probe_read_kernel(key->path, n, rec->data);
		char next = rec->data[n];
		if ((next == '/' || next == 0 || key->path[n - 1 & (IOO_PREFIX_LEN - 1)] == '/') && prefix_strings.lookup(key))
			return 1;
	}
	return 0;
}

/* Send the user's path argument; returns 0 if a filter rejects it. */
static __always_inline int emit_name(struct ioo_config *cfg, struct inflight *st, s16 path_arg,
				     s16 dirfd_arg, u16 index, int decided)
{
	u32 zero = 0;
	struct ioo_name_record *rec = name_scratch.lookup(&zero);
	if (!rec)
		return 1;
	int n = bpf_probe_read_user_str(rec->data, IOO_NAME_LEN, (void *)arg_at(st, path_arg));
	if (n < 0)
		n = 0;
	rec->base_ino = 0;
	rec->base_dev = 0;
	if (rec->data[0] == '/') {
		/* Pseudo-filesystems are excluded by name when no file identity decides. */
		if (!decided && (
		    (rec->data[1] == 'p' && rec->data[2] == 'r' && rec->data[3] == 'o' && rec->data[4] == 'c' && (rec->data[5] == '/' || rec->data[5] == 0)) ||
		    (rec->data[1] == 's' && rec->data[2] == 'y' && rec->data[3] == 's' && (rec->data[4] == '/' || rec->data[4] == 0)) ||
		    (rec->data[1] == 'd' && rec->data[2] == 'e' && rec->data[3] == 'v' && (rec->data[4] == '/' || rec->data[4] == 0))))
			return 0;
		if (!decided && cfg->filter_path && !prefix_matches(rec))
			return 0;
	} else if (n > 0) {
		/* Relative: the path filter is finished in user space once the base is known. */
		path_base(st, dirfd_arg, rec);
	}
	rec->hdr.kind = IOO_AUX_NAME;
	rec->ts_ns = st->ts;
	rec->tid = bpf_get_current_pid_tgid();
	rec->index = index;
	rec->len = n > 0 ? n - 1 : 0;
	u64 size = __builtin_offsetof(struct ioo_name_record, data) + (u64)(n > 0 ? n : 0);
	CLAMP(size, sizeof(*rec));
	rec->hdr.size = size;
	if (aux.ringbuf_output(rec, size, 0) != 0) {
		count_lost(LOST_AUX_BASE + IOO_AUX_NAME);
		return 1;
	}
	return 2;
}

/* Whether a page cache change of (dev, ino) outside a traced call is to be reported. */
static __always_inline int cache_file_selected(struct ioo_config *cfg, u32 dev, u64 ino)
{
	if (excluded_devs.lookup(&dev))
		return 0;
	if (!cfg->filter_path)
		return 1;
	struct ioo_file_key key = {.ino = ino, .dev = dev};
	struct known_file *seen = known_files.lookup(&key);
	return seen && (seen->known & KNOWN_ADMITTED);
}
