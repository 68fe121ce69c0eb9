"""The observed applications come first: ioobserve's own work runs niced.

The recorder lowers its priority before it starts any thread (threads, including Polars'
pool, inherit it); the capture thread alone returns to the original priority so the rings
are drained on time, and a command started with `record -- CMD` runs at the original
priority too. Work behind the capture thread queues up and catches up when CPUs are free;
if the queue fills, the rings overflow and the loss is counted, never silent.
"""

from __future__ import annotations

import os
import threading

BACKGROUND_NICE = 10


def _set_thread_nice(value: int) -> None:
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), value)
    except OSError:
        pass  # without CAP_SYS_NICE a thread may not raise its priority again: keep going


def lower_priority() -> int:
    """Nice the calling thread (and what it will start); returns the original nice value."""
    original = os.getpriority(os.PRIO_PROCESS, 0)
    _set_thread_nice(min(original + BACKGROUND_NICE, 19))
    return original


def restore_priority(original: int) -> None:
    """Back to the original nice value, for the calling thread only."""
    _set_thread_nice(original)
