"""Struct offsets of the running kernel, as -D flags for the probes (ebpf_probes/kernel_access.h)."""

from __future__ import annotations

from dataclasses import dataclass

from ioobserve.probes.kernel.btf import Btf, BtfError
from ioobserve.probes.kernel.syscall_table import machine_arch

# OFF_<macro> -> (struct, dotted member path)
FIELDS: dict[str, tuple[str, str]] = {
    "TASK_TGID": ("task_struct", "tgid"),
    "TASK_PID": ("task_struct", "pid"),
    "TASK_REAL_PARENT": ("task_struct", "real_parent"),
    "TASK_FILES": ("task_struct", "files"),
    "TASK_FS": ("task_struct", "fs"),
    "TASK_MM": ("task_struct", "mm"),
    "TASK_EXIT_CODE": ("task_struct", "exit_code"),
    "TASK_FLAGS": ("task_struct", "flags"),
    "TASK_COMM": ("task_struct", "comm"),
    "TASK_CRED": ("task_struct", "cred"),
    "CRED_UID": ("cred", "uid"),
    "TASK_CGROUPS": ("task_struct", "cgroups"),
    "CSS_SET_DFL_CGRP": ("css_set", "dfl_cgrp"),
    "CGROUP_KN": ("cgroup", "kn"),
    "CGROUP_ROOT": ("cgroup", "root"),
    "KERNFS_NODE_ID": ("kernfs_node", "id"),
    "FILES_FDT": ("files_struct", "fdt"),
    "FDTABLE_MAX_FDS": ("fdtable", "max_fds"),
    "FDTABLE_FD": ("fdtable", "fd"),
    "FILE_F_INODE": ("file", "f_inode"),
    "FILE_F_PATH_MNT": ("file", "f_path.mnt"),
    "FILE_F_PATH_DENTRY": ("file", "f_path.dentry"),
    "FILE_F_POS": ("file", "f_pos"),
    "INODE_I_INO": ("inode", "i_ino"),
    "INODE_I_SB": ("inode", "i_sb"),
    "INODE_I_MODE": ("inode", "i_mode"),
    "INODE_I_GENERATION": ("inode", "i_generation"),
    "SUPER_BLOCK_S_DEV": ("super_block", "s_dev"),
    "DENTRY_D_PARENT": ("dentry", "d_parent"),
    "DENTRY_D_NAME_NAME": ("dentry", "d_name.name"),
    "DENTRY_D_INODE": ("dentry", "d_inode"),
    "MOUNT_MNT": ("mount", "mnt"),
    "MOUNT_MNT_PARENT": ("mount", "mnt_parent"),
    "MOUNT_MNT_MOUNTPOINT": ("mount", "mnt_mountpoint"),
    "VFSMOUNT_MNT_ROOT": ("vfsmount", "mnt_root"),
    "FS_STRUCT_PWD_MNT": ("fs_struct", "pwd.mnt"),
    "FS_STRUCT_PWD_DENTRY": ("fs_struct", "pwd.dentry"),
    "MM_STRUCT_ARG_START": ("mm_struct", "arg_start"),
    "MM_STRUCT_ARG_END": ("mm_struct", "arg_end"),
    "MM_STRUCT_ENV_START": ("mm_struct", "env_start"),
    "MM_STRUCT_ENV_END": ("mm_struct", "env_end"),
    "LINUX_BINPRM_FILENAME": ("linux_binprm", "filename"),
    "LINUX_BINPRM_FILE": ("linux_binprm", "file"),
    "MM_STRUCT_START_CODE": ("mm_struct", "start_code"),
    "TASK_THREAD_PID": ("task_struct", "thread_pid"),
    "PID_LEVEL": ("pid", "level"),
    "PID_NUMBERS": ("pid", "numbers"),
    "BIO_BI_BDEV": ("bio", "bi_bdev"),
    "BLOCK_DEVICE_BD_DEV": ("block_device", "bd_dev"),
    "REQUEST_SECTOR": ("request", "__sector"),
    "REQUEST_DATA_LEN": ("request", "__data_len"),
    "REQUEST_CMD_FLAGS": ("request", "cmd_flags"),
    "REQUEST_BIO": ("request", "bio"),
    # an Internet socket's ends (the net layer): file -> struct socket -> struct sock
    "FILE_PRIVATE_DATA": ("file", "private_data"),
    "SOCKET_TYPE": ("socket", "type"),
    "SOCKET_SK": ("socket", "sk"),
    "SOCK_COMMON_SKC_FAMILY": ("sock_common", "skc_family"),
    "SOCK_COMMON_SKC_NUM": ("sock_common", "skc_num"),
    "SOCK_COMMON_SKC_DPORT": ("sock_common", "skc_dport"),
    "SOCK_COMMON_SKC_DADDR": ("sock_common", "skc_daddr"),
    "SOCK_COMMON_SKC_RCV_SADDR": ("sock_common", "skc_rcv_saddr"),
}

