"""What the exec gate costs a node's execs, and what it holds a new root's program for: the
wall time of one fork+exec+exit, measured by the program that runs them, with no observer,
`record --all --no-exec-gate` and `record --all` (the gate), interleaved round by round.

- repeated: /bin/true again and again (after its first exec the gate ignores the file: no
  round trip);
- first exec of a file: a fresh copy of /bin/true each time (a new inode: one round trip to
  the gate, which reads its ELF headers and finds nothing new to probe);
- a new root's program: with --root DIR (a root with its own libc, e.g. ci/roots.sh's), the
  first exec of a fresh copy of a program in it, whose libc copy no probe covers yet (held
  while the libc layer's probes go on; each round records anew, so each round has one).

  sudo .venv/bin/python bench/exec_gate.py --rounds 5 [--root /var/cache/ioobserve/roots/unstable]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import IOOBSERVE, PYTHON

# Run inside the recording: times N execs of each kind, prints them as JSON (µs each).
CHILD = """
import json, os, shutil, subprocess, sys, time
work, runs, root = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def timed(argv):
    start = time.perf_counter_ns()
    subprocess.run(argv, check=True)
    return (time.perf_counter_ns() - start) / 1000
out = {"repeated": [timed(["/bin/true"]) for _ in range(runs)], "first": []}
for i in range(runs):
    copy = os.path.join(work, f"true-{os.getpid()}-{i}")
    shutil.copy("/bin/true", copy)
    out["first"].append(timed([copy]))
if root:
    name = f"/tmp/true-{os.getpid()}"
    shutil.copy(root + "/usr/bin/true", root + name)
    out["new_root"] = [timed(["chroot", root, name])]
print(json.dumps(out), flush=True)
"""
CONFIGS = ("no observer", "record --no-exec-gate", "record (exec gate)")


def run_once(config: str, work: Path, runs: int, root: str) -> dict:
    command = [str(PYTHON), "-c", CHILD, str(work), str(runs), root]
    if config != "no observer":
        options = ["record", "-o", tempfile.mkdtemp(dir=work, prefix="trace-"), "--all", "--layers", "syscall,libc"]
        if config == "record --no-exec-gate":
            options.append("--no-exec-gate")
        command = [str(IOOBSERVE), *options, "--", *command]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        sys.exit(f"bench/exec_gate.py: {config} failed: {done.stderr[-2000:]}")
    return json.loads(next(line for line in done.stdout.splitlines() if line.startswith('{"repeated"')))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=200, help="execs of each kind per round")
    parser.add_argument("--root", default="", help="a root with its own libc, for the new root's program")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/exec_gate.py: run as root (the observer attaches probes)")
    work = Path(tempfile.mkdtemp(prefix="ioobserve-bench-gate-"))
    results = {config: {} for config in CONFIGS}
    for _ in range(args.rounds):
        for config in CONFIGS:
            for kind, values in run_once(config, work, args.runs, args.root).items():
                results[config].setdefault(kind, []).extend(values)
    kinds = [kind for kind in ("repeated", "first", "new_root") if kind in results[CONFIGS[0]]]
    print(f"fork+exec+exit of /bin/true, µs (median of {args.rounds} rounds x {args.runs}; new root: one per round):\n")
    print("| running | " + " | ".join(kinds) + " |")
    print("|---|" + "---|" * len(kinds))
    for config in CONFIGS:
        print(f"| {config} | " + " | ".join(f"{statistics.median(results[config][kind]):,.0f}" for kind in kinds) + " |")
    base = results[CONFIGS[1]]
    gated = results[CONFIGS[2]]
    print("\nthe gate's own share (record with the gate minus record without), µs: "
          + ", ".join(f"{kind} {statistics.median(gated[kind]) - statistics.median(base[kind]):+,.0f}" for kind in kinds))


if __name__ == "__main__":
    main()
