"""The files a program's exec will load before its first instruction runs: the program, its
ELF interpreter (ld.so) and the shared objects it needs (DT_NEEDED, and theirs), found in the
exec'ing process's own root as its dynamic linker will find them: RPATH/RUNPATH, the root's
/etc/ld.so.cache, then the default directories. LD_LIBRARY_PATH is not read: the new
program's environment is not the old one's, and a copy found there is still probed when
it is mapped (later, and the summary says so).

Every path is opened inside that root (openat2 with RESOLVE_IN_ROOT: an absolute symlink in
a container's tree leads to the container's file, never the host's). Only headers are read,
and every offset is checked against the file's size: a damaged or hostile file yields fewer
files, never an exception.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
import struct
from dataclasses import dataclass

SYS_OPENAT2 = 437  # the same number on x86-64 and arm64
RESOLVE_NO_MAGICLINKS, RESOLVE_IN_ROOT = 0x02, 0x10
MAX_FILES = 64  # a program's closure is rarely past 30; more is a loop or a hostile tree
MAX_DYNAMIC = 4096  # dynamic entries read per file
_ELF_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
_PHDR = struct.Struct("<IIQQQQQQ")
_DYN = struct.Struct("<qQ")
PT_LOAD, PT_DYNAMIC, PT_INTERP = 1, 2, 3
DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_RPATH, DT_RUNPATH = 1, 5, 10, 15, 29
CACHE_OLD, CACHE_NEW = b"ld.so-1.7.0", b"glibc-ld.so.cache1.1"
_CACHE_HEADER = struct.Struct("<20sII")  # magic and version, nlibs, len_strings (then 20 bytes we skip)
CACHE_HEADER_SIZE, CACHE_ENTRY = 48, struct.Struct("<iIIIQ")  # flags, key, value, osversion, hwcap
MULTIARCH = {62: "x86_64-linux-gnu", 183: "aarch64-linux-gnu"}  # e_machine -> Debian's triplet


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)


def open_in_root(root_fd: int, path: str) -> int:
    """A read-only fd of the regular file `path` resolved inside the directory `root_fd` (its
    root: `..` and absolute symlinks stay in it); OSError if it is not there or not a regular
    file. Opened without blocking: a FIFO a user left at a library's path must not hang us."""
    how = _OpenHow(os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK, 0, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)
    fd = _libc.syscall(SYS_OPENAT2, root_fd, path.encode(), ctypes.byref(how), ctypes.sizeof(how))
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), path)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", path)
    return fd


@dataclass
class ElfLinks:
    """What one ELF file asks of the dynamic linker."""

    machine: int
    interpreter: str | None
    needed: list[str]
    search: list[str]  # RPATH or RUNPATH directories, $ORIGIN not yet expanded
    runpath: bool  # the search list is DT_RUNPATH (not inherited by what it loads)


def _read(fd: int, offset: int, size: int, limit: int) -> bytes:
    """`size` bytes at `offset`, or b"" where that runs past `limit` (the file's size)."""
    if offset < 0 or size < 0 or offset + size > limit:
        return b""
    return os.pread(fd, size, offset)


def _string(table: bytes, at: int) -> str | None:
    if not 0 <= at < len(table):
        return None
    end = table.find(b"\0", at)
    return table[at:end if end >= 0 else len(table)].decode("utf-8", "replace")


def elf_links(fd: int) -> ElfLinks | None:
    """The interpreter, needed names and search path of the ELF64 little-endian file at `fd`
    (None: not one, or too damaged to say)."""
    size = os.fstat(fd).st_size
    header = _read(fd, 0, _ELF_HEADER.size, size)
    if len(header) < _ELF_HEADER.size or header[:4] != b"\x7fELF" or header[4] != 2 or header[5] != 1:
        return None
    _, _, machine, _, _, phoff, _, _, _, phentsize, phnum, _, _, _ = _ELF_HEADER.unpack(header)
    if phentsize < _PHDR.size or phnum > 256:
        return None
    table = _read(fd, phoff, phentsize * phnum, size)
    if not table:
        return None
    loads, interpreter, dynamic = [], None, None
    for i in range(phnum):
        kind, _, offset, vaddr, _, filesz, _, _ = _PHDR.unpack_from(table, i * phentsize)
        if kind == PT_LOAD:
            loads.append((vaddr, offset, filesz))
        elif kind == PT_INTERP and filesz <= 4096:
            interpreter = _read(fd, offset, filesz, size).split(b"\0")[0].decode("utf-8", "replace") or None
        elif kind == PT_DYNAMIC:
            dynamic = (offset, min(filesz, MAX_DYNAMIC * _DYN.size))
    links = ElfLinks(machine, interpreter, [], [], False)
    if dynamic is None:
        return links
    raw = _read(fd, dynamic[0], dynamic[1] - dynamic[1] % _DYN.size, size)
    entries = []
    for tag, value in _DYN.iter_unpack(raw):
        if tag == 0:
            break
        entries.append((tag, value))
    found = dict(entries)
    strtab, strsz = found.get(DT_STRTAB), found.get(DT_STRSZ, 0)
    at = next((offset + strtab - vaddr for vaddr, offset, filesz in loads if strtab is not None and vaddr <= strtab < vaddr + filesz), None)
    strings = _read(fd, at, min(strsz, 1 << 20), size) if at is not None else b""
    links.needed = [name for tag, value in entries if tag == DT_NEEDED and (name := _string(strings, value))]
    for tag in (DT_RUNPATH, DT_RPATH):
        if tag in found and (text := _string(strings, found[tag])):
            links.search, links.runpath = [part for part in text.split(":") if part], tag == DT_RUNPATH
            break
    return links


