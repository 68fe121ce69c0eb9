"""The Python layer's tables against CPython itself: struct offsets compiled from each
interpreter's own headers, _Py_DebugOffsets read from the binaries of 3.13+ (in the test
root of ci/roots.sh: 3.13, 3.14, 3.15 and the free-threaded 3.13t) with the positions of its
values compiled from their headers, a damaged one refused, and line numbers against the
interpreter's own code.co_lines(), as the compiled core reads them (csrc/linetable.c)."""

from __future__ import annotations

import glob
import json
import subprocess
from pathlib import Path

import pytest

from ioobserve import _core
from ioobserve.data import events as ev
from ioobserve.python.interpreters import InterpreterFinder
from ioobserve.python.layouts import (
    DEBUG_POSITIONS,
    DEBUG_SIZED_BY,
    DEBUG_SIZES_AT,
    DEBUG_SIZE,
    HEADER_TABLES,
    LayoutError,
    layout_row,
)
from tests.conftest import ROOT
from tests.waiting import wait_until

PROBE = ROOT / "tests" / "unit" / "python_offsets.c"
POSITIONS_PROBE = ROOT / "tests" / "unit" / "python_debug_positions.c"
# (interpreter, its include directory): Debian's, and pyenv's of every version it has.
PYTHONS = [("/usr/bin/python3.11", "/usr/include/python3.11")] + [
    (path, str(Path(path).parents[1] / "include" / Path(path).name))
    for path in sorted(glob.glob("/root/.pyenv/versions/3.1[0-9].*/bin/python3.1[0-9]"))
]


def _header_offsets(include: str, tmp_path: Path, probe: Path = PROBE, *flags: str) -> dict[str, int]:
    """What `probe` prints, compiled against the headers in `include` (a root's: its
    /usr/include after the host's, for Debian's pyconfig.h wrapper)."""
    binary = tmp_path / probe.stem
    extra = [f"-idirafter{include.split('/usr/include/')[0]}/usr/include"] if "/usr/include/" in include else []
    subprocess.run(["cc", f"-I{include}", f"-I{include}/internal", *extra, *flags, "-o", str(binary), str(probe)],
                   check=True)
    out = subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout
    return {name: int(value) for name, value in (line.split() for line in out.splitlines())}


def _version(python: str) -> tuple[int, int]:
    out = subprocess.run([python, "-c", "import sys; print(*sys.version_info[:2])"], check=True, capture_output=True, text=True)
    major, minor = out.stdout.split()
    return int(major), int(minor)


