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


@pytest.fixture(scope="session")
def job_root(root_required, tmp_path_factory):
    """Debian's unstable suite as a job's own root, with the launcher that enters it
    (tests/roots.py; ci/roots.sh builds it, and make test runs that)."""
    import subprocess

    from tests.roots import UNSTABLE, JobRoot, build_launcher, missing_root, mount_proc

    why = missing_root()
    if why is not None:
        if in_ci():
            pytest.fail(why)
        pytest.skip(why)
    launcher = build_launcher(tmp_path_factory.mktemp("launcher"))
    mounted = mount_proc(UNSTABLE)
    yield JobRoot(UNSTABLE, launcher)
    if mounted:
        subprocess.run(["umount", "-l", str(UNSTABLE / "proc")], check=False)
