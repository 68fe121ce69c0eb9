"""Which io_uring and Linux AIO requests the IO_URING and AIO layers trace, and how the probes
read each one (the `uring_specs` and `aio_ops` maps)."""

from __future__ import annotations

import numpy as np

from ioobserve.data import events as ev

# IORING_OP_* (uapi, fixed) -> (our op, how its io_kiocb is read: ev.U_*). Only requests on
# files: sockets, polls, timeouts and the like are not file I/O.
URING_OPS: dict[int, tuple[str, int]] = {
    1: ("uring_readv", ev.U_RW | ev.U_VEC),
    2: ("uring_writev", ev.U_RW | ev.U_VEC),
    3: ("uring_fsync", ev.U_SYNC),
    4: ("uring_read_fixed", ev.U_RW),
    5: ("uring_write_fixed", ev.U_RW),
    8: ("uring_sync_file_range", ev.U_SYNC),
    17: ("uring_fallocate", ev.U_SYNC),
    18: ("uring_openat", ev.U_RET_FD),
    19: ("uring_close", ev.U_FD),
    21: ("uring_statx", 0),
    22: ("uring_read", ev.U_RW),
    23: ("uring_write", ev.U_RW),
    28: ("uring_openat2", ev.U_RET_FD),
    35: ("uring_renameat", 0),
    36: ("uring_unlinkat", 0),
    37: ("uring_mkdirat", 0),
    55: ("uring_ftruncate", 0),
    60: ("uring_readv_fixed", ev.U_RW | ev.U_VEC),
    61: ("uring_writev_fixed", ev.U_RW | ev.U_VEC),
}

# IOCB_CMD_* (uapi, fixed) -> our op
AIO_CMDS: dict[int, str] = {0: "aio_pread", 1: "aio_pwrite", 2: "aio_fsync", 3: "aio_fdsync", 7: "aio_preadv",
                            8: "aio_pwritev"}


def uring_spec_array() -> np.ndarray:
    """The contents of the `uring_specs` map: one entry per io_uring opcode."""
    table = np.zeros(ev.URING_OPS, dtype=ev.URING_SPEC)
    for opcode, (op, how) in URING_OPS.items():
        table[opcode] = (ev.OP_CODES[op], how)
    return table


def aio_op_array() -> np.ndarray:
    """The contents of the `aio_ops` map: our op code per IOCB_CMD_*."""
    table = np.zeros(ev.AIO_CMDS, dtype=[("op", "<u2")])
    for cmd, op in AIO_CMDS.items():
        table[cmd] = ev.OP_CODES[op]
    return table
