"""The files a process maps, reached as that process sees them: a container's own libc or
interpreter, not the host's file of the same name.

/proc/PID/maps names a file by its path from the reader's root. A process in a mount
namespace of its own (a container after pivot_root) gets the path inside its root; a process
that chroot'ed gets the host's path, with the chroot directory in front. Neither is always
a path this process can open, so a file is opened through /proc/PID/map_files/START-END,
the mapping itself, whatever roots and namespaces lie between (root only), while the
mapping lasts; after that, through the process's root or by its path as given, if that is
still the same inode.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class MappedFile:
    """A file one process maps: what it is called there, how to open it, which inode it is."""

    pid: int
    path: str  # as /proc/PID/maps names it
    inside: str  # its path inside the process's root: what the process itself calls it
    opened: str  # a path this process opens the same file by (valid while the mapping lasts)
    ident: tuple[int, int]  # (kernel dev_t, inode) of the file itself: what uprobes attach to
    idents: frozenset[tuple[int, int]]  # ident, maps' and the one the process opens (overlayfs: the overlay's)
    start: int  # where its mapping at file offset 0 begins (0: none seen)
    root: str = "/"  # the process's root: "/", a chroot's directory, or a container's own

    @property
    def shown(self) -> str:
        """Its path inside its root, and that root where it is not the recorder's own."""
        return self.inside if self.root == "/" else f"{self.inside} in {self.root}"


def kernel_dev(st_dev: int) -> int:
    """A stat() device number as the kernel's dev_t (major << 20 | minor)."""
    return (os.major(st_dev) << 20) | os.minor(st_dev)


def file_ident(path: str) -> tuple[int, int] | None:
    """(kernel dev_t, inode) of the file at `path`, or None where it cannot be reached."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return kernel_dev(info.st_dev), info.st_ino


def mount_device(pid: int, path: str, mountinfo: str | None = None) -> int | None:
    """The kernel dev_t of the mount that holds `path` (as process `pid` names it), from the
    process's own mountinfo (`mountinfo`: its text, read already): the last of the longest
    mount points above it."""
    device, longest = None, -1
    try:
        if mountinfo is None:
            with open(f"/proc/{pid}/mountinfo") as info:
                mountinfo = info.read()
        for line in mountinfo.splitlines():
            fields = line.split()
            # id parent major:minor root mountpoint ...; a space in a mount point is \040
            point = fields[4].replace("\\040", " ")
            if len(point) >= longest and (path == point or path.startswith(point.rstrip("/") + "/")):
                major, minor = fields[2].split(":")
                device, longest = (int(major) << 20) | int(minor), len(point)
    except (OSError, ValueError, IndexError):  # gone, or a line not as documented
        return None
    return device


def opened_ident(pid: int, inside: str, mountinfo: str | None = None) -> tuple[int, int] | None:
    """(kernel dev_t, inode) of the file process `pid` opens or execs as `inside`, as the kernel's
    exec and mmap see it. On overlayfs that is the overlay's inode, on the overlay's device, where
    before Linux 6.8 maps and the mapping name the layer's file (the inode number is the same)."""
    try:
        number = os.stat(f"/proc/{pid}/root{inside}").st_ino
    except OSError:
        return None
    device = mount_device(pid, inside, mountinfo)
    return None if device is None else (device, number)


def process_root(pid: int) -> str | None:
    """The process's root as this process names it: '/' (ours, or a container's own in a
    mount namespace of its own), a chroot's directory; None once it has gone."""
    try:
        return os.readlink(f"/proc/{pid}/root")
    except OSError:
        return None


def root_shown(pid: int, root: str | None) -> str:
    """How a summary names the root of process `pid`: '/' where it is ours, the directory of
    a chroot, 'the mount namespace of pid N' for a container's."""
    try:
        own = os.stat(f"/proc/{pid}/ns/mnt").st_ino != os.stat("/proc/self/ns/mnt").st_ino
    except OSError:
        own = False
    if own and root in ("/", None):
        return f"the mount namespace of pid {pid}"
    return root or "/"


def inside_root(path: str, root: str | None) -> str:
    """`path` (as maps gives it) as the process names it: without its chroot directory."""
    if root and root != "/" and path.startswith(root + "/"):
        return path[len(root):]
    return path


def _maps_dev(field: str) -> int:
    """maps' "major:minor" (hex) as a kernel dev_t."""
    major, minor = field.split(":")
    return (int(major, 16) << 20) | int(minor, 16)


@dataclass
class _Seen:
    first_range: str  # its first mapping, as map_files names it
    maps_ident: tuple[int, int]  # (dev, inode) as maps gives them
    start: int = 0


def _scan(pid: int, pattern: re.Pattern) -> dict[str, _Seen]:
    """The files `pid` maps whose name matches, with their first mapping, in maps' order."""
    found: dict[str, _Seen] = {}
    try:
        with open(f"/proc/{pid}/maps") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)
                if len(fields) < 6 or not fields[5].startswith("/"):
                    continue
                path = fields[5].rstrip("\n")
                if not pattern.match(os.path.basename(path)):
                    continue
                low, high = (int(end, 16) for end in fields[0].split("-"))
                # map_files' names have no leading zeros
                seen = found.setdefault(path, _Seen(f"{low:x}-{high:x}", (_maps_dev(fields[3]), int(fields[4]))))
                if not seen.start and int(fields[2], 16) == 0:
                    seen.start = low
    except (OSError, ValueError):  # gone, a kernel thread, or a line not as documented
        pass
    return found


def mapped_files(pid: int, pattern: re.Pattern, ident: tuple[int, int] | None = None) -> list[MappedFile]:
    """The distinct files whose name matches `pattern` that `pid` maps (with `ident`: only that
    inode, as the kernel reported it)."""
    root = process_root(pid)
    files = []
    scanned = _scan(pid, pattern)
    shown = root_shown(pid, root) if scanned else "/"
    for path, seen in scanned.items():
        mapped = _open(pid, path, seen, root, shown)
        if mapped is not None and (ident is None or ident in mapped.idents):
            files.append(mapped)
    return files


def _open(pid: int, path: str, seen: _Seen, root: str | None, shown: str) -> MappedFile | None:
    """The file behind one path of maps, opened through its mapping, else found by inode."""
    inside = inside_root(path, root)
    for candidate in (f"/proc/{pid}/map_files/{seen.first_range}", f"/proc/{pid}/root{inside}", path):
        ident = file_ident(candidate)
        # A path (not the mapping itself) counts only if it is the inode maps names, or the
        # file under it (overlayfs): a chroot's /usr/lib/libc.so.6 is not the host's.
        if ident is not None and (candidate.startswith(f"/proc/{pid}/map_files/") or ident == seen.maps_ident):
            idents = {ident, seen.maps_ident}
            opened = opened_ident(pid, inside)
            if opened is not None and opened[1] == ident[1]:  # not a file that has replaced it at that path since
                idents.add(opened)
            return MappedFile(pid, path, inside, candidate, ident, frozenset(idents), seen.start, shown)
    return None


def reported_file(pid: int, path: str, ident: tuple[int, int], pattern: re.Pattern) -> MappedFile | None:
    """The file the kernel reported `pid` mapping as `path` (its inode `ident`): through the
    mapping while the process lives, else by the path as given if it is still that inode."""
    for mapped in mapped_files(pid, pattern, ident):
        return mapped
    if file_ident(path) != ident:
        return None
    return MappedFile(pid, path, path, path, ident, frozenset({ident}), 0)
