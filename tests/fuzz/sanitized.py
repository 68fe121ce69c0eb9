"""The compiled core built with AddressSanitizer and UndefinedBehaviorSanitizer, and a Python
that loads it in place of the package's own (tests/fuzz/sanitized_plugin.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "ioobserve" / "csrc").glob("*.c"))
ENV_MODULE = "IOOBSERVE_SANITIZED_CORE"  # the sanitized module's path, for conftest.py


def build(directory: Path, sources: list[Path] | None = None) -> Path:
    """Compile the core (or other `sources` of a module _core) with -fsanitize=address,undefined
    (every warning an error) into `directory`; the module's path."""
    out = directory / ("_core" + sysconfig.get_config_var("EXT_SUFFIX"))
    command = ["gcc", "-shared", "-fPIC", "-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined",
               "-fno-sanitize-recover=all", "-Wall", "-Wextra", "-Werror", f"-I{sysconfig.get_paths()['include']}",
               *map(str, sources or SOURCES), "-o", str(out)]
    subprocess.run(command, check=True, capture_output=True, text=True)
    return out


def run_pytest(module: Path, tests: list[str], timeout: float) -> subprocess.CompletedProcess:
    """pytest on `tests` in a Python whose first library is ASan's runtime, with the
    sanitized core loaded: any report aborts the run."""
    runtime = subprocess.run(["gcc", "-print-file-name=libasan.so"], check=True, capture_output=True, text=True).stdout.strip()
    env = {**os.environ, ENV_MODULE: str(module), "LD_PRELOAD": runtime,
           "PYTHONMALLOC": "malloc",  # every allocation through malloc, where ASan guards it (not pymalloc's arenas)
           # Python frees little at exit by design: leak reports would be about the interpreter.
           "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1:allocator_may_return_null=1",
           "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}
    # --capture=sys: a sanitizer writes its report to fd 2, which must reach us, not pytest's capture.
    command = [sys.executable, "-m", "pytest", "-q", "--capture=sys", "-p", "no:cacheprovider", "-p", "tests.fuzz.sanitized_plugin", *tests]
    return subprocess.run(command, cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
