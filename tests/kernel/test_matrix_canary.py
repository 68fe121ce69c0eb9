"""The kernel matrix's own check that a failing guest fails the run: this test fails where
IOOBSERVE_MATRIX_FAIL=1 is set (tests/ci/test_kernel_matrix.py sets it for one guest), and
passes everywhere else, saying which kernel it ran on."""

from __future__ import annotations

import os

import pytest


@pytest.mark.matrix
def test_the_matrix_reports_this_kernel():
    release = os.uname().release
    assert os.environ.get("IOOBSERVE_MATRIX_FAIL") != "1", f"failing on purpose on {release} (IOOBSERVE_MATRIX_FAIL=1)"
