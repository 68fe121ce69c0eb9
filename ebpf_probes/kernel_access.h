/* Reading kernel structures by offsets taken from the running kernel's BTF.
 *
 * The headers bcc compiles against may belong to another kernel (Debian's 6.1 headers on
 * a 6.18 kernel), so no struct layout from them is trusted. User space passes every offset
 * as -DOFF_<STRUCT>_<FIELD>=<bytes> (ioobserve/probes/kernel_layout.py); a missing one is
 * a compile error, never a silent guess.
 */
#ifndef IOOBSERVE_KERNEL_ACCESS_H
#define IOOBSERVE_KERNEL_ACCESS_H

#define S_IFMT_ 00170000
#define S_IFREG_ 0100000
#define S_IFDIR_ 0040000
#define S_IFLNK_ 0120000
#define S_IFBLK_ 0060000

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

/* struct file * behind a descriptor of the current task, or NULL. */
static __always_inline void *fd_file(void *task, s64 fd)
{
	if (fd < 0)
		return NULL;
	void *files = read_ptr(task, OFF_TASK_FILES);
	if (!files)
		return NULL;
	void *fdt = read_ptr(files, OFF_FILES_FDT);
	if (!fdt)
		return NULL;
	u32 max_fds = read_u32(fdt, OFF_FDTABLE_MAX_FDS);
	if ((u64)fd >= max_fds)
		return NULL;
	void **array = read_ptr(fdt, OFF_FDTABLE_FD);
	if (!array)
		return NULL;
	return read_ptr(array, (u64)fd * sizeof(void *));
}

struct file_ident {
	u64 ino;
	u32 dev;
	u16 mode;
};

static __always_inline int inode_ident(void *inode, struct file_ident *id)
{
	if (!inode)
		return -1;
	void *sb = read_ptr(inode, OFF_INODE_I_SB);
	id->ino = read_u64(inode, OFF_INODE_I_INO);
	id->mode = read_u16(inode, OFF_INODE_I_MODE);
	id->dev = sb ? read_u32(sb, OFF_SUPER_BLOCK_S_DEV) : 0;
	return 0;
}

static __always_inline int file_ident(void *file, struct file_ident *id)
{
	if (!file)
		return -1;
	return inode_ident(read_ptr(file, OFF_FILE_F_INODE), id);
}

/* Files, directories, links and block devices are I/O; pipes, sockets and the like are not. */
static __always_inline int mode_is_io(u16 mode)
{
	u16 type = mode & S_IFMT_;
	return type == S_IFREG_ || type == S_IFDIR_ || type == S_IFLNK_ || type == S_IFBLK_;
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
