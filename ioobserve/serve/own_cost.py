"""What the observer itself costs the node: the CPU time and resident memory of its own
processes (the service and the children it runs, its capture process among them), read
from /proc at each scrape, and whether the sysctl has the kernel count programs' run time."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

STATS_SWITCH = "/proc/sys/kernel/bpf_stats_enabled"


@dataclass(frozen=True)
class OwnUsage:
    """CPU seconds (user, system) and resident bytes, summed over the observer's processes."""

    user_s: float
    system_s: float
    resident_bytes: int
    processes: int


def _descendants(pid: int) -> list[int]:
    """`pid` and every process below it that is still running."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{current}/task"):
                with contextlib.suppress(OSError), open(f"/proc/{current}/task/{task}/children") as listing:
                    queue += [int(child) for child in listing.read().split()]
    return found


def own_usage(pid: int | None = None) -> OwnUsage:
    """The usage of process `pid` (default: this one) and its running descendants."""
    ticks, page = os.sysconf("SC_CLK_TCK"), os.sysconf("SC_PAGE_SIZE")
    user = system = resident = counted = 0
    for process in _descendants(pid or os.getpid()):
        try:
            with open(f"/proc/{process}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{process}/statm") as statm:
                pages = int(statm.read().split()[1])
        except (OSError, IndexError, ValueError):  # it ended meanwhile
            continue
        user += int(fields[11])  # utime and stime: fields 14 and 15 of stat(5), counted after the comm
        system += int(fields[12])
        resident += pages * page
        counted += 1
    return OwnUsage(user / ticks, system / ticks, resident, counted)


def probe_stats_on() -> bool:
    """Whether the sysctl has the kernel count BPF programs' run time (it does not say whether
    a process holds the count on through bpf(BPF_ENABLE_STATS), as `--probe-stats` does)."""
    try:
        with open(STATS_SWITCH) as switch:
            return switch.read().strip() == "1"
    except OSError:
        return False
