"""The node's mounts (device, mount point, file system type), from /proc/self/mountinfo: the
trace names each file's file system with them, so that analysis can tell local from shared."""

from __future__ import annotations

import os
from dataclasses import dataclass

MOUNTINFO = "/proc/self/mountinfo"
# Pseudo-filesystems whose "files" are not I/O a user asks about: excluded by device.
# tmpfs stays in (/dev/shm, /tmp): data loaders exchange real data through it.
PSEUDO_FS = frozenset({
    "proc", "sysfs", "devtmpfs", "devpts", "tracefs", "debugfs", "cgroup", "cgroup2", "bpf",
    "securityfs", "pstore", "mqueue", "configfs", "fusectl", "binfmt_misc", "efivarfs",
})
# File systems shared across nodes: what a file's mount says about where its I/O goes.
SHARED_FS = frozenset({
    "nfs", "nfs4", "lustre", "gpfs", "beegfs", "cifs", "smb3", "ceph", "fuse.ceph", "glusterfs", "fuse.glusterfs",
    "panfs", "orangefs", "pvfs2", "wekafs", "fuse.sshfs", "9p", "afs", "virtiofs", "fuse.juicefs", "fuse.s3fs",
})


@dataclass(frozen=True)
class Mount:
    """One mount: its device (st_dev encoding, as os.stat and the trace's dev give it)."""

    dev: int
    mountpoint: str
    fstype: str
    major: int
    minor: int


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
