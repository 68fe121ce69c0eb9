"""The kernel matrix's own check that a failing guest fails the run: this test fails where
IOOBSERVE_MATRIX_FAIL=1 is set (tests/ci/test_kernel_matrix.py sets it for one guest), and
passes everywhere else, saying which kernel it ran on."""

from __future__ import annotations

import os

import pytest


def _which_kernel(out) -> dict:
    return {"release": os.uname().release, "fail": os.environ.get("IOOBSERVE_MATRIX_FAIL") == "1"}


@pytest.mark.matrix
def test_the_matrix_reports_this_kernel(kernel_side):
    kernel = kernel_side(_which_kernel)
    assert not kernel["fail"], f"failing on purpose on {kernel['release']} (IOOBSERVE_MATRIX_FAIL=1)"
