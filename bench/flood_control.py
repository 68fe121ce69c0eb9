"""What flood control costs per event, and what a throttled event costs: bench/microbench.c
(N x pread 4 KiB from the page cache, ns per call as it measures itself) under
`record --all` with no limit, with a limit it never reaches (every event checked, all sent),
and with a limit it passes at once (checked, then counted in the kernel instead of sent),
beside no observer; configurations interleaved round by round, medians.

  sudo .venv/bin/python bench/flood_control.py --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from harness import IOOBSERVE, build
from overhead import measure  # a sibling script

CONFIGS = {"no observer": None, "record --all, no limit": "0", "limit never reached": "1000000000",
           "limit reached (throttled)": "1000"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=1_000_000)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/flood_control.py: run as root (the observer attaches probes)")
    work = Path(tempfile.mkdtemp(prefix="ioobserve-bench-flood-"))
    micro = build("microbench.c", work)
    command = [str(micro), str(work / "micro.dat"), str(args.calls)]
    results: dict[str, list[float]] = {config: [] for config in CONFIGS}
    for _ in range(args.rounds):
        for config, limit in CONFIGS.items():
            argv = command if limit is None else [
                str(IOOBSERVE), "record", "-o", tempfile.mkdtemp(dir=work, prefix="trace-"), "--all", "--no-compact",
                "--layers", "syscall", "--flood-limit", limit, "--", *command]
            results[config].append(measure(argv, "ns_per_call", config))
    base = statistics.median(results["no observer"])
    print(f"pread(4 KiB), {args.calls:,} calls, {args.rounds} interleaved rounds:\n")
    print("| running | median ns/call | min-max | added ns/call |")
    print("|---|---|---|---|")
    for config, values in results.items():
        med = statistics.median(values)
        print(f"| {config} | {med:.0f} | {min(values):.0f}-{max(values):.0f} | {med - base:+.0f} |")


if __name__ == "__main__":
    main()
