"""Loading a real recorded trace, side by side with dftracer-utils' TraceViewer.

1. The trace and its index are copied into a fresh private directory (no Parquet copy yet).
2. ioobserve.load, first read: it builds the Parquet copy (a fresh process: wall time and
   peak RSS, per event loaded).
3. ioobserve.load with the copy: the faster of 2 fresh processes.
4. TraceViewer(...).collect(): the faster of 2, each with a fresh index directory.
5. ioobserve.scan asking for one pid (the busiest, then the least busy) and three columns:
   time, rows, and the bytes its read() calls took (/proc/self/io rchar) against the copy's size.

Usage (root not needed; record the trace first, e.g. two C pread loops under `record`):
  python bench/load.py --trace REAL.pfw.gz --dftracer-venv .venv-peers
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from harness import ROOT
from trace_io import _timed, _timed_once, load_traceviewer  # a sibling script

_LOAD = f"import sys; sys.path.insert(0, {str(ROOT)!r}); import ioobserve; print(ioobserve.load(sys.argv[1], progress=False).height)"
_SCAN = f"""
import json, sys; sys.path.insert(0, {str(ROOT)!r})
import polars as pl, ioobserve
from ioobserve.trace.read.columnar import copy_path
trace, which = sys.argv[1], sys.argv[2]
counts = ioobserve.scan(trace).group_by("pid").len().sort("len").collect()
pid = counts.item(-1 if which == "busiest" else 0, "pid")
def rchar():
    return int(next(line.split()[1] for line in open("/proc/self/io") if line.startswith("rchar")))
before = rchar()
rows = ioobserve.scan(trace).filter(pl.col("pid") == pid).select("ts", "op", "bytes").collect().height
print(json.dumps({{"pid": pid, "rows": rows, "read": rchar() - before, "copy": copy_path(trace).stat().st_size}}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", type=Path, required=True, help="a trace recorded by `ioobserve record`")
    parser.add_argument("--dftracer-venv", type=Path, help="a scratch venv with dftracer-utils")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ioobserve-load-"))  # 0700
    try:
        trace = work / args.trace.name
        shutil.copyfile(args.trace, trace)
        index = args.trace.with_name(args.trace.name + ".ioidx")
        if index.exists():
            shutil.copyfile(index, trace.with_name(trace.name + ".ioidx"))
        first = _timed_once([sys.executable, "-c", _LOAD, str(trace)])
        events = int(first["out"].split()[-1])
        rows = [("ioobserve.load, first (builds the copy)", first),
                ("ioobserve.load with the copy", _timed([sys.executable, "-c", _LOAD, str(trace)]))]
        if args.dftracer_venv:
            rows.append(("TraceViewer(...).collect()", load_traceviewer(trace, args.dftracer_venv, work / "tv-index")))
        print(f"{args.trace.name}: {events:,} events, {args.trace.stat().st_size:,} B")
        viewer = rows[-1][1]["seconds"] if args.dftracer_venv else None
        for name, r in rows:
            versus = f"  {viewer / r['seconds']:4.2f}x TraceViewer's speed" if viewer else ""
            state = "" if r["rc"] == 0 else f"  FAILED: {r['err'][-300:]}"
            print(f"{name:42} {r['seconds']:6.2f} s  {events / r['seconds'] / 1e6:6.2f} M events/s  "
                  f"peak {r['rss_mb']:6.0f} MB = {r['rss_mb'] * 2**20 / events:5.0f} B/event{versus}{state}")
        for which in ("busiest", "least busy"):
            scan = _timed_once([sys.executable, "-c", _SCAN, str(trace), which])
            found = json.loads(scan["out"].strip().splitlines()[-1])
            print(f"scan, the {which} pid ({found['rows']:,} rows) and 3 columns: {scan['seconds']:.2f} s, read "
                  f"{found['read']:,} B of the copy's {found['copy']:,} B ({found['read'] / found['copy']:.1%})")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
