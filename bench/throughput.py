"""Throughput: the highest event rate the collector drains with zero loss.

K generator processes (bench/flood.c) each issue N x pread(64 B) as fast as they can, under
`ioobserve record -- flood`. The generators time themselves; the trace's end record says how
many events arrived and how many were lost. Reported: events/s during the flood, losses,
and how long the recorder took to write everything out (the backlog it absorbed).

  sudo .venv/bin/python bench/throughput.py [--calls 2000000] [--procs 1 2]
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
from pathlib import Path

from harness import IOOBSERVE, build
from ioobserve.trace.read.reader import own_records


def flood_run(binary: Path, work: Path, procs: int, calls: int) -> dict:
    """One recorded flood; returns rates, counts and timings."""
    out = Path(tempfile.mkdtemp(dir=work, prefix="trace-"))
    started = time.monotonic()
    done = subprocess.run([str(IOOBSERVE), "record", "-o", str(out), "--", str(binary), str(work / "flood.dat"), str(procs), str(calls)],
                          capture_output=True, text=True, timeout=1800)
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-800:])
    flood = json.loads(next(line for line in done.stdout.splitlines() if line.startswith('{"events"')))
    (end,) = own_records(next(out.glob("*.pfw.gz")), "end")
    size = sum(p.stat().st_size for p in out.glob("*.pfw.gz"))
    return {
        "procs": procs, "issued": flood["events"], "flood_s": flood["seconds"], "rate": flood["events"] / flood["seconds"],
        "recorded": end["args"]["num_events"], "lost": end["args"]["lost_total"], "recorder_s": elapsed,
        "bytes_per_event": size / max(end["args"]["num_events"], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2_000_000, help="preads per generator process")
    parser.add_argument("--procs", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/throughput.py: run as root")
    work = Path(tempfile.mkdtemp(prefix="ioobserve-flood-"))
    try:
        binary = build("flood.c", work)
        print("| generators | events issued | flood rate (events/s) | recorded | lost | recorder wall s | gz bytes/event |")
        print("|---|---|---|---|---|---|---|")
        for procs in args.procs:
            r = flood_run(binary, work, procs, args.calls)
            print(f"| {r['procs']} | {r['issued']:,} | {r['rate']:,.0f} | {r['recorded']:,} | {r['lost']:,} | "
                  f"{r['recorder_s']:.1f} | {r['bytes_per_event']:.1f} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