# OFF_<macro> -> (struct, member) that some architectures lack: -1 there (the C code checks).
OPTIONAL_FIELDS: dict[str, tuple[str, str]] = {
    "TASK_THREAD_FSBASE": ("task_struct", "thread.fsbase"),  # x86_64: the thread pointer, pthread_self()
    "SOCK_COMMON_SKC_V6_DADDR": ("sock_common", "skc_v6_daddr"),  # absent from a kernel without IPv6
    "SOCK_COMMON_SKC_V6_RCV_SADDR": ("sock_common", "skc_v6_rcv_saddr"),
}

# OFF_<macro> -> (struct, member) the IO_URING layer reads: io_uring's own structs, absent
# from a kernel built without it (-1 there, and the layer is unavailable: uring_layout_ok).
URING_FIELDS: dict[str, tuple[str, str]] = {
    "IO_KIOCB_FILE": ("io_kiocb", "file"),
    "IO_KIOCB_OPCODE": ("io_kiocb", "opcode"),
    "IO_KIOCB_FLAGS": ("io_kiocb", "flags"),
    "IO_KIOCB_CQE_FD": ("io_kiocb", "cqe.fd"),  # the SQE's fd until the request completes
    "IO_KIOCB_CQE_RES": ("io_kiocb", "cqe.res"),
    "IO_KIOCB_CTX": ("io_kiocb", "ctx"),
    # A request's op data (io_kiocb.cmd, at the same place as file) as read and write fill it
    "IO_RW_POS": ("io_rw", "kiocb.ki_pos"),
    "IO_RW_ADDR": ("io_rw", "addr"),
    "IO_RW_LEN": ("io_rw", "len"),
    "IO_SYNC_OFF": ("io_sync", "off"),
    "IO_SYNC_LEN": ("io_sync", "len"),
    "IO_OPEN_FILE_SLOT": ("io_open", "file_slot"),  # nonzero: the file goes to a registered slot, not an fd
}

# SIZEOF_<macro> -> struct
SIZES: dict[str, str] = {
    "UPID": "upid",  # struct pid's numbers[], one per pid namespace level
}

# pt_regs members holding syscall arguments 0..5 (the syscall ABI, not the C one).
SYSCALL_ARG_REGS: dict[str, tuple[str, ...]] = {
    "x86_64": ("di", "si", "dx", "r10", "r8", "r9"),
    "aarch64": tuple(f"regs.{i}" for i in range(6)),
}
# Where pt_regs holds the syscall's number (what sys_enter passes as its id).
SYSCALL_NR_REG = {"x86_64": "orig_ax", "aarch64": "syscallno"}


@dataclass(frozen=True)
class KernelLayout:
    """Offsets the probes need, and where they came from."""

    offsets: dict[str, int]
    source: str  # "BTF" or an explanation

    def cflags(self) -> list[str]:
        """-D flags: OFF_<field> for struct members, SIZEOF_<struct> for sizes, SYSCALL_ARGS_LO/HI
        for the pt_regs span."""
        bare = ("SYSCALL_ARGS_", "SIZEOF_", "URING_SPAN")
        return [f"-D{'' if name.startswith(bare) else 'OFF_'}{name}={value}" for name, value in sorted(self.offsets.items())]


def _reg_offset(btf: Btf, member: str) -> int:
    if member.startswith("regs."):
        return btf.offset("pt_regs", "regs") + 8 * int(member.split(".")[1])
    return btf.offset("pt_regs", member)


def layout_from_btf(btf: Btf, arch: str | None = None) -> KernelLayout:
    """Every offset the probes read, taken from `btf`; raises BtfError if one is missing."""
    arch = arch or machine_arch()
    offsets = {name: btf.offset(struct, member) for name, (struct, member) in FIELDS.items()}
    offsets.update({name: btf.offset(struct, member) if btf.has_member(struct, member) else -1
                    for name, (struct, member) in (OPTIONAL_FIELDS | URING_FIELDS).items()})
    offsets.update({f"SIZEOF_{name}": btf.struct_size(struct) for name, struct in SIZES.items()})
    regs = SYSCALL_ARG_REGS.get(arch)
    if regs is None:
        raise BtfError(f"no syscall argument registers known for {arch}")
    for index, member in enumerate(regs):
        offsets[f"SYSCALL_ARG{index}"] = _reg_offset(btf, member)
    offsets["SYSCALL_NR"] = _reg_offset(btf, SYSCALL_NR_REG[arch])
    args = [offsets[f"SYSCALL_ARG{i}"] for i in range(6)]
    offsets["SYSCALL_ARGS_LO"], offsets["SYSCALL_ARGS_HI"] = min(args), max(args)
    # The bytes at the start of an io_kiocb that hold every field read: one copy per probe.
    offsets["URING_SPAN"] = (max(offsets[name] for name in URING_FIELDS) + 8 + 7) // 8 * 8
    return KernelLayout(offsets, "BTF")


def uring_layout_ok(layout: KernelLayout) -> bool:
    """Whether the kernel has every io_uring struct member the IO_URING layer reads."""
    return all(layout.offsets.get(name, -1) >= 0 for name in URING_FIELDS)
