"""The command line's ways in: `python -m ioobserve` runs the same CLI as the console script,
and `--version` says which ioobserve it is (what an admin checks in a deployed image)."""

from __future__ import annotations

import subprocess
import sys

import ioobserve


def _module(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ioobserve", *argv], capture_output=True, text=True, timeout=60)


def test_python_dash_m_prints_the_version():
    done = _module("--version")
    assert (done.returncode, done.stdout, done.stderr) == (0, f"ioobserve {ioobserve.__version__}\n", "")


def test_python_dash_m_gives_a_users_mistake_one_line_and_status_2(tmp_path):
    missing = tmp_path / "none.pfw.gz"
    done = _module("analyze", str(missing))
    assert done.returncode == 2
    assert done.stderr == f"ioobserve: error: {missing}: no such trace file\n"
