"""The compiled-probe cache: an entry is found only by the kernel, versions, source and flags
it was built with, and only if nobody but root could have written it."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from ioobserve.probes.build import object_cache as oc
from ioobserve.probes.build.headers import Headers

HEADERS = Headers(Path("/usr/src/linux-headers-x"), False, "x merged with -common")


def _compiled(key: str) -> oc.CompiledObject:
    spec = oc.MapSpec("config", 2, 4, 40, 1, 0, 0, 0, '"int"', '"unsigned long long"')
    return oc.CompiledObject(key, "GPL", 393664, (spec,), {"on_sys_enter": bytes(range(16))}, b"\x9f\xeb")


def _key(**change) -> str:
    args = {"text": "int x;", "cflags": ["-DA=1"], "headers": HEADERS, "version": "0.1.0"} | change
    return oc.cache_key(**args)


def test_the_key_changes_with_everything_the_compile_depends_on(monkeypatch):
    base = _key()
    assert _key() == base
    assert len({base, _key(text="int y;"), _key(cflags=["-DA=2"]), _key(version="0.2.0"),
                _key(headers=Headers(None, True, "/lib/modules/x/build"))}) == 5
    assert _key(headers=Headers(HEADERS.path, False, "BCC_KERNEL_SOURCE=x")) == base  # as after a compile
    real = os.uname()
    for field in ("release", "version", "machine"):
        values = {name: getattr(real, name) for name in ("sysname", "nodename", "release", "version", "machine")}
        values[field] += "-other"
        monkeypatch.setattr(oc.os, "uname", lambda values=values: os.uname_result(tuple(values.values())))
        assert _key() != base, f"a different kernel {field} used the same entry"
    monkeypatch.setattr(oc.os, "uname", lambda: real)
    assert _key() == base


def test_an_entry_reads_back_as_written_and_only_under_its_key(tmp_path):
    directory = tmp_path / "probes"
    path = oc.store(_compiled("a" * 64), directory)
    assert oc.lookup("a" * 64, directory) == _compiled("a" * 64)
    assert oc.lookup("b" * 64, directory) is None
    assert path.stat().st_mode & 0o777 == 0o600
    assert directory.stat().st_mode & 0o777 == 0o700
    assert [p.name for p in directory.iterdir()] == [path.name]  # no staging file left


def test_entries_others_could_have_written_are_not_used(tmp_path):
    directory = tmp_path / "probes"
    path = oc.store(_compiled("a" * 64), directory)
    os.chmod(path, 0o620)
    assert oc.lookup("a" * 64, directory) is None
    os.chmod(path, 0o600)
    os.chmod(directory, 0o777)
    assert oc.lookup("a" * 64, directory) is None
    os.chmod(directory, 0o700)
    assert oc.lookup("a" * 64, directory) is not None


def test_a_link_or_a_renamed_entry_is_not_followed(tmp_path):
    directory = tmp_path / "probes"
    real = oc.store(_compiled("a" * 64), directory)
    (directory / f"{'b' * 64}.json").symlink_to(real)
    assert oc.lookup("b" * 64, directory) is None
    os.rename(real, directory / f"{'c' * 64}.json")  # the file's own key says it is a's
    assert oc.lookup("c" * 64, directory) is None
    (directory / f"{'d' * 64}.json").write_text("{not json")
    os.chmod(directory / f"{'d' * 64}.json", 0o600)
    assert oc.lookup("d" * 64, directory) is None


def test_old_entries_beyond_the_limit_are_removed(tmp_path):
    directory = tmp_path / "probes"
    for number in range(oc.KEEP_ENTRIES + 3):
        path = oc.store(_compiled(f"{number:064x}"), directory)
        os.utime(path, (number, number))
    kept = sorted(p.name for p in directory.glob("*.json"))
    assert kept == sorted(f"{n:064x}.json" for n in range(3, oc.KEEP_ENTRIES + 3))


def test_an_entry_in_use_outlives_newer_ones(tmp_path):
    directory = tmp_path / "probes"
    for number in range(oc.KEEP_ENTRIES):
        os.utime(oc.store(_compiled(f"{number:064x}"), directory), (number, number))
    assert oc.lookup(f"{0:064x}", directory) is not None  # the oldest, used again
    oc.store(_compiled("f" * 64), directory)
    assert (directory / f"{0:064x}.json").exists() and not (directory / f"{1:064x}.json").exists()


def _ld_map(fd: int, src: int = oc.BPF_PSEUDO_MAP_FD) -> bytes:
    """ld_imm64 r1, map fd (two instruction slots)."""
    return struct.pack("<BBhi", oc.LD_IMM64, src << 4 | 1, 0, fd) + bytes(8)


def test_map_references_are_rewritten_and_nothing_else():
    call = struct.pack("<BBhi", 0x85, 0, 0, 1)  # call helper 1: its imm is not a map
    code = call + _ld_map(7) + _ld_map(9, oc.BPF_PSEUDO_MAP_VALUE) + call
    out = oc.relocate(code, {7: 0, 9: 1})
    assert out == call + _ld_map(0) + _ld_map(1, oc.BPF_PSEUDO_MAP_VALUE) + call
    with pytest.raises(ValueError, match="unknown map"):
        oc.relocate(code, {7: 0})
