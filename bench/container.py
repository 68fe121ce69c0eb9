"""Issue 47: ioobserve's image as a node agent, beside the same code on the host.

1. The image's size (`make image`'s, built first if missing, or --image).
2. Start to data: from `podman run` (or the host's `ioobserve serve`) to the first scrape of
   /metrics that counts a call, while bench/flood.c issues pread(64 B) at a low rate. Each side
   has a cache directory of its own, empty at first (a cold start compiles the probes) and kept
   from round to round, as the DaemonSet's hostPath keeps it across restarts (a warm start).
3. serve's CPU (share of one core) and peak RSS on the same paced flood (bench/serve.py's
   daemon_cost), inside the container and on the host, interleaved (--rounds), medians.

  sudo .venv/bin/python bench/container.py --rate 100000 --seconds 10 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import harness
from harness import IOOBSERVE, ROOT, build
from serve import Observer, _free_port, daemon_cost  # a sibling script

PODMAN = ["podman", "--runtime", "runc"]  # crun refuses this machine's hybrid cgroups


def agent_options(cache: Path) -> list[str]:
    """`podman run`'s options for the agent, as the DaemonSet gives them; `cache` kept across runs."""
    return ["--pid=host", "--privileged", "--network=host", "--ulimit", "nofile=20000:20000",
            "--ulimit", "nproc=32768:32768", "-v", "/:/host:ro", "-e", "IOOBSERVE_HOST_ROOT=/host",
            "-v", f"{cache}:/var/cache/ioobserve"]


class ContainerObserver:
    """`ioobserve serve` in the image, with Observer's methods (its process seen from the host)."""

    kind = "serve"

    def __init__(self, image: str, cache: Path):
        self.port = _free_port()
        self.name = f"ioobserve-bench-{os.getpid()}-{self.port}"
        subprocess.run([*PODMAN, "run", "-d", "--name", self.name, *agent_options(cache), image, "ioobserve", "serve",
                        f"--listen=127.0.0.1:{self.port}"], check=True, capture_output=True, text=True)
        while "metrics on" not in self._logs():
            if self._inspect("{{.State.Running}}") == "false":
                raise RuntimeError(f"serve did not start in the container: {self._logs()}")
            time.sleep(0.1)
        self.pid = int(self._inspect("{{.State.Pid}}"))  # the container's first process: serve itself

    def _logs(self) -> str:
        done = subprocess.run([*PODMAN, "logs", self.name], capture_output=True, text=True)
        return done.stdout + done.stderr

    def _inspect(self, field: str) -> str:
        return subprocess.run([*PODMAN, "inspect", "--format", field, self.name], capture_output=True, text=True).stdout.strip()

    def cpu_seconds(self) -> float:
        return harness.cpu_seconds(self.pid)

    def peak_rss_mb(self) -> float:
        return harness.peak_rss_mb(self.pid)

    def scrape(self) -> int:
        return len(urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=30).read())

    def stop(self) -> None:
        subprocess.run([*PODMAN, "stop", "--time", "120", self.name], check=True, capture_output=True)
        subprocess.run([*PODMAN, "rm", "--force", self.name], capture_output=True)


def _counts_a_call(port: int) -> bool:
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    except OSError:
        return False
    return any(line.startswith("ioobserve_calls_total{") and float(line.rsplit(" ", 1)[1]) > 0
               for line in text.splitlines())


def start_to_data(where: str, image: str, flood: Path, work: Path) -> float:
    """Seconds from starting serve to a scrape counting a call, with a slow flood running."""
    generator = subprocess.Popen([str(flood), str(work / "flood.dat"), "1", "100000000", "1000"],
                                 stdout=subprocess.DEVNULL, start_new_session=True)  # flood forks its callers
    port, name, host = _free_port(), f"ioobserve-bench-start-{os.getpid()}", None
    try:
        start = time.perf_counter()
        if where == "container":
            subprocess.run([*PODMAN, "run", "-d", "--name", name, *agent_options(work / "cache-container"), image,
                            "ioobserve", "serve", f"--listen=127.0.0.1:{port}"], check=True, capture_output=True)
        else:
            host = subprocess.Popen([str(IOOBSERVE), "serve", f"--listen=127.0.0.1:{port}",
                                     "--socket", str(work / f"start-{port}.sock"), "--record-dir", str(work / "jobs")],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while not _counts_a_call(port):
            time.sleep(0.05)
        return time.perf_counter() - start
    finally:
        os.killpg(generator.pid, signal.SIGKILL)
        generator.wait()
        if host is not None:
            harness.stop(host)
        else:
            subprocess.run([*PODMAN, "rm", "--force", "--time", "60", name], capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--image", default="localhost/ioobserve:latest", help="the image (default: make image's)")
    parser.add_argument("--rate", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/container.py: run as root (podman, probes)")
    def size() -> subprocess.CompletedProcess:
        return subprocess.run([*PODMAN, "image", "inspect", "--format", "{{.Size}}", args.image], capture_output=True, text=True)

    inspected = size()
    if inspected.returncode != 0:  # not built yet: build it as `make image` does
        subprocess.run([str(ROOT / "deploy" / "image" / "build.sh"), args.image], check=True)
        inspected = size()
    work = Path(tempfile.mkdtemp(prefix="ioobserve-bench-container-"))
    (work / "cache-container").mkdir(mode=0o700)
    os.environ["IOOBSERVE_CACHE_DIR"] = str(work / "cache-host")  # the host's serve starts cold too
    flood = build("flood.c", work)
    print(f"image {args.image}: {int(inspected.stdout) / 2**20:.0f} MiB")
    starts: dict[str, list[float]] = {"container": [], "host": []}
    costs: dict[str, list[dict]] = {"container": [], "host": []}
    for _ in range(args.rounds):
        for where in ("container", "host"):
            starts[where].append(start_to_data(where, args.image, flood, work))
            observer = ContainerObserver(args.image, work / "cache-container") if where == "container" else Observer("serve", work)
            costs[where].append(daemon_cost("serve", args.rate, args.seconds, flood, work, observer))
    print(f"\nserve, {args.rounds} interleaved rounds, medians; flood {args.rate:,} pread/s for {args.seconds:g} s:\n")
    print("| where | cold start to first data s | warm start s | CPU (share of a core) | peak RSS MB |")
    print("|---|---|---|---|---|")
    for where in ("container", "host"):
        warm = statistics.median(starts[where][1:]) if args.rounds > 1 else float("nan")
        print(f"| {where} | {starts[where][0]:.2f} | {warm:.2f} | "
              f"{statistics.median(c['cpu'] for c in costs[where]):.1%} | "
              f"{statistics.median(c['peak_rss_mb'] for c in costs[where]):.0f} |")
    print(json.dumps({"starts": starts, "costs": costs}))


if __name__ == "__main__":
    main()
