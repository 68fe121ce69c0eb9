"""The exec gate's pure parts: which files an exec will load, found inside the process's root
(ioobserve/probes/attach/linked_files.py), the ld.so.cache reader, damaged ELF files, and
which file systems the gate marks."""

from __future__ import annotations

import os
import random
import shutil
import struct
from pathlib import Path

import pytest

from ioobserve.probes.attach.linked_files import CACHE_NEW, CACHE_OLD, cache_entries, close_all, elf_links, linked_files
from ioobserve.probes.kernel.fanotify import filesystems

PROGRAM = Path("/usr/bin/true")  # dynamic, needs libc.so.6, interpreter /lib64/ld-linux-x86-64.so.2
MACHINE = 62


def _cache(entries: list[tuple[str, str]], old: bool = False) -> bytes:
    """An ld.so.cache in glibc's new format (behind an empty old-format table if `old`)."""
    strings, offsets = b"", []
    header_and_table = 48 + 24 * len(entries)
    for name, path in entries:
        offsets.append((header_and_table + len(strings), header_and_table + len(strings) + len(name) + 1))
        strings += name.encode() + b"\0" + path.encode() + b"\0"
    body = CACHE_NEW + struct.pack("<II", len(entries), len(strings)) + bytes(20)
    body += b"".join(struct.pack("<iIIIQ", 0x0303, key, value, 0, 0) for key, value in offsets) + strings
    return (CACHE_OLD + b"\0" + struct.pack("<I", 0) + body) if old else body


def _with_fd(path: Path, read):
    fd = os.open(path, os.O_RDONLY)
    try:
        return read(fd)
    finally:
        os.close(fd)


@pytest.mark.parametrize("old", [False, True])
def test_cache_entries_by_name(old):
    data = _cache([("libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6"), ("libmpi.so.40", "/usr/lib/openmpi/libmpi.so.40"),
                   ("libc.so.6", "/usr/lib/x86_64-linux-gnu/x86-64-v3/libc.so.6")], old)
    assert cache_entries(data) == {"libc.so.6": ["/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/x86-64-v3/libc.so.6"],
                                   "libmpi.so.40": ["/usr/lib/openmpi/libmpi.so.40"]}


def test_cache_entries_damaged_or_not_a_cache():
    data = _cache([("libc.so.6", "/lib/libc.so.6")])
    assert cache_entries(b"") == cache_entries(b"not a cache at all") == {}
    for cut in range(len(data)):  # truncated anywhere: fewer entries, never an exception
        assert set(cache_entries(data[:cut])) <= {"libc.so.6"}
    liar = bytearray(data)
    struct.pack_into("<I", liar, len(CACHE_NEW), 1 << 30)  # claims a billion entries
    assert cache_entries(bytes(liar)) == {"libc.so.6": ["/lib/libc.so.6"]}


def test_elf_links_of_a_program():
    links = _with_fd(PROGRAM, elf_links)
    assert (links.machine, links.interpreter, links.needed) == (MACHINE, "/lib64/ld-linux-x86-64.so.2", ["libc.so.6"])


def test_elf_links_never_fail_on_damaged_files(tmp_path):
    """Truncated at every 64 bytes of its headers and with random bytes written over them: a
    result or None, never an exception (the files come from any user's root)."""
    data = PROGRAM.read_bytes()
    damaged = tmp_path / "damaged"
    rng = random.Random(60)
    cases = [data[:cut] for cut in range(0, 16384, 64)]
    for _ in range(300):
        mutated = bytearray(data[:16384])
        for _ in range(rng.randint(1, 16)):
            mutated[rng.randrange(64, len(mutated)) if rng.random() < 0.8 else rng.randrange(64)] = rng.randrange(256)
        cases.append(bytes(mutated))
    for case in cases:
        damaged.write_bytes(case)
        links = _with_fd(damaged, elf_links)
        assert links is None or links.machine >= 0


