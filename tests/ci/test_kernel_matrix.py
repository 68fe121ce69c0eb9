"""The kernel matrix (ci/kernel_matrix.py) fails when a guest's test fails: one guest of the
list records the canary test made to fail (IOOBSERVE_MATRIX_FAIL=1), its check here fails, and
the run exits non-zero with the checks' own last lines and, last, the failed test's name; the
same guest with the canary passing exits 0, its kernel side recorded in the guest and checked here."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

MATRIX = ROOT / "ci" / "kernel_matrix.py"
CANARY = "tests/kernel/test_matrix_canary.py"


def _kernel() -> str:
    """The first kernel of the list."""
    import tomllib

    with open(ROOT / "ci" / "kernels" / "kernels.toml", "rb") as source:
        return tomllib.load(source)["kernel"][0]["name"]


def _run(fail: bool) -> subprocess.CompletedProcess:
    env = {**os.environ, "IOOBSERVE_MATRIX_TIMEOUT": "900"}
    env.pop("IOOBSERVE_MATRIX_FAIL", None)
    if fail:
        env["IOOBSERVE_MATRIX_FAIL"] = "1"
    return subprocess.run([sys.executable, str(MATRIX), "--kernel", _kernel(), "--", CANARY],
                          capture_output=True, text=True, env=env, timeout=1200)


@pytest.mark.kernel
def test_a_failing_guest_fails_the_matrix_with_its_last_lines(root_required):
    failed = _run(fail=True)
    assert failed.returncode != 0, failed.stdout[-2000:] + failed.stderr[-2000:]
    assert "failed in the checks here (exit status 1)" in failed.stderr, failed.stderr[-2000:]
    tail = failed.stderr.split("its checks' last lines:", 1)[1]
    # the release is the guest's, recorded there: not this machine's
    assert "failing on purpose on" in tail and "1 failed" in tail, tail
    assert f"failing on purpose on {os.uname().release}" not in tail, tail
    # The failed test's name comes last, where a CI log's tail shows it.
    said = failed.stderr.rsplit("what pytest said of it:", 1)[1]
    assert "FAILED tests/kernel/test_matrix_canary.py::" in said and "1 failed" in said, said
    passed = _run(fail=False)
    assert passed.returncode == 0, passed.stdout[-2000:] + passed.stderr[-2000:]
    assert f"{_kernel()}: passed" in passed.stderr
    assert "PASSED" in passed.stdout and "1 passed" in passed.stdout  # in the guest, then in its checks
