/* Reading kernel structures by offsets taken from the running kernel's BTF.
 *
 * The headers bcc compiles against may belong to another kernel (Debian's 6.1 headers on
 * a 6.18 kernel), so no struct layout from them is trusted. User space passes every offset
 * as -DOFF_<STRUCT>_<FIELD>=<bytes> (ioobserve/probes/kernel/kernel_layout.py); a missing one is
 * a compile error, never a silent guess.
 */
#ifndef IOOBSERVE_KERNEL_ACCESS_H
#define IOOBSERVE_KERNEL_ACCESS_H

/* A loop counter's value hidden from clang (not from the verifier) at the top of a loop's body.
 * Otherwise clang folds the loop's constant bound into a runtime one ("i != depth") or walks a
 * pointer in place of the index: loops that verifiers before about 6.7 cannot prove to end,
 * as they learn no range from a != test. */
#define LOOP_INDEX(i) asm volatile("" : "+r"(i))

/* v = min(v, max) for a u64 on the register itself, in asm: 6.1's verifier loses a bound that
 * clang checked on a copy of the register, or on its 32-bit half. */
#define CLAMP(v, max) asm volatile("if %0 <= %1 goto +1\n\t%0 = %1" : "+r"(v) : "i"(max))

#define S_IFMT_ 00170000
#define S_IFREG_ 0100000
#define S_IFDIR_ 0040000
#define S_IFLNK_ 0120000
#define S_IFBLK_ 0060000
#define S_IFSOCK_ 0140000
#define AF_INET_ 2
#define AF_INET6_ 10

static __always_inline u64 read_u64(const void *base, u64 off)
{
	u64 val = 0;
	bpf_probe_read_kernel(&val, sizeof(val), (const char *)base + off);
	return val;
}

static __always_inline u32 read_u32(const void *base, u64 off)
{
	u32 val = 0;
	bpf_probe_read_kernel(&val, sizeof(val), (const char *)base + off);
	return val;
}

static __always_inline u16 read_u16(const void *base, u64 off)
{
	u16 val = 0;
	bpf_probe_read_kernel(&val, sizeof(val), (const char *)base + off);
	return val;
}

static __always_inline void *read_ptr(const void *base, u64 off)
{
	return (void *)read_u64(base, off);
}

/* struct file * behind a descriptor of the current task, or NULL. The task, its
 * files_struct and fdtable are BTF-typed pointers, so these are plain loads, not helper
 * calls (bpf_get_current_task_btf, kernel 5.11+); the file pointer comes out untyped. */
static __always_inline void *fd_file(s64 fd)
{
	if (fd < 0)
		return NULL;
	char *task = (char *)bpf_get_current_task_btf();
	char *files = *(char **)(task + OFF_TASK_FILES);
	if (!files)
		return NULL;
	char *fdt = *(char **)(files + OFF_FILES_FDT);
	if (!fdt)
		return NULL;
	u32 max_fds = *(u32 *)(fdt + OFF_FDTABLE_MAX_FDS);
	if ((u64)fd >= max_fds)
		return NULL;
	void **array = *(void ***)(fdt + OFF_FDTABLE_FD);
	if (!array)
		return NULL;
	/* fd < max_fds <= fs.nr_open (at most 2^30): the mask only bounds it for the verifier */
#if IOO_FD_ARRAY_TYPED
	return array[fd & 0x3fffffff];
#else
	/* kernels that type no pointer to pointer (before about 6.13): one helper call */
	return read_ptr(array, (fd & 0x3fffffff) * sizeof(void *));
#endif
}

/* The current task's uid, cgroup v2 id and comm, as plain loads through BTF-typed
 * pointers: on this kind of VM each helper call costs ~50 ns, a load almost nothing. */
static __always_inline u32 current_uid(void)
{
	char *task = (char *)bpf_get_current_task_btf();
	char *cred = *(char **)(task + OFF_TASK_CRED);
	return cred ? *(u32 *)(cred + OFF_CRED_UID) : 0;
}

static __always_inline u64 current_cgroup_id(void)
{
	char *task = (char *)bpf_get_current_task_btf();
	char *css_set = *(char **)(task + OFF_TASK_CGROUPS);
	if (!css_set)
		return 0;
	char *cgroup = *(char **)(css_set + OFF_CSS_SET_DFL_CGRP);
	if (!cgroup)
		return 0;
	char *kn = *(char **)(cgroup + OFF_CGROUP_KN);
	return kn ? *(u64 *)(kn + OFF_KERNFS_NODE_ID) : 0;
}

