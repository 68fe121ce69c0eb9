"""Per kernel: each layer's way in, the start time of `record -- true` by each syscall way in
and with the libc layer (per-function uprobes where the kernel has no uprobe_multi), and the
instructions the verifier processed for each program (bpf_prog_info.verified_insns).

Run inside each guest of the kernel matrix (timings under emulation compare ways on one
kernel; they say nothing of a node's cost):

    ci/kernel_matrix.py --command ".venv/bin/python bench/kernel_start.py"

or on this machine: sudo .venv/bin/python bench/kernel_start.py
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IOOBSERVE = str(ROOT / ".venv" / "bin" / "ioobserve")
ROUNDS = 3


def start_time(*options: str, env: dict[str, str] | None = None) -> float | str:
    """Median wall time of `record [options] -- true`, or the error's last line."""
    times = []
    for _ in range(ROUNDS):
        with tempfile.TemporaryDirectory(dir="/var/tmp") as out:
            started = time.monotonic()
            done = subprocess.run([IOOBSERVE, "record", "-o", out, *options, "--", "true"], capture_output=True, text=True,
                                  env={**os.environ, **(env or {})})
            if done.returncode != 0:
                return done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
            times.append(time.monotonic() - started)
    return round(statistics.median(times), 2)


def verified_instructions(*options: str, env: dict[str, str] | None = None) -> dict[str, int]:
    """{program: instructions the verifier processed} of a recording's programs (bpftool)."""
    with tempfile.TemporaryDirectory(dir="/var/tmp") as out:
        recorder = subprocess.Popen([IOOBSERVE, "record", "-o", out, *options], stderr=subprocess.PIPE, text=True,
                                    stdout=subprocess.DEVNULL, env={**os.environ, **(env or {})})
        for line in recorder.stderr:
            if "recording to" in line:
                break
        listing = json.loads(subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True,
                                            check=True).stdout)
        recorder.send_signal(signal.SIGTERM)
        recorder.communicate(timeout=300)
    counts: dict[str, int] = {}
    for program in listing:
        name, processed = program.get("name", ""), program.get("verified_insns")
        if processed is not None:  # every program loaded now: a guest runs no other observer
            counts[name] = max(counts.get(name, 0), processed)
    return dict(sorted(counts.items()))


def main() -> None:
    doctor = subprocess.run([IOOBSERVE, "doctor"], capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    ways = [line.strip("│ ").split("│")[:2] for line in doctor.stdout.splitlines()
            if line.startswith("│") and "mechanism" not in line]
    subprocess.run([IOOBSERVE, "record", "-o", "/var/tmp/warm", "--", "true"], capture_output=True)  # the compile, kept
    result = {
        "kernel": os.uname().release,
        "layers": {layer.strip(): way.strip() for layer, way in ways[-10:] if layer.strip()},
        "start_s": {way: start_time(env={"IOOBSERVE_SYSCALL_PROBES": way}) for way in ("fentry", "tp_btf", "raw")},
        "start_s_default": start_time(),
        "start_s_libc": start_time("--layers", "libc"),
        "verified_insns": {way: verified_instructions(env={"IOOBSERVE_SYSCALL_PROBES": way}) for way in ("fentry", "tp_btf")},
    }
    print("KERNEL-START " + json.dumps(result), flush=True)


if __name__ == "__main__":
    sys.exit(main())
