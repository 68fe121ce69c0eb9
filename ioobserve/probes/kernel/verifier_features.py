"""What this kernel's verifier accepts, learnt by loading tiny programs rather than from its
version (distributions backport): the probes are compiled for it with -D flags."""

from __future__ import annotations

import os
import struct
from functools import cache

from ioobserve.probes.kernel.bpf_syscall import prog_load
from ioobserve.probes.kernel.kernel_layout import KernelLayout

BPF_PROG_TYPE_RAW_TRACEPOINT = 17
GET_CURRENT_TASK_BTF = 158


def _insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    return struct.pack("<BBhi", code, src << 4 | dst, off, imm)


def _fd_array_program(layout: KernelLayout) -> bytes:
    """task->files->fdt->fd[0] by plain loads, as fd_file() reads it (kernel_access.h)."""
    ldx_dw, jeq_imm, call, mov_imm, exit_ = 0x79, 0x15, 0x85, 0xB7, 0x95
    offsets = layout.offsets
    return b"".join((
        _insn(call, imm=GET_CURRENT_TASK_BTF),
        _insn(ldx_dw, 1, 0, offsets["TASK_FILES"]),
        _insn(jeq_imm, 1, off=5),
        _insn(ldx_dw, 1, 1, offsets["FILES_FDT"]),
        _insn(jeq_imm, 1, off=3),
        _insn(ldx_dw, 1, 1, offsets["FDTABLE_FD"]),
        _insn(jeq_imm, 1, off=1),
        _insn(ldx_dw, 1, 1, 0),
        _insn(mov_imm, 0),
        _insn(exit_),
    ))


@cache
def _loads(program: bytes) -> bool:
    try:
        fd = prog_load(BPF_PROG_TYPE_RAW_TRACEPOINT, program, b"ioo_feature", b"GPL", 0)
    except OSError:
        return False
    os.close(fd)
    return True


def fd_array_typed(layout: KernelLayout) -> bool:
    """Whether the verifier types the descriptor table's `struct file **` (newer kernels), so
    that fd_file reads a file pointer by a plain load instead of a helper call."""
    return _loads(_fd_array_program(layout))


def verifier_cflags(layout: KernelLayout) -> list[str]:
    """-D flags for what this kernel's verifier accepts."""
    return [f"-DIOO_FD_ARRAY_TYPED={int(fd_array_typed(layout))}"]
