"""Shared fixtures: where the project is, and how kernel tests get root."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable


def in_ci() -> bool:
    """CI runs as root with CI=true; there a kernel test that cannot run must fail."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def root_required():
    """Kernel tests need root: skip on a developer's unprivileged run, fail in CI."""
    if os.geteuid() != 0:
        if in_ci():
            pytest.fail("kernel tests must run as root in CI")
        pytest.skip("needs root to attach probes")
