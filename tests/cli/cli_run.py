"""The installed command as a user runs it, and the check that a user's mistake gets one clear
line: shared by the CLI tests."""

from __future__ import annotations

import subprocess

from tests.conftest import ROOT


IOOBSERVE = str(ROOT / ".venv" / "bin" / "ioobserve")


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    """`ioobserve ARGS`, its output captured."""
    return subprocess.run([IOOBSERVE, *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def assert_one_line_error(result: subprocess.CompletedProcess, *words: str) -> None:
    """A failed run that said one `ioobserve: error:` line, holding each of `words`, and no traceback."""
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("ioobserve: error:"), lines[0]
    assert "Traceback" not in result.stderr
    for word in words:
        assert word in lines[0], lines[0]