def cache_entries(data: bytes) -> dict[str, list[str]]:
    """{soname: [paths]} from an /etc/ld.so.cache in glibc's format (with or without the old
    format's table in front); {} where it is not one."""
    start = 0
    if data.startswith(CACHE_OLD) and len(data) >= 16:
        old_count = struct.unpack_from("<I", data, 12)[0]
        start = 16 + old_count * 12
        start += -start % 8
    if data[start:start + len(CACHE_NEW)] != CACHE_NEW or len(data) < start + CACHE_HEADER_SIZE:
        return {}
    _, count, _ = _CACHE_HEADER.unpack_from(data, start)
    found: dict[str, list[str]] = {}
    for i in range(min(count, (len(data) - start - CACHE_HEADER_SIZE) // CACHE_ENTRY.size)):
        _, key, value, _, _ = CACHE_ENTRY.unpack_from(data, start + CACHE_HEADER_SIZE + i * CACHE_ENTRY.size)
        name, path = _string(data, start + key), _string(data, start + value)
        if name and path:
            found.setdefault(name, []).append(path)
    return found


@dataclass
class LinkedFile:
    """One file an exec will load, open (the caller closes `fd`)."""

    inside: str  # its path inside the process's root
    fd: int


class _Resolver:
    """Finds shared objects by name inside one root, as the dynamic linker would."""

    def __init__(self, root_fd: int, machine: int):
        self.root_fd = root_fd
        self.machine = machine
        self._cache: dict[str, list[str]] | None = None
        triplet = MULTIARCH.get(machine)
        arch = [f"/lib/{triplet}", f"/usr/lib/{triplet}"] if triplet else []
        self.defaults = ["/lib64", "/usr/lib64", *arch, "/lib", "/usr/lib"]

    def cache(self) -> dict[str, list[str]]:
        if self._cache is None:
            self._cache = {}
            with contextlib.suppress(OSError):
                fd = open_in_root(self.root_fd, "/etc/ld.so.cache")
                try:
                    size = os.fstat(fd).st_size
                    if size <= 64 << 20:
                        self._cache = cache_entries(os.pread(fd, size, 0))
                finally:
                    os.close(fd)
        return self._cache

    def open_matching(self, path: str) -> int | None:
        """An fd of `path` if it is an ELF file of this machine (None: absent or another's)."""
        try:
            fd = open_in_root(self.root_fd, path)
        except OSError:
            return None
        header = _read(fd, 0, 20, os.fstat(fd).st_size)
        if len(header) == 20 and header[:4] == b"\x7fELF" and struct.unpack_from("<H", header, 18)[0] == self.machine:
            return fd
        os.close(fd)
        return None

    def find(self, name: str, directories: list[str]) -> tuple[str, int] | None:
        """(path, fd) of the shared object `name`: a path as given, else the first of the
        search directories, the cache and the default directories that has it."""
        if "/" in name:
            fd = self.open_matching(name)
            return (name, fd) if fd is not None else None
        candidates = [f"{directory.rstrip('/')}/{name}" for directory in directories]
        candidates += self.cache().get(name, [])
        candidates += [f"{directory}/{name}" for directory in self.defaults]
        for path in candidates:
            fd = self.open_matching(path)
            if fd is not None:
                return path, fd
        return None


def _expand(directories: list[str], origin: str) -> list[str]:
    return [part.replace("$ORIGIN", origin).replace("${ORIGIN}", origin) for part in directories]


def linked_files(root_fd: int, program_fd: int, program: str) -> list[LinkedFile]:
    """The ELF interpreter and shared objects the program at `program_fd` (`program`: its path
    inside the root at `root_fd`) will load at exec, opened; [] if it is not a dynamic ELF
    program. The program itself is not among them."""
    links = elf_links(program_fd)
    if links is None:
        return []
    resolver = _Resolver(root_fd, links.machine)
    found: list[LinkedFile] = []
    seen: set[tuple[int, int]] = set()

    def keep(path: str, fd: int) -> bool:
        info = os.fstat(fd)
        if (info.st_dev, info.st_ino) in seen or len(found) >= MAX_FILES:
            os.close(fd)
            return False
        seen.add((info.st_dev, info.st_ino))
        found.append(LinkedFile(path, fd))
        return True

    if links.interpreter:
        fd = resolver.open_matching(links.interpreter)
        if fd is not None:
            keep(links.interpreter, fd)
    # Breadth first, as the linker loads them; an RPATH (not a RUNPATH) is searched for the
    # needs of what its object loads too.
    queue: list[tuple[ElfLinks, str, list[str]]] = [(links, os.path.dirname(program), [])]
    while queue and len(found) < MAX_FILES:
        current, origin, inherited = queue.pop(0)
        own = _expand(current.search, origin)
        directories = own if current.runpath else [*own, *inherited]
        passed_on = inherited if current.runpath else directories
        for name in current.needed:
            hit = resolver.find(name, directories)
            if hit is None or not keep(*hit):
                continue
            path, fd = hit
            with contextlib.suppress(OSError):
                child = elf_links(fd)
                if child is not None:
                    queue.append((child, os.path.dirname(path), passed_on))
    return found


def close_all(files: list[LinkedFile]) -> None:
    """Close the fds linked_files() opened."""
    for linked in files:
        with contextlib.suppress(OSError):
            os.close(linked.fd)


def openat2_available() -> bool:
    """Whether this kernel has openat2 (5.6+)."""
    root = os.open("/", os.O_PATH | os.O_CLOEXEC)
    try:
        os.close(open_in_root(root, "/"))
    except OSError as exc:
        return exc.errno != errno.ENOSYS  # "/" is no regular file: EINVAL says openat2 answered
    finally:
        os.close(root)
    return True
