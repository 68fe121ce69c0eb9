"""Issues 25 and 59, light on real AI jobs: the reference PyTorch DataLoader job, plain and
traced, and where the tracing's cost is paid.

The job is bench/workloads/torch_loader.py (4 spawned workers importing torch, 2 epochs, 48
samples of 1 MiB), run plain, with `serve` running system-wide (aggregation only, its
syscall, block and cache layers; started before the job and stopped after it, so only the
job's own wall time counts), under `record` (default layers: Python stacks but for calls
inside imports), `record --py-stacks all` (every call walked), `record --py-stacks off`
and, with --dftracer-venv, under DFTracer 2.2.0's LD_PRELOAD (metadata on, every file:
DFTRACER_DATA_DIR=all, as trace_size.py runs it). Then plain, record and DFTracer once more
"pinned": the job on core 0 (`taskset -c 0`) and the recorder on core 1, as on a node with a
core to spare. Configurations interleaved round by round; medians. Per run:

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
* record only: bpf, the probes' own run time in the kernel (record --probe-stats: the
  kernel's BPF stats, which add a few tens of ns per probe run), taken from the job's
  threads; rec CPU, the recorder's own CPU seconds (its processes less the job's, sampled
  every 100 ms) before the job's first process (loading and attaching the probes), while the
  job ran, and after it: to the end of `record` and its background finisher.

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

from harness import IOOBSERVE, cmdline, cpu_seconds, dftracer_preload, tree
from ioobserve.trace.read.reader import own_records
from serve import Observer  # sibling scripts
from trace_size import TORCH_LOADER, _exit_lag, events_in

# config -> record's options
RECORD = {"record": [], "record --py-stacks all": ["--py-stacks", "all"], "record --py-stacks off": ["--py-stacks", "off"]}
PINNED = " (pinned)"  # the job on core 0, a recorder on core 1
PINNED_CONFIGS = ["plain", "record", "DFTracer"]
JOB_CORE, RECORDER_CORE = "0", "1"
SAMPLE_S = 0.1  # often enough to catch each process near its end, seldom enough to cost the job little


def job_command(python: Path, samples: Path, args) -> list[str]:
    """The torch job's command line."""
    return [str(python), str(TORCH_LOADER), "--dir", str(samples), "--samples", str(args.samples),
            "--workers", str(args.workers), "--epochs", str(args.epochs)]


def configure(config: str, job: list[str], out: Path, preload: Path | None) -> tuple[list[str], dict]:
    """The command line and environment of one configuration, its trace going to `out`."""
    env = dict(os.environ)
    if config.endswith(PINNED):
        config = config.removesuffix(PINNED)
        job = ["taskset", "-c", JOB_CORE, *job]
        if config in RECORD:
            return ["taskset", "-c", RECORDER_CORE, *configure(config, job, out, preload)[0]], env
    if config in ("plain", "serve"):  # serve: the daemon runs beside the plain job
        return job, env
    if config in RECORD:
        return [str(IOOBSERVE), "record", "--probe-stats", "-o", str(out), *RECORD[config], "--", *job], env
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
    """Events and bytes of the trace in `out` (record's background finisher is done), and
    the probes' run time from its end record's counters."""
    files = sorted(out.glob("*.pfw.gz"))
    if not files:
        return {}
    events, size = sum(events_in(f) for f in files), sum(f.stat().st_size for f in files)
    counters = [record["args"].get("counters", {}) for f in files for record in own_records(f, "end")]
    bpf_ns = sum(c.get("probe_run_ns", 0) for c in counters)
    return {"events": events, "bytes": size} | ({"bpf_s": bpf_ns / 1e9} if bpf_ns else {})


class RecorderCpu:
    """The CPU seconds of a recorder's own processes (its process tree less the job's, then
    its background finisher), each process counted up to its last sample."""

    def __init__(self, out: Path):
        self.out = out
        self.job: set[int] = set()
        self.seen: dict[int, float] = {}  # pid -> CPU seconds at its last sample
        self.job_started: float | None = None  # the total when the job was first seen
        self.job_ended: float | None = None  # ... last seen running

    def sample(self, root: int) -> None:
        """One sample of the tree under `root` (the recorder)."""
        running = False
        for pid in tree(root):
            try:
                mine = pid == root or any("ioobserve" in arg for arg in cmdline(pid))
                if not mine:
                    self.job.add(pid)
                if pid in self.job:
                    running = True
                else:
                    self.seen[pid] = cpu_seconds(pid)
            except OSError:
                continue  # ended meanwhile
        if running:
            self.job_ended = self.total()
            if self.job_started is None:
                self.job_started = self.job_ended
        else:
            self._finishers()

    def _finishers(self) -> None:
        """The background finisher of this recording (its own session: not in the tree)."""
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    args = cmdline(int(entry.name))
                    if "ioobserve.cli.finisher" in args and any(str(self.out) in arg for arg in args):
                        self.seen[int(entry.name)] = cpu_seconds(entry.name)
                except OSError:
                    continue

    def wait_for_finisher(self, deadline_s: float = 600) -> None:
        """Sample until the trace's finisher is done (no *.finishing left)."""
        deadline = time.monotonic() + deadline_s
        while list(self.out.glob("*.finishing")) and time.monotonic() < deadline:
            self._finishers()
            time.sleep(SAMPLE_S)

    def total(self) -> float:
        """CPU seconds of every recorder process so far."""
        return sum(self.seen.values())


