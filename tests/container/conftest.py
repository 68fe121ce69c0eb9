"""The image under test: built once per session from this checkout by deploy/image/build.sh
(what `make image` runs), removed afterwards. Needs root and podman: skipped on a developer's
unprivileged run, failed in CI."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.conftest import ROOT, in_ci
from tests.container.podman import podman

TAG = "localhost/ioobserve-test:build"


@pytest.fixture(scope="session")
def image(root_required) -> str:
    """The image's tag."""
    if shutil.which("podman") is None:
        why = "podman is not installed (make setup installs it)"
        if in_ci():
            pytest.fail(why)
        pytest.skip(why)
    built = subprocess.run([str(ROOT / "deploy" / "image" / "build.sh"), TAG], capture_output=True, text=True,
                           timeout=1200, cwd=ROOT)
    assert built.returncode == 0, f"the image did not build:\n{built.stdout}\n{built.stderr}"
    yield TAG
    podman("rmi", "--force", TAG, TAG.rsplit(":", 1)[0] + ":latest", check=False)
