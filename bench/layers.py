"""Cost per event of each layer: microbenchmarks (pread loop, fwrite loop) run plain, under
ioobserve with the syscall layer alone, with the default layers, with `--layers libc`, and
under DFTracer's LD_PRELOAD (the pread loop also with `--layers net`, which must add nothing
where no socket is used); an h5py read loop plain and with `--layers hdf5` (DFTracer has
no HDF5 layer). Interleaved round by round; medians of ns per call as the programs measure
it, and ns added per event of each layer.

  sudo .venv/bin/python bench/layers.py --rounds 5 [--dftracer-venv .venv-peers]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from harness import BENCH, IOOBSERVE, build, dftracer_preload
from overhead import measure, wrap  # a sibling script

# config -> extra `record` options (None: not ioobserve)
CONFIGS = {
    "baseline": None,
    "syscall layer only": ["--layers", "no-block,no-cache"],
    "default layers": [],
    "--layers libc": ["--layers", "libc"],
    "--layers net": ["--layers", "net"],
    "--layers hdf5": ["--layers", "hdf5"],
    "DFTracer": None,
}
C_LOOP_CONFIGS = ["baseline", "syscall layer only", "default layers", "--layers libc", "DFTracer"]
TARGET_CONFIGS = {"pread loop": [*C_LOOP_CONFIGS, "--layers net"], "fwrite loop": C_LOOP_CONFIGS,
                  "h5py read loop": ["baseline", "default layers", "--layers hdf5"]}
# Events each layer adds per loop iteration: (syscalls, library calls). fwrite: one write per
# 409.6 calls of 10 bytes into a 4096-byte buffer; h5py: one H5Dread per element read, served
# from HDF5's own buffer.
EVENTS_PER_CALL = {"pread loop": (1.0, 1.0), "fwrite loop": (1 / 409.6, 1.0), "h5py read loop": (0.0, 1.0)}


def command_for(config: str, command: list[str], work: Path, preload: Path | None) -> tuple[list[str], dict]:
    """The command line and environment of one configuration."""
    options = CONFIGS[config]
    if options is None:
        return wrap(config, command, work, preload)
    out = Path(tempfile.mkdtemp(dir=work, prefix="trace-"))
    return [str(IOOBSERVE), "record", "-o", str(out), *options, "--", *command], dict(os.environ)


def run(rounds: int, calls: int, dftracer_venv: Path | None) -> dict:
    """{target: {config: [ns per call, ...]}}, configurations interleaved round by round."""
    work = Path(tempfile.mkdtemp(prefix="ioobserve-layers-"))
    preload = dftracer_preload(dftracer_venv)
    targets = {
        "pread loop": [str(build("microbench.c", work)), str(work / "pread.dat"), str(calls)],
        "fwrite loop": [str(build("fwrite_bench.c", work)), str(work / "fwrite.dat"), str(calls)],
        "h5py read loop": [sys.executable, str(BENCH / "h5py_bench.py"), str(work / "h5py.h5"), str(calls // 10)],
    }
    configs = {name: [c for c in TARGET_CONFIGS[name] if c != "DFTracer" or preload] for name in targets}
    results: dict = {name: {config: [] for config in configs[name]} for name in targets}
    try:
        for _ in range(rounds):
            for name, command in targets.items():
                for config in configs[name]:
                    argv, env = command_for(config, command, work, preload)
                    results[name][config].append(measure(argv, "ns_per_call", f"{config} / {name}", env))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results


def report(results: dict) -> str:
    """Medians, ns added per call over the baseline, and per event of the layer a step adds."""
    lines = ["| loop | config | ns/call (median) | added ns/call | added ns per event of the layer |", "|---|---|---|---|---|"]
    for name, by_config in results.items():
        med = {config: statistics.median(values) for config, values in by_config.items()}
        syscalls, library_calls = EVENTS_PER_CALL[name]
        # Each step's cost over the configuration below it, per event of the layer it adds
        # (block and cache add no event to a warm loop).
        steps = {"syscall layer only": ("baseline", syscalls), "--layers libc": ("default layers", library_calls),
                 "--layers hdf5": ("default layers", library_calls), "DFTracer": ("baseline", library_calls),
                 "--layers net": ("default layers", syscalls)}
        per_event = {config: (med[config] - med[below]) / events for config, (below, events) in steps.items()
                     if config in med and events}
        for config, value in med.items():
            added = "" if config == "baseline" else f"{value - med['baseline']:+.0f}"
            event = per_event.get(config)
            lines.append(f"| {name} | {config} | {value:.0f} | {added} | {'' if event is None else f'{event:.0f}'} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--dftracer-venv", type=Path, default=None)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/layers.py: run as root (the traced configurations attach probes)")
    print(report(run(args.rounds, args.calls, args.dftracer_venv)))


if __name__ == "__main__":
    main()
