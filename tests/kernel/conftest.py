"""Kernel tests' shared teardown, the two halves of a matrix test (tests/kernel/kernel_side.py),
and the Slurm-like job cgroup the `serve` tests put their workloads in."""

from __future__ import annotations

import pytest

from tests.kernel.kernel_side import KernelSide, KernelSideDone, phase
from tests.kernel.recorder import kill_leftovers
from tests.kernel.scratch_cgroups import scratch_cgroups
from tests.kernel.serve_support import STEP


@pytest.fixture(autouse=True)
def no_recorder_left_running():
    """A test that fails while its recorder runs leaves nothing recording for the next ones."""
    yield
    kill_leftovers()


@pytest.fixture
def job_cgroup(root_required):
    """The cgroup of job serve_support.JOB's first step (removed after the test)."""
    with scratch_cgroups(STEP) as base:
        yield base / STEP


@pytest.fixture
def kernel_side(request, tmp_path_factory):
    """Runs a matrix test's kernel side here, or in its guest with the checks on the host."""
    side = KernelSide(request.node.nodeid, lambda: tmp_path_factory.mktemp("kernel-side"))
    yield side
    if phase() is not None and not side.called:
        pytest.fail(f"{request.node.nodeid} made no kernel_side call: in the matrix its checks would see this "
                    "machine's kernel, not the guest's")


def pytest_collection_modifyitems(config, items):
    """In the matrix's phases every matrix test must have its kernel side apart."""
    if phase() is None:
        return
    for item in items:
        if item.get_closest_marker("matrix") and "kernel_side" not in getattr(item, "fixturenames", ()):
            raise pytest.UsageError(f"{item.nodeid} is marked matrix but takes no kernel_side fixture "
                                    "(tests/kernel/kernel_side.py says how to split it)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """In a guest, a test that stopped after recording its kernel side has passed its part."""
    report = yield
    if call.excinfo is not None and call.excinfo.errisinstance(KernelSideDone):
        report.outcome = "passed"
        report.longrepr = None
    return report
