"""A process's mapped files as ioobserve.context.mappings finds them: this process's own libc, and
how a path of maps is named inside its root."""

from __future__ import annotations

import os

from ioobserve.context.mappings import file_ident, inside_root, kernel_dev, mapped_files, mount_device, opened_ident
from ioobserve.probes.attach.uprobes import LIBC_FILE


def test_this_processs_libc_is_found_opened_and_identified():
    """Found in maps, opened through the mapping (root) or by its path (as the same inode),
    its inode the one stat gives, named as the process names it."""
    (libc,) = mapped_files(os.getpid(), LIBC_FILE)
    assert libc.ident == file_ident(libc.path) == file_ident(libc.opened)
    assert libc.ident in libc.idents
    assert (libc.inside, libc.root, libc.shown) == (libc.path, "/", libc.path)


def test_a_chroots_directory_is_not_part_of_the_name_inside():
    assert inside_root("/srv/job/usr/lib/libc.so.6", "/srv/job") == "/usr/lib/libc.so.6"
    assert inside_root("/srv/jobs/usr/lib/libc.so.6", "/srv/job") == "/srv/jobs/usr/lib/libc.so.6"  # not a prefix by name
    assert inside_root("/usr/lib/libc.so.6", "/") == "/usr/lib/libc.so.6"
    assert inside_root("/usr/lib/libc.so.6", None) == "/usr/lib/libc.so.6"


def test_a_process_gone_maps_nothing():
    assert mapped_files(2**22 + 1, LIBC_FILE) == []  # above the kernel's pid limit: never a process


def test_the_mount_holding_a_path_is_the_deepest_one_above_it():
    """/proc/self lies on the proc mount, not on the root's: its device is the one stat gives
    (proc, like ext4, reports its superblock's own)."""
    proc = kernel_dev(os.stat("/proc").st_dev)
    assert mount_device(os.getpid(), "/proc") == mount_device(os.getpid(), "/proc/self/status") == proc
    assert mount_device(os.getpid(), "/procfs-lookalike") != proc  # a mount point is a prefix by directory
    assert mount_device(2**22 + 1, "/") is None


def test_the_inode_a_process_opens_a_mapped_file_by_is_among_its_idents():
    """What the kernel's exec and mmap see (on overlayfs, the overlay's own inode): the device of
    the mount the path lies on, the inode number stat gives."""
    (libc,) = mapped_files(os.getpid(), LIBC_FILE)
    opened = opened_ident(os.getpid(), libc.inside)
    assert opened == (mount_device(os.getpid(), libc.inside), os.stat(libc.path).st_ino)
    assert opened in libc.idents