static __always_inline void current_comm(char *dst)
{
	char *task = (char *)bpf_get_current_task_btf();
	*(u64 *)dst = *(u64 *)(task + OFF_TASK_COMM);
	*(u64 *)(dst + 8) = *(u64 *)(task + OFF_TASK_COMM + 8);
}

struct file_ident {
	u64 ino;
	u32 dev;
	u16 mode;
};

#define MIN_(a, b) ((a) < (b) ? (a) : (b))
#define MAX_(a, b) ((a) > (b) ? (a) : (b))
#define FILE_LO MIN_(OFF_FILE_F_INODE, OFF_FILE_F_POS)
#define FILE_HI MAX_(OFF_FILE_F_INODE, OFF_FILE_F_POS)
#define INODE_LO MIN_(MIN_(OFF_INODE_I_MODE, OFF_INODE_I_SB), OFF_INODE_I_INO)
#define INODE_HI MAX_(MAX_(OFF_INODE_I_MODE, OFF_INODE_I_SB), OFF_INODE_I_INO)

/* f_inode and f_pos of an open file, in one read. */
static __always_inline void *file_inode_pos(void *file, s64 *pos)
{
	char chunk[FILE_HI - FILE_LO + 8];
	if (bpf_probe_read_kernel(chunk, sizeof(chunk), (char *)file + FILE_LO) < 0)
		return NULL;
	void *inode;
	__builtin_memcpy(&inode, chunk + (OFF_FILE_F_INODE - FILE_LO), sizeof(inode));
	__builtin_memcpy(pos, chunk + (OFF_FILE_F_POS - FILE_LO), sizeof(*pos));
	return inode;
}

/* An inode's device, number and mode, in two reads (the inode, then its superblock). */
static __always_inline int inode_ident(void *inode, struct file_ident *id)
{
	char chunk[INODE_HI - INODE_LO + 8];
	if (!inode || bpf_probe_read_kernel(chunk, sizeof(chunk), (char *)inode + INODE_LO) < 0)
		return -1;
	void *sb;
	__builtin_memcpy(&sb, chunk + (OFF_INODE_I_SB - INODE_LO), sizeof(sb));
	__builtin_memcpy(&id->ino, chunk + (OFF_INODE_I_INO - INODE_LO), sizeof(id->ino));
	__builtin_memcpy(&id->mode, chunk + (OFF_INODE_I_MODE - INODE_LO), sizeof(id->mode));
	id->dev = sb ? read_u32(sb, OFF_SUPER_BLOCK_S_DEV) : 0;
	return 0;
}

/* Files, directories, links and block devices are I/O; pipes, sockets and the like are not. */
static __always_inline int mode_is_io(u16 mode)
{
	u16 type = mode & S_IFMT_;
	return type == S_IFREG_ || type == S_IFDIR_ || type == S_IFLNK_ || type == S_IFBLK_;
}

/* The calling thread's id as its own pid namespace numbers it: what gettid() told it. */
static __always_inline u32 current_ns_tid(void)
{
	char *task = (char *)bpf_get_current_task_btf();
	char *pid = *(char **)(task + OFF_TASK_THREAD_PID);
	if (!pid)
		return 0;
	u64 level = *(u32 *)(pid + OFF_PID_LEVEL);
	asm volatile("%0 &= 0x3f" : "+r"(level));  /* MAX_PID_NS_LEVEL is 32 */
	return read_u32(pid, OFF_PID_NUMBERS + level * SIZEOF_UPID);  /* upid.nr comes first */
}

/* The calling thread's thread pointer, which glibc's pthread_self() returns (x86_64: the FS
 * base; 0 where the kernel's BTF has none). */
static __always_inline u64 current_thread_pointer(void)
{
#if OFF_TASK_THREAD_FSBASE >= 0
	return read_u64(bpf_get_current_task_btf(), OFF_TASK_THREAD_FSBASE);
#else
	return 0;
#endif
}

/* The syscall argument `index` from the pt_regs the raw sys_enter tracepoint gives. */
static __always_inline u64 syscall_arg(const void *regs, int index)
{
	switch (index) {
	case 0: return read_u64(regs, OFF_SYSCALL_ARG0);
	case 1: return read_u64(regs, OFF_SYSCALL_ARG1);
	case 2: return read_u64(regs, OFF_SYSCALL_ARG2);
	case 3: return read_u64(regs, OFF_SYSCALL_ARG3);
	case 4: return read_u64(regs, OFF_SYSCALL_ARG4);
	case 5: return read_u64(regs, OFF_SYSCALL_ARG5);
	}
	return 0;
}

#endif /* IOOBSERVE_KERNEL_ACCESS_H */
