"""The recorder's threads under their own names in the kernel (`top -H`, `ps -L`, perf,
/proc/PID/task/TID/comm), so that an admin sees which stage takes the CPU."""

from __future__ import annotations

import ctypes
import threading

_PR_SET_NAME = 15
_LIMIT = 15  # the kernel's comm holds 15 bytes and a NUL
_libc = None


def name_this_thread(name: str | None = None) -> None:
    """Give the calling thread its Python name (or `name`), as `ioo-worker` for `ioobserve-worker`."""
    global _libc
    name = (name or threading.current_thread().name).replace("ioobserve-", "ioo-")
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        _libc.prctl(_PR_SET_NAME, name.encode()[:_LIMIT], 0, 0, 0)
    except (OSError, AttributeError):
        pass  # a name is a convenience: never a failure
