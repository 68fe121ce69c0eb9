"""Cost of the Python layer: a tight Python read loop (bench/workloads/py_read_loop.py, 8
frames deep; metric: ns per call as it measures it) and the DataLoader-like workload with 4
spawned workers (metric: its own elapsed seconds), run plain, under `record --py-stacks off`,
under `record` (stacks on every traced call, the default) and `record --py-stacks 10`.
Interleaved round by round; medians.

  sudo .venv/bin/python bench/python_stacks.py --rounds 5
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from overhead import BENCH, IOOBSERVE, PYTHON, ROOT, measure

# config -> `record` options (None: the workload alone)
CONFIGS = {
    "baseline": None,
    "--py-stacks off": ["--py-stacks", "off"],
    "stacks on (default)": [],
    "--py-stacks 10": ["--py-stacks", "10"],
}


def targets(work: Path, calls: int) -> dict[str, tuple[list[str], str]]:
    """name -> (command, metric key in the program's JSON output)."""
    loader = [str(PYTHON), str(ROOT / "tests" / "workloads" / "loader.py"), "--files", "32", "--workers", "4", "--threads", "0",
              "--start", "spawn", "--dir", str(work / "spawn")]
    loop = [str(PYTHON), str(BENCH / "workloads" / "py_read_loop.py"), str(work / "loop.dat"), str(calls), "8"]
    return {"python read loop": (loop, "ns_per_call"), "loader, 4 spawned workers": (loader, "elapsed_s")}


def run(rounds: int, calls: int) -> dict:
    """{target: {config: [metric, ...]}}, configurations interleaved round by round."""
    work = Path(tempfile.mkdtemp(prefix="ioobserve-bench-"))
    results: dict = {}
    try:
        for name, (command, key) in targets(work, calls).items():
            results[name] = {config: [] for config in CONFIGS}
            for _ in range(rounds):
                for config, options in CONFIGS.items():
                    argv = command
                    if options is not None:
                        out = Path(tempfile.mkdtemp(dir=work, prefix="trace-"))
                        argv = [str(IOOBSERVE), "record", "-o", str(out), *options, "--", *command]
                    results[name][config].append(measure(argv, key, f"{config} / {name}"))
                    if options is not None:
                        shutil.rmtree(out, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results


def report(results: dict) -> str:
    """A markdown table: medians, ranges, ratios to the baseline and to stacks off."""
    lines = ["| target | config | median | min-max | ratio to baseline | ratio to stacks off |", "|---|---|---|---|---|---|"]
    for name, by_config in results.items():
        base = statistics.median(by_config["baseline"])
        off = statistics.median(by_config["--py-stacks off"])
        per_call = "loop" in name
        for config, values in by_config.items():
            med = statistics.median(values)
            unit = "ns/call" if per_call else "s"
            extra = f" (+{med - off:.0f} ns/call vs off)" if per_call and config not in ("baseline", "--py-stacks off") else ""
            lines.append(f"| {name} | {config} | {med:.4g} {unit}{extra} | {min(values):.4g}-{max(values):.4g} "
                         f"| {med / base:.2f}x | {med / off:.2f}x |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=300_000, help="preads in the Python loop")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/python_stacks.py: run as root (the traced configurations attach probes)")
    print(report(run(args.rounds, args.calls)))


if __name__ == "__main__":
    main()
