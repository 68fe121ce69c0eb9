"""The Python layer's tables against CPython itself: struct offsets compiled from each
interpreter's own headers, _Py_DebugOffsets read from 3.13's binary, and line numbers
against the interpreter's own code.co_lines()."""

from __future__ import annotations

import glob
import json
import subprocess
from pathlib import Path

import pytest

from ioobserve.python.interpreters import InterpreterFinder
from ioobserve.python.layouts import HEADER_TABLES, layout_row
from ioobserve.python.linetable import LineTable
from tests.conftest import ROOT
from tests.waiting import wait_until

PROBE = ROOT / "tests" / "unit" / "python_offsets.c"
# (interpreter, its include directory): Debian's, and pyenv's of every version it has.
PYTHONS = [("/usr/bin/python3.11", "/usr/include/python3.11")] + [
    (path, str(Path(path).parents[1] / "include" / Path(path).name))
    for path in sorted(glob.glob("/root/.pyenv/versions/3.1[0-9].*/bin/python3.1[0-9]"))
]


def _header_offsets(include: str, tmp_path: Path) -> dict[str, int]:
    binary = tmp_path / "offsets"
    subprocess.run(["cc", f"-I{include}", f"-I{include}/internal", "-o", str(binary), str(PROBE)], check=True)
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
    report = json.loads(subprocess.run([python, "-c", LINES_SCRIPT], check=True, capture_output=True, text=True).stdout)
    version = tuple(report["version"])
    checked = 0
    for code in report["codes"]:
        table = LineTable.parse(bytes.fromhex(code["table"]), code["first"], version)
        for start, end, line in code["lines"]:
            for offset in range(start, end, 2):
                assert table.line(offset) == line, (code, offset)
                checked += 1
    assert checked > 1000  # how many offsets depends on the version's code; thousands, not a handful
