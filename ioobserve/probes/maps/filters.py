"""What the kernel-side filters select, in the form the probe maps take.

Every value here lands in a BPF map (numbers, fixed-size strings); none ever becomes C text.
Validation of what a user typed happens in ioobserve.cli.filters, which builds this.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ioobserve.context.mounts import MOUNTINFO, read_mounts

from ioobserve.data.model import PSEUDO_FS


def excluded_devices(mountinfo: str = MOUNTINFO) -> set[int]:
    """Kernel dev_t (major << 20 | minor) of every mounted pseudo-filesystem."""
    return {(mount.major << 20) | mount.minor for mount in read_mounts(mountinfo) if mount.fstype in PSEUDO_FS}


# Events a second one cgroup may send out of the kernel by default where the whole node is
# traced (`record --all` or with no command, `serve`'s streams and job traces): the recorder
# writes about a million a second on two cores, so one runaway job cannot take it all.
DEFAULT_FLOOD_LIMIT = 200_000


@dataclass
class KernelFilters:
    """The filter maps' contents: empty sets mean "no filter of that kind"."""

    pids: set[int] = field(default_factory=set)
    filter_pid: bool = False
    cgroup_ids: set[int] = field(default_factory=set)
    comms: set[str] = field(default_factory=set)
    prefix_dirs: set[tuple[int, int]] = field(default_factory=set)  # (kernel dev, ino)
    prefixes: list[str] = field(default_factory=list)
    excluded_devs: set[int] = field(default_factory=excluded_devices)
    flood_limit: int = 0  # events a second one cgroup may send (0: no limit); the rest are counted in the kernel