@pytest.mark.parametrize(("python", "include"), PYTHONS)
def test_layouts_match_the_interpreters_headers(tmp_path, python, include):
    """The table (3.10-3.12) or the binary's _Py_DebugOffsets (3.13) gives what the headers say."""
    if not Path(include, "internal").is_dir():
        pytest.fail(f"{include}/internal is missing: the headers of {python}")
    headers = _header_offsets(include, tmp_path)
    version = _version(python)
    proc = subprocess.Popen([python, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:  # found once the new process has mapped its interpreter
        running = wait_until(lambda: InterpreterFinder().in_process(proc.pid), f"{python}'s interpreter found in pid {proc.pid}")
    finally:
        proc.kill()
        proc.wait()
    assert running.interpreter.version == version
    row = running.interpreter.layout[0]
    for name, value in headers.items():
        assert int(row[name]) == value, name
    if version in HEADER_TABLES:
        assert (row == layout_row(version)[0]).all()


LINES_SCRIPT = """
import json, sys, json.decoder, argparse, collections
codes, seen = [], set()
def walk(co):
    if id(co) in seen: return
    seen.add(id(co)); codes.append(co)
    for c in co.co_consts:
        if hasattr(c, "co_lines"): walk(c)
for mod in (json.decoder, argparse, collections):
    for v in list(vars(mod).values()) + [a for t in vars(mod).values() if isinstance(t, type) for a in vars(t).values()]:
        if getattr(v, "__code__", None): walk(v.__code__)
print(json.dumps({"version": list(sys.version_info[:2]), "codes": [
    {"table": co.co_linetable.hex(), "first": co.co_firstlineno,
     "lines": [(s, e, -1 if l is None else l) for s, e, l in co.co_lines()]} for co in codes]}))
"""


@pytest.mark.parametrize("python", [python for python, _ in PYTHONS])
def test_line_numbers_match_co_lines(python):
    """Every instruction's line, as the interpreter itself numbers it."""
    _check_lines([python])


def _check_lines(python: list[str]) -> None:
    """LINES_SCRIPT run by `python` (a command line): each line it reports, as ours."""
    report = json.loads(subprocess.run([*python, "-c", LINES_SCRIPT], check=True, capture_output=True, text=True).stdout)
    before_311 = tuple(report["version"]) < (3, 11)
    checked = 0
    for code in report["codes"]:
        offsets = [offset for start, end, _ in code["lines"] for offset in range(start, end, 2)]
        expected = [line for start, end, line in code["lines"] for _ in range(start, end, 2)]
        assert _core.lines_at(bytes.fromhex(code["table"]), code["first"], before_311, offsets) == expected, code
        checked += len(offsets)
    assert checked > 1000  # how many offsets depends on the version's code; thousands, not a handful


def _root_include(job_root, name: str) -> str:
    """Where the test root keeps the headers of its interpreter `name`."""
    if name.endswith("t"):
        return f"{job_root.path}/opt/python{name}/include/python{name}"
    return f"{job_root.path}/usr/include/python{name}"


@pytest.mark.parametrize("name", ["3.13", "3.14", "3.15", "3.13t"])
def test_debug_offsets_of_the_roots_interpreters(job_root, tmp_path, name):
    """Where each value sits in _Py_DebugOffsets, and the struct sizes checked against them,
    as the interpreter's headers declare (and for 3.14+, its free-threaded build's); the
    layout read from its binary, in a running process of its root, as its headers' offsets."""
    from tests.roots import INTERPRETERS

    include = _root_include(job_root, name)
    version = tuple(int(part) for part in name.rstrip("t").split("."))
    builds = [()] + ([("-DPy_GIL_DISABLED=1",)] if version >= (3, 14) and not name.endswith("t") else [])
    for flags in builds:
        declared = _header_offsets(include, tmp_path, POSITIONS_PROBE, *flags)
        assert {field: declared[field] for field in DEBUG_POSITIONS[version]} == DEBUG_POSITIONS[version], flags
        assert [declared[f"size.{struct}"] for struct in DEBUG_SIZED_BY] == list(DEBUG_SIZES_AT[version])
        assert declared["size.debug_offsets"] == DEBUG_SIZE[version]
    proc = subprocess.Popen(job_root.command("chroot", [INTERPRETERS[name], "-c", "import sys; sys.stdin.read()"]),
                            stdin=subprocess.PIPE)
    try:
        running = wait_until(lambda: InterpreterFinder().in_process(proc.pid), f"{name}'s interpreter in pid {proc.pid}")
    finally:
        proc.kill()
        proc.wait()
    interpreter = running.interpreter
    assert (interpreter.version, interpreter.free_threaded) == (version, name.endswith("t"))
    assert interpreter.path == INTERPRETERS[name]  # inside its root
    row = interpreter.layout[0]
    for field, value in _header_offsets(include, tmp_path).items():
        assert int(row[field]) == value, field
    masks = _header_offsets(include, tmp_path, POSITIONS_PROBE)
    assert (row["unicode_kind_mask"], row["unicode_ascii_mask"]) == (masks["unicode_kind_mask"],
                                                                     masks["unicode_ascii_mask"])
    tlbc = row["code_tlbc"], row["frame_tlbc_index"]
    assert tlbc == (ev.PY_NO_FIELD, ev.PY_NO_FIELD)  # 3.13t has no thread-local bytecode; the others are not free-threaded


def test_damaged_debug_offsets_are_refused(job_root):
    """A _Py_DebugOffsets whose values do not fit their structs, or of another version, or
    cut short, is refused with what is wrong, not walked."""
    from ioobserve.python.elf import ElfFile

    elf = ElfFile(job_root.path / "usr/bin/python3.14")
    data = bytearray(elf.read(elf.symbol("_PyRuntime"), DEBUG_SIZE[(3, 14)]))
    assert layout_row((3, 14), bytes(data))["version"][0] == 0x30E
    native_id_at = DEBUG_POSITIONS[(3, 14)]["tstate_native_id"]
    damaged = data[:native_id_at] + (1 << 40).to_bytes(8, "little") + data[native_id_at + 8:]
    with pytest.raises(LayoutError, match="damaged .tstate_native_id"):
        layout_row((3, 14), bytes(damaged))
    with pytest.raises(LayoutError, match="says version"):
        layout_row((3, 15), bytes(data) + bytes(DEBUG_SIZE[(3, 15)]))
    with pytest.raises(LayoutError, match="no _Py_DebugOffsets"):
        layout_row((3, 14), bytes(data[:100]))


@pytest.mark.parametrize("name", ["3.13", "3.14", "3.15", "3.13t"])
def test_line_numbers_match_co_lines_in_the_roots_interpreters(job_root, name):
    """Every instruction's line, as the root's interpreter itself numbers it."""
    from tests.roots import INTERPRETERS

    _check_lines(job_root.command("chroot", [INTERPRETERS[name]]))
