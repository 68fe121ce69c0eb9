"""The observed applications come first: the recorder's own work runs niced.

`record` lowers its priority before it starts any thread (threads, Polars' pool included,
inherit it). The capture process returns to the original priority so the rings are drained
on time (it shares no GIL with the niced threads, see ioobserve.collect.capture), and a
command started with `record -- CMD` runs at the original priority too. Work behind the
capture process queues up in its backlog and catches up when CPUs are free.
"""

from __future__ import annotations

import os

BACKGROUND_NICE = 10


def lower_priority() -> int:
    """Nice the calling thread (and what it will start); returns the original nice value."""
    original = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, min(original + BACKGROUND_NICE, 19))
    except OSError:
        pass  # keep running at the original priority
    return original


def restore_priority(original: int) -> None:
    """Back to the original nice value, for the calling process or thread (needs CAP_SYS_NICE)."""
    try:
        os.setpriority(os.PRIO_PROCESS, 0, original)
    except OSError:
        pass  # stays niced: slower, never wrong
