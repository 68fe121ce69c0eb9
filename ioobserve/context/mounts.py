"""The node's mounts (device, mount point, file system type), from /proc/self/mountinfo: the
trace names each file's file system with them, so that analysis can tell local from shared."""

from __future__ import annotations

import os

from ioobserve.model import Mount

MOUNTINFO = "/proc/self/mountinfo"
# File systems shared across nodes: what a file's mount says about where its I/O goes.
SHARED_FS = frozenset({
    "nfs", "nfs4", "lustre", "gpfs", "beegfs", "cifs", "smb3", "ceph", "fuse.ceph", "glusterfs", "fuse.glusterfs",
    "panfs", "orangefs", "pvfs2", "wekafs", "fuse.sshfs", "9p", "afs", "virtiofs", "fuse.juicefs", "fuse.s3fs",
})


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
