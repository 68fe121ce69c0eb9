"""Kernel tests' shared teardown."""

from __future__ import annotations

import pytest

from tests.kernel.recorder import kill_leftovers


@pytest.fixture(autouse=True)
def no_recorder_left_running():
    """A test that fails while its recorder runs leaves nothing recording for the next ones."""
    yield
    kill_leftovers()
