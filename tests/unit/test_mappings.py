"""A process's mapped files as ioobserve.mappings finds them: this process's own libc, and
how a path of maps is named inside its root."""

from __future__ import annotations

import os

from ioobserve.mappings import file_ident, inside_root, mapped_files
from ioobserve.probes.libraries import LIBC_FILE


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
