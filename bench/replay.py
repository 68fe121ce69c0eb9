"""`ioobserve top --trace` (replay) on a big trace: time to the first screen, to a jump to the
trace's end, and the peak RSS while it plays.

The real app runs in a tmux pane (100x30). The first screen is the first capture of the pane
that shows the replay clock and a process row; then `end` is pressed and the pane polled
until the clock changes; then `space` plays for --seconds. RSS is the app's process tree,
sampled every 50 ms. Run it twice to see it cold (the first read builds the trace's Parquet
copy) and warm (with the copy, as after a recording: the recorder's finisher builds it).

Usage (root not needed):
  python bench/replay.py --trace /var/tmp/big/bench.pfw.gz --seconds 10
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import time
from pathlib import Path

from harness import IOOBSERVE, tree_rss

SESSION = "ioobserve-replay-bench"
CLOCK = re.compile(r"replay (\d\d:\d\d:\d\d)")
PROCESS_ROW = re.compile(r"^\s*\d+\s+\S+", re.MULTILINE)


def _pane() -> str:
    return subprocess.run(["tmux", "capture-pane", "-p", "-t", SESSION], capture_output=True, text=True).stdout


def _span_s(trace: Path) -> float:
    """Seconds from the trace's first event to its last (read through its copy, built by now)."""
    import polars as pl

    import ioobserve

    ends = ioobserve.scan(trace).select(pl.col("ts").min().alias("first"), pl.col("ts").max().alias("last"))
    first, last = ends.collect().row(0)
    return (last - first) / 1e9 if first is not None else 0.0


def _app_pid() -> int:
    out = subprocess.run(["tmux", "list-panes", "-t", SESSION, "-F", "#{pane_pid}"], capture_output=True, text=True)
    return int(out.stdout.split()[0])


class Watch:
    """Polls the pane and samples the app's RSS until a condition holds."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_mb = 0.0

    def until(self, condition, timeout: float) -> tuple[float, str]:
        """(seconds until condition(pane) held, the pane then)."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            self.peak_mb = max(self.peak_mb, tree_rss(self.pid) / 2**20)
            pane = _pane()
            if condition(pane):
                return time.monotonic() - start, pane
            time.sleep(0.05)
        raise TimeoutError(f"not seen in {timeout:.0f} s; the pane:\n{_pane()}")

    def play(self, seconds: float) -> None:
        """Sample while the replay plays."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.peak_mb = max(self.peak_mb, tree_rss(self.pid) / 2**20)
            time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", type=Path, required=True)
    parser.add_argument("--seconds", type=float, default=10.0, help="how long to play after the jump to the end")
    parser.add_argument("--timeout", type=float, default=1800.0, help="for the first screen (a cold run builds the copy)")
    args = parser.parse_args()
    subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True)
    started = time.monotonic()
    subprocess.run(["tmux", "new-session", "-d", "-s", SESSION, "-x", "100", "-y", "30",
                    f"{IOOBSERVE} top --trace {args.trace}"], check=True)
    try:
        watch = Watch(_app_pid())
        _, pane = watch.until(lambda pane: CLOCK.search(pane) and PROCESS_ROW.search(pane.split("pid", 1)[-1]),
                              args.timeout)
        first = time.monotonic() - started
        clock = CLOCK.search(pane).group(1)
        subprocess.run(["tmux", "send-keys", "-t", SESSION, "End"], check=True)
        jump = None
        if _span_s(args.trace) >= 2:  # else the clock the end shows may be the first one's
            jump, pane = watch.until(lambda pane: (found := CLOCK.search(pane)) and found.group(1) != clock, 120)
        subprocess.run(["tmux", "send-keys", "-t", SESSION, "Home", "Space"], check=True)
        watch.play(args.seconds)
        subprocess.run(["tmux", "send-keys", "-t", SESSION, "q"], check=True)
        print(json.dumps({"trace": str(args.trace), "first_screen_s": round(first, 2),
                          "jump_to_end_s": None if jump is None else round(jump, 2),
                          "clock": [clock, CLOCK.search(pane).group(1)], "peak_rss_mb": round(watch.peak_mb)}))
    finally:
        subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True)


if __name__ == "__main__":
    main()