def run_once(config: str, job: list[str], work: Path, preload: Path | None) -> dict:
    """One run: the job's wall time, start and tail, the trace's size and, for record, the
    probes' run time and the recorder's CPU."""
    out = Path(tempfile.mkdtemp(dir=work, prefix="trace-"))
    try:
        argv, env = configure(config, job, out, preload)
        daemon = Observer("serve", out) if config == "serve" else None
        recording = config.removesuffix(PINNED) in RECORD
        cpu = RecorderCpu(out)
        try:
            launched = time.time()
            process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if recording:
                while process.poll() is None:
                    cpu.sample(process.pid)
                    time.sleep(SAMPLE_S)
            stdout, stderr = process.communicate(timeout=1800)
            returned = time.time()
        finally:
            if daemon is not None:
                daemon.stop()
        if process.returncode != 0:
            raise RuntimeError(f"{config} failed: {stderr[-800:]}")
        cpu.wait_for_finisher()
        (own,) = [json.loads(line) for line in stdout.splitlines() if '"ended_at"' in line]  # the job's JSON line
        result = {"wall_s": own["seconds"], "start_s": own["ended_at"] - own["seconds"] - launched,
                  "tail_s": _exit_lag(stdout, returned)}
        if recording and cpu.job_started is not None:
            result |= {"cpu_before_s": cpu.job_started, "cpu_during_s": cpu.job_ended - cpu.job_started,
                       "cpu_after_s": cpu.total() - cpu.job_ended}
        return result | trace_stats(out)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def run(args, preload: Path | None) -> dict:
    """{config: [one run's results, ...]}, configurations interleaved round by round."""
    configs = ["plain", "serve", *RECORD] + (["DFTracer"] if preload else [])
    configs += [config + PINNED for config in PINNED_CONFIGS if config in configs]
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
    """A markdown table of medians: wall, ratio to plain (pinned runs: to plain pinned), start,
    tail, events, bytes per event, the probes' time and the recorder's CPU."""
    lines = ["| configuration | job wall s (median) | min-max | ratio to plain | start s (vs plain) | tail s (vs plain) "
             "| events | B/event | bpf s | rec CPU s before + during + after the job |", "|---|---|---|---|---|---|---|---|---|---|"]
    for config, runs in results.items():
        plain = results["plain" + (PINNED if config.endswith(PINNED) else "")]
        walls = [r["wall_s"] for r in runs]
        start, tail = med(runs, "start_s"), med(runs, "tail_s")
        delta = config.removesuffix(PINNED) != "plain"
        start_text = f"{start:.2f}" + (f" (+{start - med(plain, 'start_s'):.2f})" if delta else "")
        tail_text = f"{tail:.2f}" + (f" (+{tail - med(plain, 'tail_s'):.2f})" if delta else "")
        sized = [r for r in runs if "events" in r]
        events = f"{med(sized, 'events'):,.0f}" if sized else "-"
        per_event = f"{statistics.median(r['bytes'] / r['events'] for r in sized):.2f}" if sized else "-"
        bpf = f"{med(timed, 'bpf_s'):.2f}" if (timed := [r for r in runs if "bpf_s" in r]) else "-"
        cpu = ([r for r in runs if "cpu_during_s" in r])
        cpu_text = (f"{med(cpu, 'cpu_before_s'):.2f} + {med(cpu, 'cpu_during_s'):.2f} + {med(cpu, 'cpu_after_s'):.2f}"
                    if cpu else "-")
        lines.append(f"| {config} | {statistics.median(walls):.2f} | {min(walls):.2f}-{max(walls):.2f} "
                     f"| {statistics.median(walls) / med(plain, 'wall_s'):.2f}x | {start_text} | {tail_text} | {events} "
                     f"| {per_event} | {bpf} | {cpu_text} |")
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
