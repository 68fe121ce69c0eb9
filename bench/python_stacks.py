"""Cost of the Python layer: a tight Python read loop (bench/workloads/py_read_loop.py, 8
frames deep; metric: ns per call as it measures it) and the DataLoader-like workload with 4
spawned workers (metric: its own elapsed seconds), run plain, under `record --py-stacks off`,
under `record` (stacks on every traced call, the default) and `record --py-stacks 10`.
Interleaved round by round; medians. With --interpreters, the read loop also runs on pyenv's
3.12 and, in the unstable root of ci/roots.sh (chroot), on 3.14 and the free-threaded 3.13t:
the walk's cost per call on each layout.

  sudo .venv/bin/python bench/python_stacks.py --rounds 5 [--interpreters]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from harness import BENCH, IOOBSERVE, PYTHON, ROOT
from overhead import measure  # a sibling script

PYENV_312 = Path("/root/.pyenv/versions/3.12.1/bin/python3.12")
IN_ROOT = {"3.14": "/usr/bin/python3.14", "3.13t": "/opt/python3.13t/bin/python3.13t"}  # tests/roots.py's

# config -> `record` options (None: the workload alone)
CONFIGS = {
    "baseline": None,
    "--py-stacks off": ["--py-stacks", "off"],
    "stacks on (default)": [],
    "--py-stacks 10": ["--py-stacks", "10"],
}


def targets(work: Path, calls: int, interpreters: bool) -> dict[str, tuple[list[str], str]]:
    """name -> (command, metric key in the program's JSON output)."""
    loader = [str(PYTHON), str(ROOT / "tests" / "workloads" / "loader.py"), "--files", "32", "--workers", "4", "--threads", "0",
              "--start", "spawn", "--dir", str(work / "spawn")]
    script = BENCH / "workloads" / "py_read_loop.py"
    loop = [str(PYTHON), str(script), str(work / "loop.dat"), str(calls), "8"]
    found = {"python read loop (3.11)": (loop, "ns_per_call")}
    if interpreters:
        found["python read loop (3.12)"] = ([str(PYENV_312), *loop[1:]], "ns_per_call")
        found.update(root_loops(work, script, calls))
    return {**found, "loader, 4 spawned workers": (loader, "elapsed_s")}


def root_loops(work: Path, script: Path, calls: int) -> dict[str, tuple[list[str], str]]:
    """The read loop on the unstable root's 3.14 and 3.13t, entered by chroot."""
    from tests.roots import UNSTABLE, build_launcher, missing_root, mount_proc

    why = missing_root()
    if why is not None:
        sys.exit(f"bench/python_stacks.py: {why}")
    mount_proc(UNSTABLE)
    launcher = build_launcher(work)
    inside = Path("/tmp") / work.name
    (UNSTABLE / inside.relative_to("/")).mkdir(parents=True, exist_ok=True)
    shutil.copy(script, UNSTABLE / inside.relative_to("/") / script.name)
    return {f"python read loop ({name}, own root)": (
        [str(launcher), "chroot", str(UNSTABLE), python, str(inside / script.name), str(inside / "loop.dat"), str(calls), "8"],
        "ns_per_call") for name, python in IN_ROOT.items()}


def run(rounds: int, calls: int, interpreters: bool = False) -> dict:
    """{target: {config: [metric, ...]}}, configurations interleaved round by round."""
    work = Path(tempfile.mkdtemp(prefix="ioobserve-bench-"))
    results: dict = {}
    try:
        for name, (command, key) in targets(work, calls, interpreters).items():
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
    parser.add_argument("--interpreters", action="store_true", help="the read loop on 3.12, and 3.14 and 3.13t in a root of their own")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/python_stacks.py: run as root (the traced configurations attach probes)")
    print(report(run(args.rounds, args.calls, args.interpreters)))


if __name__ == "__main__":
    main()
