"""The observed applications come first: the recorder's own work runs niced.

`record` lowers its priority before it starts any thread (threads, Polars' pool included,
inherit it). The capture process runs above the original priority so the rings are drained
on time even when the jobs saturate every core (it shares no GIL with the niced threads, see
ioobserve.collect.capture), and a command started with `record -- CMD` runs at the original
priority. Work behind the
capture process queues up in its backlog and catches up when CPUs are free.
"""

from __future__ import annotations

import os

BACKGROUND_NICE = 10
# The drain alone runs this much above the jobs: it costs about 0.15 µs per event, and
# beside jobs that saturate every core a fair share (nice 0 like them) left the rings to
# overflow within tens of ms (bench/README.md, issue 46). At nice -10 CFS weighs it about 9x
# a job; it still only takes what the rings hold.
DRAIN_BOOST = 10


def lower_priority() -> int:
    """Nice the calling thread (and what it will start); returns the original nice value."""
    original = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, min(original + BACKGROUND_NICE, 19))
    except OSError:
        pass  # keep running at the original priority
    return original


def drain_priority(original: int) -> None:
    """Above the original nice value by DRAIN_BOOST, for the calling process (the capture
    process; needs CAP_SYS_NICE, else the original priority, else as it is)."""
    for nice in (max(original - DRAIN_BOOST, -20), original):
        try:
            os.setpriority(os.PRIO_PROCESS, 0, nice)
            return
        except OSError:
            continue


def restore_priority(original: int) -> None:
    """Back to the original nice value, for the calling process or thread (needs CAP_SYS_NICE)."""
    try:
        os.setpriority(os.PRIO_PROCESS, 0, original)
    except OSError:
        pass  # stays niced: slower, never wrong
