"""glibc's handling of big buffers, for the processes that make and drop many of them.

Above a threshold glibc maps each allocation on its own and unmaps it when freed, so every
new buffer is fresh memory the kernel must fault in and zero: in this kind of VM, a third of
a trace load's time, and half the capture process's CPU on a flood (bench/README.md). Kept
for reuse instead, a freed buffer serves the next one at no cost.
"""

from __future__ import annotations

import ctypes

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8  # glibc's mallopt parameters
KEEP_BYTES = 256 << 20
_kept = False


def keep_freed_buffers(arenas: int | None = None, keep_bytes: int = KEEP_BYTES) -> None:
    """Ask glibc to keep freed buffers (those under `keep_bytes`, and up to that much at the
    top of the heap) for reuse instead of handing them back to the kernel; `arenas`: at most this many malloc arenas (with one per thread, each
    keeps its own freed buffers: a reader of 100 M events grew past 1.6 GB, flat at 180 MB
    with two). Process-wide, done once, and skipped where the C library is not glibc."""
    global _kept
    if _kept:
        return
    _kept = True
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    if arenas is not None:
        mallopt(_M_ARENA_MAX, arenas)
    mallopt(_M_TRIM_THRESHOLD, keep_bytes)
    mallopt(_M_MMAP_THRESHOLD, keep_bytes)


def release_freed_buffers() -> None:
    """Hand the freed buffers kept for reuse back to the kernel, once a long piece of work
    is done: whatever runs next in the process should not sit on them. Skipped where the C
    library is not glibc."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        return