def _root(tmp_path: Path) -> Path:
    """A root holding /usr/bin/true and its libc, the libc reached through an absolute
    symlink (as Debian's /lib64/ld-linux-x86-64.so.2 is): inside the root it names the root's
    file, from the host it would name the host's."""
    root = tmp_path / "root"
    for where in ("usr/bin", "lib64", "usr/lib/x86_64-linux-gnu", "opt/real"):
        (root / where).mkdir(parents=True)
    shutil.copy(PROGRAM, root / "usr/bin/true")
    shutil.copy(PROGRAM, root / "opt/real/libc.so.6")  # any ELF of this machine will do as the "libc"
    os.symlink("/opt/real/libc.so.6", root / "usr/lib/x86_64-linux-gnu/libc.so.6")
    shutil.copy(PROGRAM, root / "lib64/ld-linux-x86-64.so.2")
    return root


def test_linked_files_are_found_inside_the_root(tmp_path):
    root = _root(tmp_path)
    root_fd = os.open(root, os.O_PATH | os.O_DIRECTORY)
    program_fd = os.open(root / "usr/bin/true", os.O_RDONLY)
    try:
        found = linked_files(root_fd, program_fd, "/usr/bin/true")
        try:
            assert [file.inside for file in found] == ["/lib64/ld-linux-x86-64.so.2", "/usr/lib/x86_64-linux-gnu/libc.so.6"]
            libc = os.fstat(found[1].fd)
            assert (libc.st_dev, libc.st_ino) == (os.stat(root / "opt/real/libc.so.6").st_dev, os.stat(root / "opt/real/libc.so.6").st_ino)
        finally:
            close_all(found)
    finally:
        os.close(root_fd)
        os.close(program_fd)


def test_linked_files_through_the_roots_cache_and_runpath(tmp_path):
    """A soname only the root's ld.so.cache places, and one only an $ORIGIN RUNPATH would:
    the cache's is found, nothing outside the root is."""
    root = _root(tmp_path)
    (root / "usr/lib/x86_64-linux-gnu/libc.so.6").unlink()
    (root / "etc").mkdir()
    (root / "etc/ld.so.cache").write_bytes(_cache([("libc.so.6", "/opt/real/libc.so.6")]))
    root_fd = os.open(root, os.O_PATH | os.O_DIRECTORY)
    program_fd = os.open(root / "usr/bin/true", os.O_RDONLY)
    try:
        found = linked_files(root_fd, program_fd, "/usr/bin/true")
        assert [file.inside for file in found] == ["/lib64/ld-linux-x86-64.so.2", "/opt/real/libc.so.6"]
        close_all(found)
        (root / "etc/ld.so.cache").unlink()
        (root / "opt/real/libc.so.6").unlink()
        found = linked_files(root_fd, program_fd, "/usr/bin/true")  # the host has a libc.so.6; the root none
        assert [file.inside for file in found] == ["/lib64/ld-linux-x86-64.so.2"]
        close_all(found)
    finally:
        os.close(root_fd)
        os.close(program_fd)


def test_a_fifo_or_a_directory_at_a_librarys_path_is_passed_over(tmp_path):
    """A user's root may hold anything at a library's path: a FIFO there must not hang the gate."""
    root = _root(tmp_path)
    (root / "usr/lib/x86_64-linux-gnu/libc.so.6").unlink()
    os.mkfifo(root / "usr/lib/x86_64-linux-gnu/libc.so.6")
    (root / "lib64/ld-linux-x86-64.so.2").unlink()
    (root / "lib64/ld-linux-x86-64.so.2").mkdir()
    root_fd = os.open(root, os.O_PATH | os.O_DIRECTORY)
    program_fd = os.open(root / "usr/bin/true", os.O_RDONLY)
    try:
        assert linked_files(root_fd, program_fd, "/usr/bin/true") == []  # the host's libc is not the root's
    finally:
        os.close(root_fd)
        os.close(program_fd)


def test_filesystems_to_mark():
    mountinfo = "\n".join([
        "22 27 0:21 / /proc rw,relatime - proc proc rw",
        "27 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw",
        "30 27 8:1 /srv /mnt/bound rw,relatime - ext4 /dev/sda1 rw",
        "31 27 0:40 / /mnt/with\\040space rw - overlay overlay rw,lowerdir=/a",
        "32 27 0:41 / /tmp rw - tmpfs tmpfs rw",
        "33 22 0:42 / /proc/sys/fs/binfmt_misc rw - binfmt_misc binfmt_misc rw",
        "garbage line",
    ])
    assert filesystems(mountinfo) == {(8 << 20) | 1: ["/", "/mnt/bound"], 40: ["/mnt/with space"], 41: ["/tmp"]}
