"""Overhead, baseline vs traced, alternating runs, medians: ioobserve, DFTracer, strace.

Targets: a C program doing N x pread(4 KiB) from the page cache (metric: ns per call, as the
program measures it) and the DataLoader-like workload with 4 spawned or 4 forked workers
(metric: the workload's own elapsed seconds). Configurations run interleaved, round by
round, so drift in this noisy VM hits all of them alike.

  sudo .venv/bin/python bench/overhead.py --rounds 5 [--dftracer-venv /tmp/peers-venv]

DFTracer (PyPI dftracer 2.2.0) runs only if --dftracer-venv points at a scratch venv where
it is installed; it is never installed into the project's environment.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import IOOBSERVE, PYTHON, ROOT, build, dftracer_preload


def targets(work: Path, calls: int) -> dict[str, tuple[list[str], str]]:
    """name -> (command, metric key in the program's JSON output)."""
    micro = build("microbench.c", work)
    loader = [str(PYTHON), str(ROOT / "tests" / "workloads" / "loader.py"), "--files", "32", "--workers", "4", "--threads", "0"]
    return {
        "pread microbench": ([str(micro), str(work / "micro.dat"), str(calls)], "ns_per_call"),
        "loader, 4 spawned workers": (loader + ["--start", "spawn", "--dir", str(work / "spawn")], "elapsed_s"),
        "loader, 4 forked workers": (loader + ["--start", "fork", "--dir", str(work / "fork")], "elapsed_s"),
    }


def wrap(config: str, command: list[str], work: Path, preload: Path | None) -> tuple[list[str], dict]:
    """The command line and environment for one configuration."""
    env = dict(os.environ)
    if config == "baseline":
        return command, env
    if config == "ioobserve":
        out = Path(tempfile.mkdtemp(dir=work, prefix="trace-"))
        return [str(IOOBSERVE), "record", "-o", str(out), "--", *command], env
    if config == "strace -f":
        return ["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=%file,%desc", *command], env
    if config == "DFTracer":
        out = Path(tempfile.mkdtemp(dir=work, prefix="dft-"))
        env.update(DFTRACER_ENABLE="1", DFTRACER_INIT="PRELOAD", DFTRACER_INC_METADATA="1",
                   DFTRACER_DATA_DIR=str(work), DFTRACER_LOG_FILE=str(out / "trace"), LD_PRELOAD=str(preload))
        return command, env
    raise ValueError(config)


def metric(stdout: str, key: str) -> float:
    """The workload's own measurement from its JSON output line."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("{") and f'"{key}"' in line:
            return float(json.loads(line)[key])
    raise RuntimeError(f"no {key} in output: {stdout[-500:]}")


def measure(argv: list[str], key: str, label: str, env: dict | None = None) -> float:
    """Run one configuration of a target to its end; the metric it reports. A short pause
    follows, so one run's tail does not slow the next."""
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1800, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{label} failed: {done.stderr[-800:]}")
    time.sleep(0.2)
    return metric(done.stdout, key)


def run(rounds: int, calls: int, dftracer_venv: Path | None, skip_strace: bool) -> dict:
    """Interleaved rounds; returns {target: {config: [metric, ...]}}."""
    work = Path(tempfile.mkdtemp(prefix="ioobserve-bench-"))
    preload = dftracer_preload(dftracer_venv)
    configs = ["baseline", "ioobserve"] + (["DFTracer"] if preload else []) + ([] if skip_strace else ["strace -f"])
    results: dict = {}
    try:
        for name, (command, key) in targets(work, calls).items():
            results[name] = {config: [] for config in configs}
            for _ in range(rounds):
                for config in configs:
                    argv, env = wrap(config, command, work, preload)
                    results[name][config].append(measure(argv, key, f"{config} / {name}", env))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results


def report(results: dict, calls: int) -> str:
    """A markdown table: medians, ranges and ratios to the baseline."""
    lines = ["| target | config | median | min-max | ratio to baseline |", "|---|---|---|---|---|"]
    for name, by_config in results.items():
        base = statistics.median(by_config["baseline"])
        for config, values in by_config.items():
            med = statistics.median(values)
            unit = "ns/call" if "microbench" in name else "s"
            extra = f" (+{med - base:.0f} ns/call)" if "microbench" in name and config != "baseline" else ""
            lines.append(f"| {name} | {config} | {med:.4g} {unit}{extra} | {min(values):.4g}-{max(values):.4g} | {med / base:.2f}x |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=1_000_000, help="preads in the microbench")
    parser.add_argument("--dftracer-venv", type=Path, default=None)
    parser.add_argument("--skip-strace", action="store_true", help="strace is very slow in some VMs")
    parser.add_argument("--json", type=Path, default=None, help="also write raw results here")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/overhead.py: run as root (the traced configuration attaches probes)")
    results = run(args.rounds, args.calls, args.dftracer_venv, args.skip_strace)
    print(report(results, args.calls))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
