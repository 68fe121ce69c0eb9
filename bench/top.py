"""`ioobserve top` under load: observer CPU and input latency at given event rates, with a
parallel --record that must lose nothing.

For each rate, the real app runs in a tmux pane (100x30) filtered to the generator
(`--comm flood`); bench/flood.c issues pread(64 B) paced to the rate for --seconds, from
--processes processes (the dynamic loader's 2 pread64 calls at its start come on top). Meanwhile
`s` is pressed every second and the pane is polled until the title shows the new sort order:
key-to-screen latency. CPU is the top process's user+system time over the flood, as a share
of one core. After `q`, the trace is read back: events and losses.

Usage (root): sudo .venv/bin/python bench/top.py --rates 10000 100000 200000 --seconds 10
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import IOOBSERVE, build, cpu_seconds

SESSION = "ioobserve-bench-top"
SORTS = ("bandwidth", "iops", "latency")


def _pane() -> str:
    return subprocess.run(["tmux", "capture-pane", "-p", "-t", SESSION], capture_output=True, text=True, check=False).stdout


def _wait_for(text: str, timeout: float) -> float | None:
    """Seconds until the pane shows `text` (polled every 2 ms), or None."""
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if text in _pane():
            return time.perf_counter() - start
        time.sleep(0.002)
    return None


def _top_pid(out: Path) -> int | None:
    """The Python process running `top` for this rate (not tmux's shell)."""
    found = subprocess.run(["pgrep", "-f", "--", f"top --comm flood --record {out}"], capture_output=True, text=True, check=False).stdout
    for pid in map(int, found.split()):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() not in ("sh", "bash", "tmux: server", "tmux"):
                return pid
        except OSError:
            continue
    return None


def one_rate(rate: int, seconds: float, flood: Path, work: Path, processes: int = 1) -> dict:
    """Run top under one rate; its CPU share, key latencies and the trace's counts."""
    out = work / f"trace-{rate}"
    subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True, check=False)
    subprocess.run(["tmux", "new-session", "-d", "-s", SESSION, "-x", "100", "-y", "30",
                    f"{IOOBSERVE} top --comm flood --record {out}"], check=True)
    if _wait_for(" live  view", 120) is None:  # the probes attached
        raise RuntimeError(f"top did not start: {_pane()}")
    top_pid = _top_pid(out)
    calls = int(rate * seconds)
    cpu0, wall0 = cpu_seconds(top_pid), time.perf_counter()
    generator = subprocess.Popen([str(flood), str(work / "flood.dat"), str(processes), str(calls // processes), str(rate)],
                                 stdout=subprocess.PIPE, text=True)
    latencies, sort = [], 0
    while generator.poll() is None:
        time.sleep(1.0)
        if generator.poll() is not None:
            break
        sort = (sort + 1) % len(SORTS)
        sent = time.perf_counter()
        subprocess.run(["tmux", "send-keys", "-t", SESSION, "s"], check=True)
        if _wait_for(f"sort: {SORTS[sort]}", 10) is not None:
            latencies.append(time.perf_counter() - sent)
    cpu = (cpu_seconds(top_pid) - cpu0) / (time.perf_counter() - wall0)
    achieved = json.loads(generator.stdout.read())["rate"]
    subprocess.run(["tmux", "send-keys", "-t", SESSION, "q"], check=True)
    while _top_pid(out) is not None:  # until it has flushed and closed the trace
        time.sleep(0.2)
    import polars as pl

    import ioobserve
    from ioobserve.data import schema as s
    from ioobserve.trace.read.reader import own_records

    traces = sorted(out.glob("*.pfw.gz"))
    events = ioobserve.load(traces).filter((pl.col(s.COMM) == "flood") & (pl.col(s.OP) == "pread64")).height
    lost = sum(sum(v for k, v in record["args"].items() if isinstance(v, int)) for t in traces for record in own_records(t, "lost"))
    return {"rate": rate, "achieved": achieved, "cpu": cpu, "latencies": latencies, "events": events,
            "calls": calls // processes * processes, "lost": lost}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", type=int, nargs="+", default=[10_000, 100_000, 200_000])
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--processes", type=int, default=1, help="flood processes sharing the rate")
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        sys.exit("bench/top.py needs tmux (apt-get install tmux)")
    work = Path(tempfile.mkdtemp(prefix="ioobserve-bench-top-"))
    try:
        flood = build("flood.c", work)
        print("| events/s asked | achieved | top CPU (share of a core) | key to screen, median (max) | --record: events / calls, lost |")
        print("|---|---|---|---|---|")
        for rate in args.rates:
            r = one_rate(rate, args.seconds, flood, work, args.processes)
            lat = r["latencies"]
            shown = f"{statistics.median(lat) * 1e3:.0f} ms ({max(lat) * 1e3:.0f} ms), n={len(lat)}" if lat else "no reply"
            print(f"| {rate:,} | {r['achieved']:,.0f} | {r['cpu']:.0%} | {shown} | {r['events']:,} / {r['calls']:,}, {r['lost']:,} |",
                  flush=True)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True, check=False)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
