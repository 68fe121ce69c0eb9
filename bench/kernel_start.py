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
import statistics
import subprocess
import sys
import tempfile
import time

from harness import IOOBSERVE

ROUNDS = 3


def start_time(*options: str, env: dict[str, str] | None = None) -> float | str:
    """Median wall time of `record [options] -- true`, or the error's last line."""
    times = []
    for _ in range(ROUNDS):
        with tempfile.TemporaryDirectory(dir="/var/tmp") as out:
            started = time.monotonic()
            done = subprocess.run([str(IOOBSERVE), "record", "-o", out, *options, "--", "true"], capture_output=True, text=True,
                                  env={**os.environ, **(env or {})})
            if done.returncode != 0:
                return done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
            times.append(time.monotonic() - started)
    return round(statistics.median(times), 2)


def verified_instructions(way: str) -> dict[str, int]:
    """{program: instructions the verifier processed} of the default layers' programs, the
    syscall layer entered by `way`."""
    from ioobserve.collect.recording import load_probes

    os.environ["IOOBSERVE_SYSCALL_PROBES"] = way
    try:
        probes = load_probes()
    finally:
        del os.environ["IOOBSERVE_SYSCALL_PROBES"]
    try:
        probes.verify()
        return probes.verified_instructions()
    finally:
        probes.close()


def main() -> None:
    doctor = subprocess.run([str(IOOBSERVE), "doctor"], capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    ways = [line.strip("│ ").split("│")[:2] for line in doctor.stdout.splitlines()
            if line.startswith("│") and "mechanism" not in line]
    subprocess.run([str(IOOBSERVE), "record", "-o", "/var/tmp/warm", "--", "true"], capture_output=True)  # the compile, kept
    starts = {way: start_time(env={"IOOBSERVE_SYSCALL_PROBES": way}) for way in ("fentry", "tp_btf", "raw")}
    result = {
        "kernel": os.uname().release,
        "layers": {layer.strip(): way.strip() for layer, way in ways[-10:] if layer.strip()},
        "start_s": starts,
        "start_s_default": start_time(),
        "start_s_libc": start_time("--layers", "libc"),
        "verified_insns": {way: verified_instructions(way) for way, took in starts.items() if not isinstance(took, str)},
    }
    print("KERNEL-START " + json.dumps(result), flush=True)


if __name__ == "__main__":
    sys.exit(main())
