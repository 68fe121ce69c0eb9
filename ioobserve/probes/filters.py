"""What the kernel-side filters select, in the form the probe maps take.

Every value here lands in a BPF map (numbers, fixed-size strings); none ever becomes C text.
Validation of what a user typed happens in ioobserve.cli.filters, which builds this.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Pseudo-filesystems whose "files" are not I/O a user asks about: excluded by device.
# tmpfs stays in (/dev/shm, /tmp): data loaders exchange real data through it.
PSEUDO_FS = frozenset({
    "proc", "sysfs", "devtmpfs", "devpts", "tracefs", "debugfs", "cgroup", "cgroup2", "bpf",
    "securityfs", "pstore", "mqueue", "configfs", "fusectl", "binfmt_misc", "efivarfs",
})


def excluded_devices(mountinfo: str = "/proc/self/mountinfo") -> set[int]:
    """Kernel dev_t (major << 20 | minor) of every mounted pseudo-filesystem."""
    devs = set()
    with open(mountinfo) as lines:
        for line in lines:
            fields = line.split()
            # mountinfo: id parent major:minor root mountpoint options [optional...] - fstype ...
            fstype = fields[fields.index("-") + 1]
            if fstype in PSEUDO_FS:
                major, minor = (int(x) for x in fields[2].split(":"))
                devs.add((major << 20) | minor)
    return devs


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
