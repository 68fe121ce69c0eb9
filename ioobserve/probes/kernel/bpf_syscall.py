"""The bpf(2) commands ioobserve issues itself, where bcc 0.26 has no call for them: maps,
programs and BTF loaded from a cached compile, object info (the kernel's run-time stats),
uprobe_multi links. `union bpf_attr` is a stable ABI: fields are only ever appended."""

from __future__ import annotations

import ctypes
import errno
import os
import struct

from ioobserve.probes.kernel.syscall_table import machine_arch

BPF_SYSCALL = {"x86_64": 321, "aarch64": 280}
BPF_MAP_CREATE = 0
BPF_MAP_UPDATE_ELEM = 2
BPF_MAP_DELETE_ELEM = 3
BPF_PROG_LOAD = 5
BPF_OBJ_GET_INFO_BY_FD = 15
BPF_RAW_TRACEPOINT_OPEN = 17
BPF_BTF_LOAD = 18
BPF_BTF_GET_FD_BY_ID = 19
BPF_LINK_CREATE = 28
BPF_ENABLE_STATS = 32
BPF_STATS_RUN_TIME = 0
ATTR_SIZE = 144  # union bpf_attr as far as these commands read it, zero-padded
OBJ_NAME_LEN = 16
VERIFIER_LOG_BYTES = 1 << 20
# The verifier gives up with EAGAIN when a signal is pending (a child's SIGCHLD, a debugger
# attaching): the load is tried again, as libbpf does.
LOAD_ATTEMPTS = 5
_LIBC = ctypes.CDLL(None, use_errno=True)

# struct bpf_map_info: type, id, key_size, value_size, max_entries, map_flags, name[16],
# ifindex, btf_vmlinux_value_type_id, netns_dev, netns_ino, btf_id, btf_key_type_id,
# btf_value_type_id, (pad), map_extra.
_MAP_INFO = struct.Struct("<IIIIII16sIIQQIIIIQ")
# struct bpf_prog_info up to recursion_misses: run_time_ns and run_cnt are at 192 and 200.
_PROG_INFO_SIZE = 216
_PROG_RUN_STATS = struct.Struct("<QQ")
_PROG_RUN_STATS_AT = 192
_PROG_NAME_AT = 64
_VERIFIED_INSNS_AT = 216  # after recursion_misses
_ATTACH_BTF_ID_AT = 108  # in the BPF_PROG_LOAD attr
# struct bpf_btf_info: btf (pointer), btf_size, id, name (pointer), name_len, kernel_btf.
_BTF_INFO = struct.Struct("<QIIQII")


def bpf(cmd: int, attr: ctypes.Array) -> int:
    """Issue bpf(cmd, attr); its result (an fd for most commands). Raises OSError."""
    number = BPF_SYSCALL.get(machine_arch())
    if number is None:
        raise OSError(0, "no bpf syscall number for this architecture")
    result = _LIBC.syscall(number, cmd, attr, len(attr))
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def new_attr() -> ctypes.Array:
    """A zeroed bpf_attr."""
    return ctypes.create_string_buffer(ATTR_SIZE)


def map_create(map_type: int, key_size: int, value_size: int, max_entries: int, flags: int, name: bytes,
               btf_fd: int = 0, btf_key_type_id: int = 0, btf_value_type_id: int = 0) -> int:
    """Create a map; its fd."""
    attr = new_attr()
    struct.pack_into("<IIIIIII16sIIII", attr, 0, map_type, key_size, value_size, max_entries, flags, 0, 0,
                     name[:OBJ_NAME_LEN - 1], 0, btf_fd, btf_key_type_id, btf_value_type_id)
    return bpf(BPF_MAP_CREATE, attr)


def map_update(fd: int, key: bytes, value: bytes) -> None:
    """Set a map's entry (any flags: create or replace)."""
    c_key, c_value = ctypes.create_string_buffer(key, len(key)), ctypes.create_string_buffer(value, len(value))
    attr = new_attr()
    struct.pack_into("<IIQQQ", attr, 0, fd, 0, ctypes.addressof(c_key), ctypes.addressof(c_value), 0)
    bpf(BPF_MAP_UPDATE_ELEM, attr)


def map_delete(fd: int, key: bytes) -> None:
    """Remove a map's entry; OSError(ENOENT) if there is none."""
    c_key = ctypes.create_string_buffer(key, len(key))
    attr = new_attr()
    struct.pack_into("<IIQ", attr, 0, fd, 0, ctypes.addressof(c_key))
    bpf(BPF_MAP_DELETE_ELEM, attr)


def prog_load(prog_type: int, insns: bytes, name: bytes, license: bytes, kern_version: int,
              expected_attach_type: int = 0, attach_btf_id: int = 0) -> int:
    """Load (verify) a program; its fd. attach_btf_id: the kernel BTF type a tracing program
    attaches to. On a refusal, OSError carries the verifier's last lines."""
    code = ctypes.create_string_buffer(insns, len(insns))
    c_license = ctypes.create_string_buffer(license)
    attr = new_attr()
    struct.pack_into("<IIQQIIQII16sII", attr, 0, prog_type, len(insns) // 8, ctypes.addressof(code),
                     ctypes.addressof(c_license), 0, 0, 0, kern_version, 0, name[:OBJ_NAME_LEN - 1], 0,
                     expected_attach_type)
    struct.pack_into("<I", attr, _ATTACH_BTF_ID_AT, attach_btf_id)
    try:
        return _load(attr)
    except OSError as exc:
        log = ctypes.create_string_buffer(VERIFIER_LOG_BYTES)  # again, for the verifier's reason
        struct.pack_into("<IIQ", attr, 24, 1, len(log), ctypes.addressof(log))
        try:
            return _load(attr)
        except OSError:
            text = log.value.decode(errors="replace")
            _keep_log(name, text)
            tail = " | ".join(text.strip().splitlines()[-3:])
            raise OSError(exc.errno, f"{exc.strerror}: {tail}" if tail else exc.strerror) from None


