"""The recorder's own CPU per event, and whether it keeps up, at paced event rates.

`ioobserve record --comm flood` runs system-wide (the filter in the kernel) while bench/flood.c
issues pread(64 B) from K processes, paced to each `--rates` value for `--seconds`. Per run:
the recorder's CPU (its process tree: main, capture process, disk process; user + system,
from the moment it says it is recording to its exit) per event recorded; the finisher's CPU
per event (the Parquet copy, and recompression where the writer hurried: the end record's
`writer_hurried_members`), run here as the bench's child after `record --no-compact`; the
writer's lag (the end record's `writer_lag_max_us`: how long after its call an event reached
the writer, at worst); the tail (the flood's end to `record` returning); loss; the trace's
bytes per event; and the recorder's peak memory (its tree's Pss, sampled every 50 ms, and
each process's own peak). Rates at which the recorder kept up (no loss, lag <= 1 s) are sustained.

  sudo .venv/bin/python bench/recorder_cpu.py [--rates 100000 300000 1000000] [--seconds 10]
      [--writer-threads 1 2] [--procs 2]
  sudo .venv/bin/python bench/recorder_cpu.py --rates 0 --calls 3000000   # issue 46's flood, unpaced
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import ROOT, PeakMemory, build, start_record, tree_cpu
from ioobserve.trace.read.reader import own_records


def finisher_cpu(trace: Path, recompress: bool, checkout: Path) -> float:
    """CPU seconds of finishing a trace as `record` would in the background (the bench runs
    `record --no-compact` and the finisher itself, as its child, to count its CPU exactly)."""
    command = [sys.executable, "-m", "ioobserve.cli.finisher", *(["--recompress"] if recompress else []), str(trace)]
    started = os.times()
    subprocess.run(command, cwd=checkout, env=_environment(checkout), check=True)
    ended = os.times()
    return (ended.children_user - started.children_user) + (ended.children_system - started.children_system)


def _environment(checkout: Path) -> dict[str, str]:
    """The environment running `checkout`'s code with this venv (another commit, to compare)."""
    return {**os.environ, "PYTHONPATH": str(checkout)} if checkout != ROOT else dict(os.environ)


def run(binary: Path, work: Path, procs: int, rate: int, seconds: float, writer_threads: int | None,
        checkout: Path = ROOT, unpaced_calls: int = 0) -> dict:
    """One recorded flood, paced to `rate` (0: `unpaced_calls` per process, as fast as they go)."""
    out = Path(tempfile.mkdtemp(dir=work, prefix="trace-"))
    options = ["--comm", "flood", "--no-compact", "-o", str(out)]
    if writer_threads:
        options += ["--writer-threads", str(writer_threads)]
    recorder, _ = start_record(options, stdout=subprocess.DEVNULL, env=_environment(checkout))
    start_cpu = tree_cpu(recorder.pid)
    memory = PeakMemory(recorder.pid)
    calls = int(rate * seconds / procs) if rate else unpaced_calls
    flood = subprocess.run([str(binary), str(work / "flood.dat"), str(procs), str(calls), str(rate)],
                           capture_output=True, text=True, check=True)
    flood_end = time.monotonic()
    recorder.send_signal(signal.SIGINT)
    recorder.stderr.read()
    _, status, usage = os.wait4(recorder.pid, 0)
    tail = time.monotonic() - flood_end
    memory.stop()
    if status:
        raise RuntimeError(f"record exited with status {status}")
    cpu = usage.ru_utime + usage.ru_stime - start_cpu
    traces = sorted(out.glob("*.pfw.gz"))
    (end,) = own_records(traces[0], "end")
    hurried = end["args"].get("counters", {}).get("writer_hurried_members", 0) > 0
    finish = sum(finisher_cpu(trace, hurried, checkout) for trace in traces)
    events = end["args"]["num_events"]
    counters = end["args"].get("counters", {})
    size = sum(p.stat().st_size for p in traces)  # after the finisher: recompressed where it was hurried
    shutil.rmtree(out, ignore_errors=True)
    issued = procs * calls
    return {"rate": rate, "threads": writer_threads or "default", "issued": issued, "flood_s": float(flood.stdout.split('"seconds": ')[1].split(",")[0]),
            "events": events, "lost": end["args"]["lost_total"], "cpu_us": cpu / max(events, 1) * 1e6,
            "finisher_us": finish / max(events, 1) * 1e6, "lag_s": counters.get("writer_lag_max_us", 0) / 1e6,
            "tail_s": tail, "bytes": size / max(events, 1), "peak_mb": memory.peak_bytes / 2**20,
            "peaks_mb": {name: round(size / 2**20) for name, size in sorted(memory.by_name.items())}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=int, nargs="+", default=[100_000, 300_000, 1_000_000],
                        help="events/s in all; 0: unpaced, --calls per process (issue 46's flood: --rates 0 --calls 3000000)")
    parser.add_argument("--calls", type=int, default=3_000_000, help="calls per process of an unpaced flood (rate 0)")
    parser.add_argument("--seconds", type=float, default=10.0, help="flood length per run")
    parser.add_argument("--procs", type=int, default=2, help="flood processes")
    parser.add_argument("--writer-threads", type=int, nargs="+", default=[0], help="record --writer-threads values (0: the default)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--checkout", type=Path, default=ROOT,
                        help="run another checkout's ioobserve (a worktree of an older commit) with this venv, to compare")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/recorder_cpu.py: run as root")
    work = Path(tempfile.mkdtemp(prefix="ioobserve-recorder-cpu-", dir="/var/tmp"))
    try:
        binary = build("flood.c", work)
        print("| rate asked (ev/s) | writer threads | flood rate | events | lost | recorder CPU µs/event | finisher CPU µs/event"
              " | writer lag max s | tail s | trace B/event | peak memory MB (Pss) | by process | kept up |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for _ in range(args.rounds):
            for rate in args.rates:
                for threads in args.writer_threads:
                    r = run(binary, work, args.procs, rate, args.seconds, threads or None, args.checkout.resolve(), args.calls)
                    kept_up = r["lost"] == 0 and r["lag_s"] <= 1.0
                    print(f"| {f'{rate:,}' if rate else 'unpaced'} | {r['threads']} | {r['issued'] / r['flood_s']:,.0f} | {r['events']:,} | {r['lost']:,} | "
                          f"{r['cpu_us']:.2f} | {r['finisher_us']:.2f} | {r['lag_s']:.2f} | {r['tail_s']:.2f} | {r['bytes']:.1f} | "
                          f"{r['peak_mb']:.0f} | {', '.join(f'{name} {mb}' for name, mb in r['peaks_mb'].items())} | "
                          f"{'yes' if kept_up else 'no'} |", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
