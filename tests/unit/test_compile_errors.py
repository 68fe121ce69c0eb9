"""The compiler's errors reach the user even when LLVM ends the process itself (it exit(1)s
on some errors, such as the BPF stack limit, while ioobserve holds its stderr aside)."""

from __future__ import annotations

import subprocess

from tests.conftest import PYTHON

DIES_INSIDE = """
import os
from ioobserve.probes.build.compile import _captured_stderr
with _captured_stderr():
    os.write(2, b"warning: headers differ\\nerror: stack limit exceeded\\n")
    os._exit(1)
"""

RETURNS = """
import os
from ioobserve.probes.build.compile import _captured_stderr
with _captured_stderr() as diagnostics:
    os.write(2, b"warning: headers differ\\n")
    written = diagnostics()
print(written)
"""


def test_an_exit_inside_the_compiler_still_prints_its_error():
    done = subprocess.run([PYTHON, "-c", DIES_INSIDE], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert done.stderr == "ioobserve: error: the BPF compiler exited: error: stack limit exceeded\n"


def test_a_compile_that_returns_keeps_the_terminal_quiet():
    done = subprocess.run([PYTHON, "-c", RETURNS], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout == "['warning: headers differ']\n"
