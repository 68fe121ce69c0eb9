"""`ioobserve serve` for the kernel tests: a service started on a free loopback port with its
own socket and trace directory, a Slurm-like job's cgroup and a workload of known I/O in it,
and /metrics parsed with prometheus_client's parser."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ROOT
from tests.kernel import programs
from tests.kernel.recorder import IOOBSERVE, STOP_WAIT
from tests.waiting import wait_until

JOB = "5151"
STEP = f"system.slice/node1_slurmstepd.scope/job_{JOB}/step_0/user/task_0"
WRITES, WRITE_SIZE, READS, READ_SIZE = 7, 3000, 5, 256
# Moves itself into the job's cgroup, then makes exactly these file calls (and one failed open).
WORKLOAD = f"""
import json, os, sys
cgroup, path = sys.argv[1], sys.argv[2]
with open(os.path.join(cgroup, "cgroup.procs"), "w") as procs:
    procs.write(str(os.getpid()))
fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o600)
for _ in range({WRITES}):
    os.write(fd, b"x" * {WRITE_SIZE})
os.lseek(fd, 0, 0)
for _ in range({READS}):
    os.read(fd, {READ_SIZE})
os.close(fd)
try:
    os.open(path + ".missing", os.O_RDONLY)
except FileNotFoundError:
    pass
print(json.dumps({{"pid": os.getpid()}}))
"""


def free_port() -> int:
    """A loopback TCP port nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Service:
    """A running `ioobserve serve` with its own port, socket and trace directory."""

    def __init__(self, tmp_path: Path, *options: str, socket_path: Path | None = None):
        self.port, self.traces = free_port(), tmp_path / "traces"
        self.socket = socket_path or tmp_path / "run" / "events.sock"
        self.proc = subprocess.Popen([IOOBSERVE, "serve", "--listen", f"127.0.0.1:{self.port}", "--socket", str(self.socket),
                                      "--record-dir", str(self.traces), "--stop-timeout", "300", *options],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.out = self.proc.stdout.readline()
        assert "metrics on" in self.out, self.out + self.proc.stdout.read()
        self.programs = programs.held_by(self.proc.pid)  # the daemon's, once it is ready
        self.lines: list[str] = []  # its log from here on, read as it comes
        self._reader = threading.Thread(target=lambda: self.lines.extend(iter(self.proc.stdout.readline, "")),
                                        daemon=True)
        self._reader.start()

    def logged(self, text: str) -> str:
        """Wait for a log line holding `text`; returns it."""
        return wait_until(lambda: next((line for line in self.lines if text in line), None),
                          lambda: f"the daemon logged {text!r}; it logged: {self.lines}")

    def scrape(self) -> str:
        """/metrics as served."""
        return urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=30).read().decode()

    def metrics(self) -> dict:
        """(family, sample name, labels) -> value, from a scrape parsed by prometheus_client."""
        return parsed(self.scrape())

    def job(self, action: str, job: str = JOB) -> None:
        """The Slurm hook, as slurmd would run it."""
        script = ROOT / "deploy" / "slurm" / f"{'prolog' if action == 'start' else 'epilog'}.sh"
        env = {**os.environ, "SLURM_JOB_ID": job, "IOOBSERVE": IOOBSERVE, "IOOBSERVE_SOCKET": str(self.socket)}
        subprocess.run(["sh", str(script)], env=env, check=True, timeout=60)

    def stop(self) -> str:
        """SIGTERM, then its output once it has exited: waited for as long as the recorder's (its
        own stop deadline and a minute more: an emulated matrix guest once took over 120 s)."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=STOP_WAIT)
        self._reader.join(timeout=30)
        out = "".join(self.lines)
        assert self.proc.returncode == 0, out
        return self.out + out


def run_workload(cgroup: Path, path: Path) -> int:
    """WORKLOAD run in `cgroup` on the file `path`; its pid."""
    done = subprocess.run([sys.executable, "-c", WORKLOAD, str(cgroup), str(path)], capture_output=True, text=True,
                          timeout=60, check=True)
    return json.loads(done.stdout)["pid"]


def parsed(text: str) -> dict:
    """(family, sample name, labels) -> value, from a scrape's text parsed by prometheus_client."""
    return {(family.name, sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def metric_value(metrics: dict, sample: str, **labels: str) -> float:
    """The sum over the samples of this name whose labels include these."""
    return sum(value for (_, name, found), value in metrics.items()
               if name == sample and labels.items() <= dict(found).items())