def _keep_log(name: bytes, text: str) -> None:
    """Write a refused program's whole verifier log to $IOOBSERVE_VERIFIER_LOGS/<name>.log
    (the error keeps only its last lines)."""
    directory = os.environ.get("IOOBSERVE_VERIFIER_LOGS")
    if directory:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        with open(os.path.join(directory, f"{name.decode(errors='replace')}.log"), "w") as out:
            out.write(text)


def _load(attr: ctypes.Array) -> int:
    """BPF_PROG_LOAD, tried again while a pending signal interrupts the verifier."""
    for attempt in range(LOAD_ATTEMPTS):
        try:
            return bpf(BPF_PROG_LOAD, attr)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EINTR) or attempt == LOAD_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def tracing_attach(prog_fd: int) -> int:
    """Attach a tracing program (tp_btf, fentry, fexit) where it was loaded for; the link's
    fd, which detaches it when closed (BPF_RAW_TRACEPOINT_OPEN with no name)."""
    attr = new_attr()
    struct.pack_into("<QI", attr, 0, 0, prog_fd)
    return bpf(BPF_RAW_TRACEPOINT_OPEN, attr)


def btf_load(blob: bytes) -> int:
    """Load a BTF blob; its fd."""
    data = ctypes.create_string_buffer(blob, len(blob))
    attr = new_attr()
    struct.pack_into("<QQI", attr, 0, ctypes.addressof(data), 0, len(blob))
    return bpf(BPF_BTF_LOAD, attr)


def _object_info(fd: int, info: ctypes.Array) -> None:
    attr = new_attr()
    struct.pack_into("<IIQ", attr, 0, fd, len(info), ctypes.addressof(info))
    bpf(BPF_OBJ_GET_INFO_BY_FD, attr)


def map_info(fd: int) -> dict[str, int]:
    """A map's type, sizes, flags and BTF ids, as the kernel holds them."""
    info = ctypes.create_string_buffer(_MAP_INFO.size)
    _object_info(fd, info)
    (map_type, _id, key_size, value_size, max_entries, flags, _name, _ifindex, _vmlinux, _dev, _ino,
     btf_id, btf_key, btf_value, _pad, _extra) = _MAP_INFO.unpack(info.raw)
    return {"type": map_type, "key_size": key_size, "value_size": value_size, "max_entries": max_entries,
            "flags": flags, "btf_id": btf_id, "btf_key_type_id": btf_key, "btf_value_type_id": btf_value}


def btf_blob(btf_id: int) -> bytes:
    """The raw BTF the kernel holds under this id."""
    attr = new_attr()
    struct.pack_into("<I", attr, 0, btf_id)
    fd = bpf(BPF_BTF_GET_FD_BY_ID, attr)
    try:
        info = ctypes.create_string_buffer(_BTF_INFO.size)
        _object_info(fd, info)
        size = _BTF_INFO.unpack(info.raw)[1]
        data = ctypes.create_string_buffer(size)
        struct.pack_into("<QI", info, 0, ctypes.addressof(data), size)
        _object_info(fd, info)
        return data.raw
    finally:
        os.close(fd)


def prog_run_stats(fd: int) -> tuple[str, int, int]:
    """(name, run time in ns, runs) of a program: counted only while run-time stats are on."""
    info = ctypes.create_string_buffer(_PROG_INFO_SIZE)
    _object_info(fd, info)
    name = info.raw[_PROG_NAME_AT:_PROG_NAME_AT + OBJ_NAME_LEN].split(b"\0", 1)[0].decode()
    run_ns, runs = _PROG_RUN_STATS.unpack_from(info.raw, _PROG_RUN_STATS_AT)
    return name, run_ns, runs


def prog_verified_insns(fd: int) -> int:
    """The instructions the verifier processed for a program (bpf_prog_info.verified_insns,
    kernel 5.16+; 0 where the kernel keeps no count)."""
    info = ctypes.create_string_buffer(_VERIFIED_INSNS_AT + 4)
    _object_info(fd, info)
    return struct.unpack_from("<I", info.raw, _VERIFIED_INSNS_AT)[0]


def enable_run_stats() -> int:
    """Turn the kernel's BPF run-time stats on for as long as the returned fd is open."""
    attr = new_attr()
    struct.pack_into("<I", attr, 0, BPF_STATS_RUN_TIME)
    return bpf(BPF_ENABLE_STATS, attr)


def link_create(prog_fd: int, attach_type: int, extra: bytes) -> int:
    """A link of the program (target fd 0, flags 0) with the attach type's own fields after."""
    attr = new_attr()
    struct.pack_into("<IIII", attr, 0, prog_fd, 0, attach_type, 0)
    attr[16:16 + len(extra)] = extra
    return bpf(BPF_LINK_CREATE, attr)
