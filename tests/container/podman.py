"""Running the project's image under podman as a node agent runs: the host's PID namespace,
its root read-only at /host, privileged; and containers beside it as a pod's would be."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

from tests.waiting import wait_until

# crun, podman's default runtime, refuses this machine's hybrid cgroups; runc runs everywhere.
PODMAN = ["podman", "--runtime", "runc"]
# Explicit limits within the machine's hard ones (podman's defaults exceed them here).
LIMITS = ["--ulimit", "nofile=20000:20000", "--ulimit", "nproc=32768:32768"]
AGENT = ["--pid=host", "--privileged", *LIMITS]
HOST_ROOT = ["-v", "/:/host:ro", "-e", "IOOBSERVE_HOST_ROOT=/host"]


def podman(*args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess:
    """One podman command; its output as text."""
    done = subprocess.run([*PODMAN, *args], capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return done


class Detached:
    """A container started in the background, stopped and removed by `stop`."""

    def __init__(self, image: str, *options_and_command: str):
        """`options_and_command`: podman run's options, '--', then the command."""
        self.name = f"ioobserve-test-{uuid.uuid4().hex[:10]}"
        podman("run", "-d", "--name", self.name, *_split(image, options_and_command))

    def logs(self) -> str:
        done = podman("logs", self.name, check=False)
        return done.stdout + done.stderr

    def wait_logged(self, text: str, timeout: float = 180) -> None:
        """Wait until its output holds `text` (compiling the probes takes a while under load)."""
        wait_until(lambda: text in self.logs() or self.exited(),
                   lambda: f"the container logged {text!r}; it logged: {self.logs()}", timeout)
        assert text in self.logs(), f"the container ended before logging {text!r}: {self.logs()}"

    def exited(self) -> bool:
        return podman("inspect", "--format", "{{.State.Running}}", self.name, check=False).stdout.strip() == "false"

    def stop(self) -> tuple[int, str]:
        """SIGTERM, as the kubelet stops a pod; its exit status and output."""
        podman("stop", "--time", "120", self.name, timeout=180)
        status = int(podman("inspect", "--format", "{{.State.ExitCode}}", self.name).stdout.strip())
        out = self.logs()
        podman("rm", "--force", self.name, check=False)
        return status, out


def _split(image: str, options_and_command: tuple[str, ...]) -> list[str]:
    """podman run's arguments: the options, then the image, then the command (after '--')."""
    cut = options_and_command.index("--")
    return [*options_and_command[:cut], image, *options_and_command[cut + 1:]]


def private_dir(parent: Path, name: str) -> Path:
    """A directory only root can use, as the recorder wants its output directory."""
    directory = parent / name
    directory.mkdir(mode=0o700)
    return directory
