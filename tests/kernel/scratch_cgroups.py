"""Scratch cgroups under the v2 mount for kernel tests, removed afterwards."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ioobserve.context.mounts import cgroup2_mount


@contextlib.contextmanager
def scratch_cgroups(*relatives: str) -> Iterator[Path]:
    """A fresh cgroup under the v2 mount with the given descendants made in it; on exit,
    any process left inside goes back to the root cgroup and the tree is removed."""
    mount = cgroup2_mount()
    if mount is None:
        pytest.fail("cgroup v2 is not mounted")
    base = mount / f"ioobserve-test-{uuid.uuid4().hex[:8]}"
    base.mkdir()
    try:
        for relative in relatives:
            (base / relative).mkdir(parents=True)
        yield base
    finally:
        for directory, _, _ in sorted(os.walk(base), key=lambda entry: -len(entry[0])):
            for pid in Path(directory, "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):  # it may have exited meanwhile
                    (mount / "cgroup.procs").write_text(pid)
            os.rmdir(directory)
