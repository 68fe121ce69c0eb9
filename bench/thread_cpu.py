"""Where the recorder's CPU goes on a real job, by thread: `ioobserve record -- COMMAND`, its
process tree's threads sampled from /proc every 50 ms until it exits (their last figures
kept: a thread's CPU is counted up to its last sample), summed by thread name (Polars' pool
as one, the job's own processes left out: only the recorder's and its helpers'), in all and
while the job ran (its first sample to its last). The finisher runs as `record` would run
it, after, and is counted apart. Without a command: the bundled loader (4 spawned workers).

  sudo .venv/bin/python bench/thread_cpu.py [--record-options "--py-stacks off"] -- \
      /var/tmp/torchvenv/bin/python bench/workloads/torch_loader.py --dir /var/tmp/tsamples
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from harness import IOOBSERVE, ROOT, cmdline, cpu_of, stat, tree
from ioobserve.trace.read.reader import own_records
from recorder_cpu import finisher_cpu  # a sibling script


def task_cpu(pid: int | str) -> dict[int, tuple[str, float]]:
    """Each thread of process `pid` ("self" for this one): tid -> (name, CPU seconds so far)."""
    found = {}
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found  # ended meanwhile
    for task in tasks:
        try:
            name, fields = stat(pid, task)
        except OSError:
            continue
        found[int(task)] = (name, cpu_of(fields))
    return found


def _sample(root: int, job_pids: set[int], seen: dict[tuple[int, int], tuple[str, float]]) -> None:
    """Each recorder thread's CPU seconds now, by (pid, tid)."""
    for pid in tree(root):
        if pid not in job_pids:
            seen.update(((pid, tid), value) for tid, value in task_cpu(pid).items())


def _job_pids(root: int) -> set[int]:
    """The recorded command's processes: the recorder's children that are not its own."""
    job = set()
    for pid in tree(root):
        try:
            args = cmdline(pid)
        except OSError:
            continue
        if pid != root and not any("ioobserve" in arg for arg in args):
            job.add(pid)
    return job


def measure(command: list[str], options: list[str]) -> dict:
    """Recorder CPU seconds by thread name on one recorded run of `command`."""
    work = Path(tempfile.mkdtemp(prefix="thread-cpu-"))
    recorder = subprocess.Popen([str(IOOBSERVE), "record", "--no-compact", "-o", str(work), *options, "--", *command],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen: dict[tuple[int, int], tuple[str, float]] = {}
    job: set[int] = set()
    at_start = at_end = None  # the samples when the job was first seen, and last seen running
    while recorder.poll() is None:
        running = _job_pids(recorder.pid)
        job |= running
        _sample(recorder.pid, job, seen)
        if running and at_start is None:
            at_start = dict(seen)
        if running:
            at_end = dict(seen)
        time.sleep(0.05)
    by_name, during = _by_name(seen), _by_name(at_end or {}, at_start or {})
    trace = next(work.glob("*.pfw.gz"))
    (end,) = own_records(trace, "end")
    events = end["args"]["num_events"]
    finish = finisher_cpu(trace, False, ROOT)
    shutil.rmtree(work, ignore_errors=True)
    return {"threads": by_name, "total_s": round(sum(by_name.values()), 2), "while_the_job_ran": during,
            "while_the_job_ran_s": round(sum(during.values()), 2), "events": events, "finisher_s": round(finish, 2)}


def _by_name(seen: dict, before: dict | None = None) -> dict[str, float]:
    """CPU seconds by thread name (less what `before` had), most first."""
    by_name: dict[str, float] = defaultdict(float)
    for key, (name, cpu) in seen.items():
        by_name["polars pool" if name.startswith("polars") else name] += cpu - (before or {}).get(key, (name, 0.0))[1]
    return {name: round(cpu, 2) for name, cpu in sorted(by_name.items(), key=lambda item: -item[1]) if cpu >= 0.005}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--record-options", default="", help="more `record` options, as one string")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    with tempfile.TemporaryDirectory() as scratch:
        command = command or [sys.executable, str(ROOT / "tests" / "workloads" / "loader.py"), "--dir", scratch,
                              "--files", "32", "--workers", "4", "--start", "spawn"]
        print(json.dumps(measure(command, args.record_options.split()), indent=1))


if __name__ == "__main__":
    main()
