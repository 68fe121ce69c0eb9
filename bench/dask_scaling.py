"""The analysis on Dask as workers are added, beside the local loop (issue 48).

--traces copies of one trace (--trace; their copies for reading are built first, so every
run is warm) are analysed by the local loop, then on a Dask cluster of 1, 2, ... --workers
worker processes started here (its scheduler on loopback), each run the median of --rounds.
Reported: wall time, its ratio to the local loop's, whether the JSON is the same as the
local loop's, and the bytes of the one partial the client receives, for --traces and for
half as many (they must not grow with the number of traces).

  .venv/bin/python bench/dask_scaling.py --trace T.pfw.gz --traces 8 --workers 2 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import pickle
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import harness  # noqa: F401 - this checkout's ioobserve first

from ioobserve.analysis import results as r
from ioobserve.analysis.engine import analyze_partial


def timed(paths: list[Path], scheduler: str | None) -> tuple[float, str, object]:
    """Seconds for the analysis of `paths` (results included), its JSON, and the partial."""
    start = time.perf_counter()
    partial = analyze_partial(paths, scheduler=scheduler)
    answer = json.dumps(r.as_dict(r.results(partial)), sort_keys=True, default=str)
    return time.perf_counter() - start, answer, partial


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", type=Path, required=True)
    parser.add_argument("--traces", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from distributed import Client, LocalCluster

    work = Path(tempfile.mkdtemp(prefix="ioobserve-dask-scaling-"))
    try:
        paths = []
        for index in range(args.traces):
            paths.append(work / f"copy{index}-{args.trace.name}")
            shutil.copyfile(args.trace, paths[-1])
        local_times, local_json = [], None
        for _ in range(args.rounds + 1):  # the first builds the copies
            seconds, local_json, _ = timed(paths, None)
            local_times.append(seconds)
        local = statistics.median(local_times[1:])
        print(f"{args.traces} traces of {args.trace.name}, warm, medians of {args.rounds}\n")
        print("| run | s | × local loop | same JSON | partial the client gets, MB |")
        print("|---|---|---|---|---|")
        print(f"| local loop | {local:.2f} | 1.00 | yes | |")
        for workers in range(1, args.workers + 1):
            with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                              dashboard_address=None) as cluster, Client(cluster):
                runs = [timed(paths, cluster.scheduler_address) for _ in range(args.rounds)]
                half = timed(paths[: max(1, args.traces // 2)], cluster.scheduler_address)[2]
            seconds = statistics.median(run[0] for run in runs)
            sizes = f"{len(pickle.dumps(runs[0][2])) / 1e6:.2f} ({len(pickle.dumps(half)) / 1e6:.2f} for half the traces)"
            same = "yes" if all(run[1] == local_json for run in runs) else "NO"
            print(f"| Dask, {workers} worker{'s' if workers > 1 else ''} | {seconds:.2f} | {seconds / local:.2f} | {same} | {sizes} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
