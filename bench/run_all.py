"""Every benchmark in bench/, one after another, each in a process of its own.

`make bench` runs them at their documented sizes, `make bench QUICK=1` (--quick) with small
rounds and sizes, minutes in all, to see that they work rather than to measure.

Each script's output comes under a heading, then one line per script (ok, failed or skipped,
and its seconds); the exit status is 1 if any failed. The DFTracer columns need .venv-peers
(ci/peers.sh): without it those scripts run without them, and trace_size.py, a comparison
with DFTracer only, is skipped. analysis.py and trace_io.py repeat the events of a trace
recorded here first (the bundled loader, as `make demo` runs it), which load.py loads. Needs root.

  sudo .venv/bin/python bench/run_all.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness import BENCH, IOOBSERVE, PYTHON, ROOT

PEERS = ROOT / ".venv-peers"
NOT_BENCHMARKS = {"run_all.py", "h5py_bench.py", "harness.py"}  # this script, layers.py's h5py workload, the shared code
QUICK_TIMEOUT_S = 1200  # a quick run that takes longer is broken, not slow


@dataclass
class Benchmark:
    """One script: its arguments at full size and in a quick run, and what it needs."""

    script: str
    full: list[str] = field(default_factory=list)
    quick: list[str] = field(default_factory=list)
    peers: bool = False  # takes --dftracer-venv for the DFTracer columns
    peers_only: bool = False  # nothing to measure without DFTracer
    source: bool = False  # takes --source, a recorded trace
    trace: bool = False  # takes --trace, a recorded trace
    needs: str | None = None  # a program it runs


BENCHMARKS = [
    Benchmark("overhead.py", ["--rounds", "5"], ["--rounds", "1", "--calls", "100000", "--skip-strace"], peers=True),
    Benchmark("throughput.py", [], ["--calls", "200000", "--procs", "1"]),
    Benchmark("trace_size.py", [], ["--files", "200", "--epochs", "1"], peers=True, peers_only=True),
    Benchmark("real_job.py", [], ["--rounds", "1", "--epochs", "1", "--samples", "16"], peers=True,
              needs="/var/tmp/torchvenv/bin/python"),  # real_job.py's default --torch-python
    Benchmark("python_stacks.py", ["--rounds", "5", "--interpreters"], ["--rounds", "1", "--calls", "30000", "--interpreters"]),
    Benchmark("layers.py", ["--rounds", "5"], ["--rounds", "1", "--calls", "100000"], peers=True),
    Benchmark("analysis.py", [], ["--events", "200000"], source=True),
    Benchmark("top.py", [], ["--rates", "10000", "--seconds", "3"], needs="tmux"),
    Benchmark("serve.py", [], ["--rate", "20000", "--seconds", "3", "--rounds", "1", "--calls", "100000"]),
    Benchmark("exec_gate.py", ["--rounds", "5", "--root", "/var/cache/ioobserve/roots/unstable"], ["--rounds", "1", "--runs", "20"]),
    Benchmark("flood_control.py", ["--rounds", "5"], ["--rounds", "1", "--calls", "100000"]),
    Benchmark("container.py", [], ["--rate", "20000", "--seconds", "3", "--rounds", "1"], needs="podman"),
    Benchmark("io_uring.py", ["--rounds", "5"], ["--rounds", "1", "--seconds", "1"], needs="fio"),
    Benchmark("trace_io.py", [], ["--events", "200000"], peers=True, source=True),
    Benchmark("load.py", [], [], peers=True, trace=True),
    Benchmark("soak.py", [], ["--minutes", "1", "--rate", "50000", "--rotate-s", "20"]),
    Benchmark("recorder_cpu.py", [], ["--rates", "100000", "--seconds", "2"]),
    Benchmark("recorder_stages.py", [], ["--events", "16384", "--small", "4096"]),
    Benchmark("compression.py", [], ["--levels", "1", "6"], trace=True),
    Benchmark("replay.py", [], ["--seconds", "2"], needs="tmux", trace=True),
    Benchmark("stream_replay.py", ["all"], ["all", "--rounds", "1"]),
    Benchmark("thread_cpu.py", [], []),
    Benchmark("kernel_start.py", [], []),
    Benchmark("dask_scaling.py", [], ["--traces", "2", "--workers", "1", "--rounds", "1"], trace=True),
    Benchmark("object_requests.py", ["--rounds", "5"], ["--rounds", "1", "--requests", "200"], needs="strace"),
    Benchmark("s3_job.py", ["--torch-python", "/var/tmp/torchvenv/bin/python"],
              ["--torch-python", "/var/tmp/torchvenv/bin/python", "--rounds", "1", "--epochs", "1", "--samples", "8"],
              needs="/var/tmp/torchvenv/bin/python"),
]


def unlisted() -> list[str]:
    """Scripts in bench/ this file does not know: each is reported as a failure until listed."""
    known = {b.script for b in BENCHMARKS} | NOT_BENCHMARKS
    return sorted(p.name for p in BENCH.glob("*.py") if p.name not in known)


def record_source(scratch: Path) -> Path:
    """A real recording of the bundled loader: the trace analysis.py and trace_io.py repeat."""
    out = scratch / "source"
    subprocess.run([str(IOOBSERVE), "record", "-o", str(out), "--", str(PYTHON), str(ROOT / "tests" / "workloads" / "loader.py"),
                    "--dir", str(scratch), "--files", "32", "--workers", "4", "--epochs", "2", "--report", "text"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    (trace,) = sorted(out.glob("*.pfw.gz"))
    return trace


def command(bench: Benchmark, quick: bool, source: Path | None) -> list[str] | str:
    """The script's command line, or why it is skipped."""
    if bench.needs and shutil.which(bench.needs) is None:
        return f"needs {bench.needs}, which is not installed"
    have_peers = PEERS.is_dir()
    if bench.peers_only and not have_peers:
        return f"compares with DFTracer only, and {PEERS.name} is missing (ci/peers.sh makes it)"
    argv = [str(PYTHON), str(BENCH / bench.script), *(bench.quick if quick else bench.full)]
    if bench.peers and have_peers:
        argv += ["--dftracer-venv", str(PEERS)]
    if bench.source or bench.trace:
        if source is None:
            return "no recorded trace to read (recording the loader failed, see above)"
        argv += ["--source" if bench.source else "--trace", str(source)]
    return argv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small rounds and sizes: does every benchmark work?")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/run_all.py: run as root (most benchmarks attach probes)")
    if not PEERS.is_dir():
        print(f"no {PEERS.name} (ci/peers.sh makes it): the benchmarks run without the DFTracer columns", flush=True)
    scratch = Path(tempfile.mkdtemp(prefix="ioobserve-bench-all-"))
    results: list[tuple[str, str, float]] = [(name, "failed: not listed in bench/run_all.py", 0.0) for name in unlisted()]
    try:
        try:
            source = record_source(scratch)
        except subprocess.CalledProcessError as exc:
            print(f"recording the loader for analysis.py and trace_io.py failed: {exc.stderr[-800:]}", flush=True)
            source = None
        for bench in BENCHMARKS:
            argv = command(bench, args.quick, source)
            if isinstance(argv, str):
                print(f"\n== {bench.script}: skipped, {argv}", flush=True)
                results.append((bench.script, f"skipped: {argv}", 0.0))
                continue
            print(f"\n== {' '.join([bench.script, *argv[2:]])}", flush=True)
            started = time.monotonic()
            try:
                code = subprocess.run(argv, cwd=ROOT, timeout=QUICK_TIMEOUT_S if args.quick else None).returncode
                state = "ok" if code == 0 else f"failed (exit {code})"
            except subprocess.TimeoutExpired:
                state = f"failed (still running after {QUICK_TIMEOUT_S} s)"
            results.append((bench.script, state, time.monotonic() - started))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print("\n== summary")
    for name, state, seconds in results:
        print(f"{name:18} {seconds:7.1f} s  {state}")
    sys.exit(1 if any(state.startswith("failed") for _, state, _ in results) else 0)


if __name__ == "__main__":
    main()
