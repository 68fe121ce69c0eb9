"""The node's mounts (device, mount point, file system type), from mountinfo: the trace names
each file's file system with them, so that analysis can tell local from shared; and where the
cgroup v2 hierarchy is."""

from __future__ import annotations

import os
from pathlib import Path

from ioobserve.data.model import Mount
from ioobserve.plumbing.host import host_root

MOUNTINFO = "/proc/self/mountinfo"
NODE_MOUNTINFO = "/proc/1/mountinfo"  # init's: the host's mounts wherever we run with its PID namespace


def read_mounts(mountinfo: str = MOUNTINFO) -> list[Mount]:
    """Every mount, in mountinfo's order (pseudo-filesystems too)."""
    found = []
    with open(mountinfo) as lines:
        for line in lines:
            fields = line.split()
            # id parent major:minor root mountpoint options [optional fields...] - fstype source ...
            major, minor = (int(x) for x in fields[2].split(":"))
            mountpoint = fields[4].replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
            found.append(Mount(os.makedev(major, minor), mountpoint, fields[fields.index("-") + 1], major, minor))
    return found


def node_mounts() -> list[Mount]:
    """The node's mounts as its init sees them: a service with private mounts (systemd's
    PrivateTmp) or a container given the host's PID namespace has its own, and the host's
    devices are what the probes report; this process's own where init's cannot be read."""
    try:
        return read_mounts(NODE_MOUNTINFO)
    except OSError:
        return read_mounts()


def cgroup2_mount(mountinfo: str = MOUNTINFO, host: Path | None = None) -> Path | None:
    """Where the host's cgroup v2 hierarchy is mounted (it may sit beside v1 controllers). In a
    container given the host's root (`host`, IOOBSERVE_HOST_ROOT by default), the mount under
    it: the container's own /sys/fs/cgroup may show only its own cgroup, or v1 alone."""
    host = host or host_root()
    found = [Path(mount.mountpoint) for mount in read_mounts(mountinfo) if mount.fstype == "cgroup2"]
    if host != Path("/"):
        found = [mount for mount in found if mount.is_relative_to(host)]
    return found[0] if found else None
