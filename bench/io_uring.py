"""The IO_URING layer's cost: fio's io_uring engine, 4 KiB random reads at queue depths 8 and 32
for --seconds each, plain and under `ioobserve record` (system-wide layers as a user gets them,
the job's own tree), configurations interleaved round by round; medians of fio's own IOPS.

The file is read from the page cache (warmed first), the worst case for an observer: no device
time hides the probes' cost. With --direct the same runs read through O_DIRECT from the disk
instead (the device's own rate, which the probes hardly touch). Under `record` each run also
gives its events and losses from the trace's summary.

  sudo .venv/bin/python bench/io_uring.py --rounds 5 --seconds 5
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import IOOBSERVE

FILE_SIZE = 256 << 20
DEPTHS = (8, 32)


def fio_command(data: Path, depth: int, seconds: float, direct: bool, report: Path) -> list[str]:
    """fio's io_uring random 4 KiB reads of `data` at `depth`, its JSON report to `report`."""
    return ["fio", "--name=bench", f"--filename={data}", f"--size={FILE_SIZE}", "--bs=4k", "--ioengine=io_uring",
            "--rw=randread", f"--iodepth={depth}", "--time_based", f"--runtime={seconds}", "--norandommap", "--invalidate=0",
            f"--direct={int(direct)}", "--output-format=json", f"--output={report}"]


def run(config: str, data: Path, depth: int, seconds: float, direct: bool, work: Path) -> dict:
    """One run of a configuration ("plain" or "record"): fio's IOPS, and under record the
    trace's events and losses."""
    report = work / "fio.json"
    command = fio_command(data, depth, seconds, direct, report)
    out: dict = {}
    if config == "record":
        traces = work / "trace"
        shutil.rmtree(traces, ignore_errors=True)
        traces.mkdir()
        done = subprocess.run([str(IOOBSERVE), "record", "--no-compact", "-o", str(traces), "--", *command],
                              capture_output=True, text=True, timeout=seconds * 10 + 120)
        if done.returncode != 0:
            raise SystemExit(f"record failed: {done.stderr[-2000:]}")
        events = re.search(r"^events\s+([\d,]+)", done.stdout, re.MULTILINE)
        lost = re.search(r"^lost\s+([\d,]+)", done.stdout, re.MULTILINE)
        out["events"] = int(events.group(1).replace(",", "")) if events else None
        out["lost"] = int(lost.group(1).replace(",", "")) if lost else None
    else:
        subprocess.run(command, check=True, capture_output=True, timeout=seconds * 10 + 60)
    job = json.loads(report.read_text())["jobs"][0]["read"]
    out["iops"] = job["iops"]
    out["ios"] = job["total_ios"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--direct", action="store_true", help="read with O_DIRECT from the disk, not the page cache")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root (record attaches probes)")
    if shutil.which("fio") is None:
        raise SystemExit("fio is missing: make setup installs it")
    with tempfile.TemporaryDirectory(dir="/var/tmp", prefix="ioobserve-bench-") as tmp:
        work = Path(tmp)
        data = work / "data"
        with data.open("wb") as out:
            for _ in range(FILE_SIZE >> 20):
                out.write(os.urandom(1 << 20))
        data.read_bytes()  # into the page cache
        results: dict[tuple[int, str], list[dict]] = {}
        for round_ in range(args.rounds):
            for depth in DEPTHS:
                order = ("plain", "record") if round_ % 2 == 0 else ("record", "plain")
                for config in order:
                    results.setdefault((depth, config), []).append(run(config, data, depth, args.seconds, args.direct, work))
            print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    source = "O_DIRECT from the disk" if args.direct else "the page cache"
    print(f"fio io_uring randread 4 KiB from {source}, {args.seconds:g} s runs, {args.rounds} rounds interleaved, medians")
    print(f"{'depth':>5}  {'plain IOPS':>11}  {'record IOPS':>11}  {'record/plain':>12}  {'events/run':>10}  {'lost':>5}")
    for depth in DEPTHS:
        plain = statistics.median(r["iops"] for r in results[(depth, "plain")])
        recorded = results[(depth, "record")]
        traced = statistics.median(r["iops"] for r in recorded)
        events = statistics.median(r["events"] or 0 for r in recorded)
        lost = max(r["lost"] or 0 for r in recorded)
        print(f"{depth:>5}  {plain:>11,.0f}  {traced:>11,.0f}  {traced / plain:>12.3f}  {events:>10,.0f}  {lost:>5}")


if __name__ == "__main__":
    main()
