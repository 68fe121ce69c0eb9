"""Trace writing and loading, side by side with dftracer-utils.

1. Writer: events of a recorded DataLoader-like trace, repeated with shifted times up to
   --events, are fed to TraceWriter in 64 Ki batches; reports events/s formatted, compressed
   and written, and how long the feeding side ever waited.
2. Load, each in its own process (peak memory = that process's max RSS): ioobserve.load;
   dftracer-utils' TraceViewer(...).collect(); dftracer_view --group-by name (its index
   build timed separately, then the query on the built index). Each load runs twice and
   the faster run counts: in a fresh VM the first touch of memory costs more than the work.

Usage (root not needed):
  python bench/trace_io.py --source TRACE.pfw.gz --events 8000000 --dftracer-venv /tmp/peers-venv
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

import harness  # first: it puts this checkout (its ioobserve, its tests/) on sys.path
import ioobserve
from ioobserve.data import schema as s
from ioobserve.data.model import Process
from ioobserve.trace.write.writer import TraceWriter
from tests.batches import Batches  # a loaded trace's frames, handed over as the collector does

BATCH = 65536


def write_trace(source: Path, events: int, out_dir: Path) -> tuple[Path, dict]:
    """Write `events` events through TraceWriter; returns the trace and the writer's figures."""
    base = ioobserve.load(source)
    span = int(base[s.TS].max() - base[s.TS].min()) + 1_000_000
    writer = TraceWriter(out_dir, "bench.pfw.gz", {"command": ["bench"]})
    pids = base[s.PID].unique().to_list()
    writer.processes([Process(pid=p, ppid=1, comm="python3", exe="/usr/bin/python3", cmdline=("python3",)) for p in pids])
    written, copy, feed_wait, batches = 0, 0, 0.0, Batches()
    start = time.perf_counter()
    while written < events:
        shifted = base.with_columns(pl.col(s.TS) + copy * span)
        for offset in range(0, shifted.height, BATCH):
            batch = shifted.slice(offset, min(BATCH, events - written))
            if not batch.height:
                break
            handed = batches(batch)  # off the clock: the collector makes the tables, not the writer
            t = time.perf_counter()
            writer.events(*handed)
            feed_wait += time.perf_counter() - t
            written += batch.height
        copy += 1
    writer.close()
    seconds = time.perf_counter() - start
    return writer.path, {"events": written, "seconds": seconds, "events_per_s": written / seconds,
                         "feed_seconds": feed_wait, "bytes": writer.path.stat().st_size}


def _timed(argv: list[str], runs: int = 2) -> dict:
    """Run a command `runs` times; the fastest run's wall time, and the child's peak RSS."""
    results = [_timed_once(argv) for _ in range(runs)]
    return min(results, key=lambda r: (r["rc"] != 0, r["seconds"]))


def _timed_once(argv: list[str]) -> dict:
    wrapper = ("import resource, subprocess, sys, time, json; t = time.perf_counter();"
               "r = subprocess.run(sys.argv[1:], capture_output=True, text=True);"
               "print(json.dumps({'rc': r.returncode, 'seconds': time.perf_counter() - t,"
               "'rss_mb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,"
               "'out': r.stdout[-2000:], 'err': r.stderr[-2000:]}))")
    done = subprocess.run([sys.executable, "-c", wrapper, *argv], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def load_ioobserve(trace: Path) -> dict:
    code = f"import sys; sys.path.insert(0, {str(harness.ROOT)!r}); import ioobserve; print(ioobserve.load({str(trace)!r}, progress=False).height)"
    result = _timed([sys.executable, "-c", code])
    result["rows"] = int(result["out"].split()[-1]) if result["rc"] == 0 else None
    return result


def load_traceviewer(trace: Path, venv: Path, index_dir: Path) -> dict:
    # A fresh index directory per run, so that no run finds an index an earlier one built.
    code = ("import tempfile; from dftracer.utils import TraceViewer; "
            f"d = tempfile.mkdtemp(dir={str(index_dir.parent)!r}); print(len(TraceViewer([{str(trace)!r}], d).collect()))")
    result = _timed([str(venv / "bin" / "python"), "-c", code])
    result["rows"] = int(result["out"].split()[-1]) if result["rc"] == 0 else None
    return result


def dftracer_view(trace: Path, venv: Path, index_dir: Path) -> tuple[dict, dict]:
    view = str(venv / "bin" / "dftracer_view")
    common = ["--files", str(trace), "--index-dir", str(index_dir), "--log-level", "off"]
    build = _timed([view, *common, "--group-by", "name", "--limit", "1"], runs=1)  # a second run would find it built
    query = _timed([view, *common, "--group-by", "name"])
    return build, query


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, required=True, help="an ioobserve trace to repeat")
    parser.add_argument("--events", type=int, default=8_000_000)
    parser.add_argument("--dftracer-venv", type=Path, help="a scratch venv with dftracer-utils")
    parser.add_argument("--keep", type=Path, help="write the trace here and keep it")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ioobserve-bench-"))
    out_dir = args.keep or work
    try:
        trace, writer = write_trace(args.source, args.events, out_dir)
        n = writer["events"]
        print(f"writer: {n:,} events in {writer['seconds']:.1f} s = {writer['events_per_s'] / 1e6:.2f} M events/s; "
              f"feeding side busy {writer['feed_seconds']:.2f} s; {writer['bytes'] / n:.2f} B/event on disk")
        rows = [("ioobserve.load", load_ioobserve(trace))]
        if args.dftracer_venv:
            rows.append(("TraceViewer(...).collect()", load_traceviewer(trace, args.dftracer_venv, work / "tv-index")))
            build, query = dftracer_view(trace, args.dftracer_venv, work / "view-index")
            rows += [("dftracer_view index build", build), ("dftracer_view --group-by name", query)]
        base = rows[0][1]["seconds"]
        for name, r in rows:
            state = "" if r["rc"] == 0 else f"  FAILED rc={r['rc']}: {r['err'][-300:]}"
            print(f"{name:32} {r['seconds']:7.2f} s  {n / r['seconds'] / 1e6:5.2f} M events/s  "
                  f"peak {r['rss_mb']:7.0f} MB  ({r['seconds'] / base:4.2f}x ioobserve){state}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
