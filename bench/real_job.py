"""Issue 25, light on real AI jobs: the reference PyTorch DataLoader job, plain and traced.

The job is bench/workloads/torch_loader.py (4 spawned workers importing torch, 2 epochs, 48
samples of 1 MiB), run plain, with `serve` running system-wide (aggregation only, its
syscall, block and cache layers; started before the job and stopped after it, so only the
job's own wall time counts), under `record` (default layers), under `record --py-stacks off`
and, with --dftracer-venv, under DFTracer 2.2.0's LD_PRELOAD (metadata on, every file:
DFTRACER_DATA_DIR=all, as trace_size.py runs it). Configurations interleaved round by round;
medians. Per run:

* wall: the job's own "seconds" (from making its DataLoader to its last batch, so the
  workers' start-up, each importing torch, is in it); ratios are to plain in the same run.
* start: from launching the command to the job's own start of that clock ("ended_at" minus
  "seconds"): interpreter start-up, `import torch` and the check of the samples, plus, for
  `record`, attaching the probes before the job runs. Plain's is the job's own part.
* tail: from the job's last line ("ended_at") to the command returning (trace_size.py's
  measure): plain's is torch's own teardown; `record`'s adds draining and closing the trace.
* events (I/O records and spans, trace_size.py's count) and bytes per event of the trace,
  after the background recompression, which every run waits for so that it does not slow
  the next one.

Cache: the samples are written once, in a directory under /var/tmp, by an untimed plain run
of the job before the first round, which also brings python and torch into the page cache;
before every run the samples are read whole again, so every configuration starts with the
data set and torch's files cached (the host has memory for both many times over).

  sudo .venv/bin/python bench/real_job.py --torch-python /var/tmp/torchvenv/bin/python --dftracer-venv .venv-peers

--torch-python is a scratch venv's python with `pip install torch==2.13.0` (the CPU wheel),
never the project's environment.
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

from harness import IOOBSERVE, dftracer_preload
from serve import Observer  # sibling scripts
from trace_size import TORCH_LOADER, _exit_lag, events_in

RECORD = {"record": [], "record --py-stacks off": ["--py-stacks", "off"]}  # config -> record's options


def job_command(python: Path, samples: Path, args) -> list[str]:
    """The torch job's command line."""
    return [str(python), str(TORCH_LOADER), "--dir", str(samples), "--samples", str(args.samples),
            "--workers", str(args.workers), "--epochs", str(args.epochs)]


def configure(config: str, job: list[str], out: Path, preload: Path | None) -> tuple[list[str], dict]:
    """The command line and environment of one configuration, its trace going to `out`."""
    env = dict(os.environ)
    if config in ("plain", "serve"):  # serve: the daemon runs beside the plain job
        return job, env
    if config in RECORD:
        return [str(IOOBSERVE), "record", "-o", str(out), *RECORD[config], "--", *job], env
    if config == "DFTracer":
        env.update(DFTRACER_ENABLE="1", DFTRACER_INIT="PRELOAD", DFTRACER_INC_METADATA="1", DFTRACER_DATA_DIR="all",
                   DFTRACER_LOG_FILE=str(out / "trace"), LD_PRELOAD=str(preload))
        return job, env
    raise ValueError(config)


def warm(samples: Path) -> None:
    """Read every sample whole, so each run starts with the data set in the page cache."""
    for path in samples.iterdir():
        path.read_bytes()


def trace_stats(out: Path) -> dict:
    """Events and bytes of the trace in `out`, once record's background finisher is done."""
    deadline = time.monotonic() + 600
    while list(out.glob("*.finishing")) and time.monotonic() < deadline:
        time.sleep(0.1)
    files = sorted(out.glob("*.pfw.gz"))
    if not files:
        return {}
    events, size = sum(events_in(f) for f in files), sum(f.stat().st_size for f in files)
    return {"events": events, "bytes": size}


def run_once(config: str, job: list[str], work: Path, preload: Path | None) -> dict:
    """One run: the job's wall time, start and tail, and the trace's size."""
    out = Path(tempfile.mkdtemp(dir=work, prefix="trace-"))
    try:
        argv, env = configure(config, job, out, preload)
        daemon = Observer("serve", out) if config == "serve" else None
        try:
            launched = time.time()
            done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800, check=False)
            returned = time.time()
        finally:
            if daemon is not None:
                daemon.stop()
        if done.returncode != 0:
            raise RuntimeError(f"{config} failed: {done.stderr[-800:]}")
        (own,) = [json.loads(line) for line in done.stdout.splitlines() if '"ended_at"' in line]  # the job's JSON line
        result = {"wall_s": own["seconds"], "start_s": own["ended_at"] - own["seconds"] - launched,
                  "tail_s": _exit_lag(done.stdout, returned)}
        return result | trace_stats(out)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def run(args, preload: Path | None) -> dict:
    """{config: [one run's results, ...]}, configurations interleaved round by round."""
    configs = ["plain", "serve", *RECORD] + (["DFTracer"] if preload else [])
    work = Path(tempfile.mkdtemp(prefix="ioobserve-realjob-", dir="/var/tmp"))
    samples = work / "samples"
    job = job_command(args.torch_python, samples, args)
    results: dict = {config: [] for config in configs}
    try:
        subprocess.run(job, check=True, capture_output=True)  # writes the samples, warms python and torch
        for _ in range(args.rounds):
            for config in configs:
                warm(samples)
                results[config].append(run_once(config, job, work, preload))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results


def med(runs: list[dict], key: str) -> float:
    """The median of one measure over runs."""
    return statistics.median(r[key] for r in runs)


def report(results: dict) -> str:
    """A markdown table of medians: wall, ratio to plain, start, tail, events, bytes per event."""
    plain = results["plain"]
    lines = ["| configuration | job wall s (median) | min-max | ratio to plain | start s (vs plain) | tail s (vs plain) "
             "| events | B/event |", "|---|---|---|---|---|---|---|---|"]
    for config, runs in results.items():
        walls = [r["wall_s"] for r in runs]
        start, tail = med(runs, "start_s"), med(runs, "tail_s")
        delta = config != "plain"
        start_text = f"{start:.2f}" + (f" (+{start - med(plain, 'start_s'):.2f})" if delta else "")
        tail_text = f"{tail:.2f}" + (f" (+{tail - med(plain, 'tail_s'):.2f})" if delta else "")
        sized = [r for r in runs if "events" in r]
        events = f"{med(sized, 'events'):,.0f}" if sized else "-"
        per_event = f"{statistics.median(r['bytes'] / r['events'] for r in sized):.2f}" if sized else "-"
        lines.append(f"| {config} | {statistics.median(walls):.2f} | {min(walls):.2f}-{max(walls):.2f} "
                     f"| {statistics.median(walls) / med(plain, 'wall_s'):.2f}x | {start_text} | {tail_text} | {events} | {per_event} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch-python", type=Path, default=Path("/var/tmp/torchvenv/bin/python"),
                        help="a scratch venv's python with torch")
    parser.add_argument("--dftracer-venv", type=Path, default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=48)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None, help="also write every run's results here")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/real_job.py: run as root (record attaches probes)")
    if not args.torch_python.exists():
        sys.exit(f"no {args.torch_python}: --torch-python is a venv's python with `pip install torch==2.13.0`")
    preload = dftracer_preload(args.dftracer_venv)
    if args.dftracer_venv is not None and preload is None:
        sys.exit(f"no libdftracer_preload.so in {args.dftracer_venv}")
    results = run(args, preload)
    print(report(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
