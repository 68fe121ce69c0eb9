"""`ioobserve analyze` and `ioobserve report` on a big trace, beside DFTracer's analyzer.

The trace: a recorded one's events repeated with shifted times up to --events (as
trace_io.py writes it), or --trace to use one as it is. Each tool runs in its own process
tree; wall time, events per second and the peak RSS of the whole tree (sampled every 50 ms:
Dask's workers are processes of their own) are reported. Each runs cold (on a fresh copy of
the trace: we build our Parquet copy, dfanalyzer its index) then warm (again, with them).

DFTracer's analyzer (PyPI dftracer-analyzer 0.0.9, which needs dftracer-utils 0.0.12; later
dftracer-utils releases dropped functions it imports) lives in its own venv:
  python3 -m venv /tmp/dfa-venv && /tmp/dfa-venv/bin/pip install dftracer-analyzer==0.0.9 dftracer-utils==0.0.12
It runs with one Dask worker (with two or more, 0.0.9 loses whole processes here), with its
POSIX layer widened to our SYSCALL events.

Usage (root not needed):
  python bench/analysis.py --source demo-traces/SOME.pfw.gz --events 10000000 --dfanalyzer-venv /tmp/dfa-venv
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from harness import IOOBSERVE, PYTHON, ROOT, tree_rss
from trace_io import write_trace  # a sibling script

WIDEN_POSIX = "analyzer.preset.layer_defs.posix='cat.str.contains(\"posix|stdio|syscall\", case=False)'"


def run(argv: list[str], env: dict | None = None) -> dict:
    """Run a command to its end: wall seconds, peak tree RSS, exit code, the end of its output."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    peak, done = [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], tree_rss(proc.pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    return {"rc": proc.returncode, "seconds": seconds, "peak_mb": peak[0] / 2**20, "out": out[-3000:], "err": err[-3000:]}


def fresh_copy(trace: Path, directory: Path) -> Path:
    """The trace (and its index) alone in a new private directory: no copy, no peer's index."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(mode=0o700, parents=True)
    for source in (trace, trace.with_name(trace.name + ".ioidx")):
        if source.exists():
            shutil.copy(source, directory / source.name)
    return directory / trace.name


def dfanalyzer(trace_dir: Path, venv: Path, scratch: Path) -> dict:
    """DFTracer's analyzer on the traces of `trace_dir`, one Dask worker (the first run there
    builds its index beside the trace: cold; a later one finds it: warm)."""
    env = {**os.environ, "USER": os.environ.get("USER", "root")}
    shutil.rmtree(scratch / "dfa-run", ignore_errors=True)
    return run([str(venv / "bin" / "dfanalyzer"), f"trace_path={trace_dir}", f"hydra.run.dir={scratch / 'dfa-run'}",
                "cluster.n_workers=1", f"cluster.local_directory={scratch / 'dfa-dask'}", "analyzer.checkpoint=false",
                WIDEN_POSIX], env=env)


def count_events(trace: Path) -> int:
    """Events in the trace (from its index)."""
    code = ("import sys; from ioobserve.trace.members import read_index; "
            "print(sum(e.events for e in read_index(__import__('pathlib').Path(sys.argv[1])) or []))")
    done = subprocess.run([str(PYTHON), "-c", code, str(trace)], capture_output=True, text=True,
                          check=True, cwd=ROOT)
    return int(done.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, help="a recorded trace whose events are repeated up to --events")
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--trace", type=Path, help="use this trace as it is (instead of --source)")
    parser.add_argument("--dfanalyzer-venv", type=Path, help="a venv with dftracer-analyzer 0.0.9")
    parser.add_argument("--memory", type=int, default=None, help="ioobserve's --memory (MiB; default: its own)")
    parser.add_argument("--scratch", type=Path, help="where to work (default: a new directory under /tmp); removed after")
    args = parser.parse_args()
    if not (args.trace or args.source):
        parser.error("give --source or --trace")
    if args.scratch and not args.scratch.is_dir():
        parser.error(f"--scratch {args.scratch}: no such directory (create it, or leave it out for one under /tmp)")
    scratch = Path(tempfile.mkdtemp(prefix="ioobserve-bench-analysis-", dir=args.scratch))
    memory = ["--memory", str(args.memory)] if args.memory else []
    try:
        trace = args.trace or write_trace(args.source, args.events, scratch)[0]
        events = count_events(trace)
        print(f"trace: {trace} ({trace.stat().st_size / 2**20:.0f} MiB, {events:,} events)")
        ours = fresh_copy(trace, scratch / "ours")
        rows = [("ioobserve analyze --json, cold", run([str(IOOBSERVE), "analyze", str(ours), "--json", *memory])),
                ("ioobserve analyze --json, warm", run([str(IOOBSERVE), "analyze", str(ours), "--json", *memory])),
                ("ioobserve report, warm", run([str(IOOBSERVE), "report", str(ours), "-o", str(scratch / "report.html"),
                                                "--force", *memory]))]
        if args.dfanalyzer_venv:
            theirs = fresh_copy(trace, scratch / "dfa-traces").parent
            rows.append(("DFTracer dfanalyzer (1 worker), cold", dfanalyzer(theirs, args.dfanalyzer_venv, scratch)))
            rows.append(("DFTracer dfanalyzer (1 worker), warm", dfanalyzer(theirs, args.dfanalyzer_venv, scratch)))
        print(f"{'':38} {'time':>9} {'events/s':>11} {'peak RSS':>10}")
        for name, r in rows:
            state = "" if r["rc"] == 0 else f"  FAILED rc={r['rc']}: {r['err'][-300:]}"
            print(f"{name:38} {r['seconds']:7.1f} s {events / r['seconds'] / 1e6:7.2f} M/s {r['peak_mb']:7.0f} MB{state}")
        if args.dfanalyzer_venv:
            for state, ours_row, theirs_row in (("cold", rows[0], rows[3]), ("warm", rows[1], rows[4])):
                print(f"{state}: ioobserve {theirs_row[1]['seconds'] / ours_row[1]['seconds']:.2f}x dfanalyzer's events/s, "
                      f"{ours_row[1]['peak_mb'] / theirs_row[1]['peak_mb']:.2f}x its peak RSS")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
