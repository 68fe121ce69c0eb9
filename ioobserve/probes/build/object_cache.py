"""The compiled probes kept on disk, so a recording starts without clang (~4.7 s here).

An entry is what bcc's compile leaves in the kernel and in its module: each program's
instructions, each map's definition and type descriptions, and the BTF its maps were made
with. It is found by a key hashing everything the compile read (source, flags, headers,
bcc, the kernel's release and build, ioobserve's version): a change of any of them is a
different key, so a stale entry is never used. Entries are loaded as BPF code by root, so
they live in a root-only directory, are read without following links and only if root owns
them and nobody else may write them.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import hashlib
import json
import os
import stat
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from ioobserve.probes.build.headers import CACHE_DIR, Headers
from ioobserve.probes.kernel.bpf_syscall import btf_blob, map_info

FORMAT = 1
KEEP_ENTRIES = 8  # one per kernel/version/size combination in use; the ones used least lately go
BPF_PSEUDO_MAP_FD, BPF_PSEUDO_MAP_VALUE = 1, 2
LD_IMM64 = 0x18


@dataclass(frozen=True)
class MapSpec:
    """One map of the compiled object, as the kernel created it for bcc."""

    name: str
    type: int
    key_size: int
    value_size: int
    max_entries: int
    flags: int
    btf_key_type_id: int
    btf_value_type_id: int
    key_desc: str  # bcc's JSON description of the key type (its Python ctypes type)
    leaf_desc: str


@dataclass(frozen=True)
class CompiledObject:
    """Programs (instructions whose map references are indexes into maps) and maps."""

    key: str
    license: str
    kern_version: int
    maps: tuple[MapSpec, ...]
    programs: dict[str, bytes]
    btf: bytes  # the BTF the maps' type ids refer to (empty: none)


def cache_dir() -> Path:
    """Where compiled probes are kept."""
    return CACHE_DIR / "probes"


def cache_key(text: str, cflags: list[str], headers: Headers, version: str) -> str:
    """The hash of everything a compile depends on."""
    import bcc  # deferred: only probes import bcc

    uname = os.uname()
    parts = [f"format {FORMAT}", version, getattr(bcc, "__version__", "?"), uname.release, uname.version,
             uname.machine, str(headers.path), *cflags, text]  # path: the description changes once bcc ran
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def extract(bpf, key: str) -> CompiledObject:
    """The compiled object of a bcc BPF module just compiled (its maps exist in the kernel)."""
    from bcc.libbcc import lib  # deferred: only probes import bcc

    _declare(lib)
    module = bpf.module
    maps, index_of_fd, btf_ids = [], {}, set()
    for table in range(lib.bpf_num_tables(module)):
        name = lib.bpf_table_name(module, table)
        fd = lib.bpf_table_fd_id(module, table)
        info = map_info(fd)
        index_of_fd[fd] = len(maps)
        btf_ids.add(info["btf_id"])
        maps.append(MapSpec(name.decode(), info["type"], info["key_size"], info["value_size"], info["max_entries"],
                            info["flags"], info["btf_key_type_id"], info["btf_value_type_id"],
                            lib.bpf_table_key_desc(module, name).decode(), lib.bpf_table_leaf_desc(module, name).decode()))
    if len(btf_ids - {0}) > 1:
        raise ValueError("the maps were made with more than one BTF")
    programs = {}
    for function in range(lib.bpf_num_functions(module)):
        name = lib.bpf_function_name(module, function)
        code = ctypes.string_at(lib.bpf_function_start(module, name), lib.bpf_function_size(module, name))
        programs[name.decode()] = relocate(code, index_of_fd)
    btf_id = max(btf_ids)
    return CompiledObject(key, lib.bpf_module_license(module).decode(), lib.bpf_module_kern_version(module),
                          tuple(maps), programs, btf_blob(btf_id) if btf_id else b"")


def _declare(lib) -> None:
    """Types of the libbcc calls bcc's Python binding does not declare."""
    for name, restype, argtypes in (("bpf_num_tables", ctypes.c_ulonglong, [ctypes.c_void_p]),
                                    ("bpf_table_name", ctypes.c_char_p, [ctypes.c_void_p, ctypes.c_ulonglong]),
                                    ("bpf_table_fd_id", ctypes.c_int, [ctypes.c_void_p, ctypes.c_ulonglong])):
        function = getattr(lib, name)
        function.restype, function.argtypes = restype, argtypes


def relocate(code: bytes, mapping: dict[int, int]) -> bytes:
    """The instructions with each map reference (a 64-bit load of a map fd) replaced through
    `mapping`; raises ValueError on a reference it does not know."""
    out = bytearray(code)
    for at in range(0, len(out) - 15, 8):
        if out[at] == LD_IMM64 and out[at + 1] >> 4 in (BPF_PSEUDO_MAP_FD, BPF_PSEUDO_MAP_VALUE):
            old = int.from_bytes(out[at + 4:at + 8], "little", signed=True)
            if old not in mapping:
                raise ValueError(f"instruction {at // 8} refers to an unknown map ({old})")
            out[at + 4:at + 8] = mapping[old].to_bytes(4, "little", signed=True)
    return bytes(out)


def store(compiled: CompiledObject, directory: Path | None = None, keep: int | None = KEEP_ENTRIES) -> Path:
    """Write an entry atomically (0600, in a 0700 directory); older entries beyond `keep` go."""
    directory = directory or cache_dir()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    document = asdict(compiled)
    document["programs"] = {name: base64.b64encode(code).decode() for name, code in compiled.programs.items()}
    document["btf"] = base64.b64encode(compiled.btf).decode()
    fd, staging = tempfile.mkstemp(prefix=".entry-", dir=directory)  # 0600
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(document, out)
        target = directory / f"{compiled.key}.json"
        os.replace(staging, target)
    except BaseException:
        os.unlink(staging)
        raise
    if keep is None:
        return target
    entries = sorted(directory.glob("*.json"), key=lambda path: path.stat().st_mtime, reverse=True)
    for old in entries[keep:]:
        old.unlink(missing_ok=True)
    return target


def lookup(key: str, directory: Path | None = None) -> CompiledObject | None:
    """The entry of this key, if one is there and trusted."""
    directory = directory or cache_dir()
    try:
        if not _trusted(os.stat(directory, follow_symlinks=False), directory_=True):
            return None
        fd = os.open(directory / f"{key}.json", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd) as entry:
        if not _trusted(os.fstat(entry.fileno())):
            return None
        try:
            document = json.load(entry)
        except ValueError:
            return None
    if document.get("key") != key:
        return None
    with contextlib.suppress(OSError):  # used now: the last entry store() lets go
        os.utime(directory / f"{key}.json", follow_symlinks=False)
    return CompiledObject(key, document["license"], document["kern_version"],
                          tuple(MapSpec(**spec) for spec in document["maps"]),
                          {name: base64.b64decode(code) for name, code in document["programs"].items()},
                          base64.b64decode(document["btf"]))


def _trusted(info: os.stat_result, directory_: bool = False) -> bool:
    """Owned by us (root) and writable by nobody else; a directory, or a regular file."""
    kind = stat.S_ISDIR if directory_ else stat.S_ISREG
    return kind(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & 0o022
