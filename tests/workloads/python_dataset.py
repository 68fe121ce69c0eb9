"""A DataLoader-like workload: a Dataset whose __getitem__ calls numpy.load on .npy files,
read by worker processes started with spawn or fork. Prints one JSON line: the workers'
pids, the files, and the line of the numpy.load call."""

from __future__ import annotations

import inspect
import json
import multiprocessing
import sys
from pathlib import Path

import numpy as np


class NpyDataset:
    """One .npy file per item."""

    def __init__(self, paths: list[str]):
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> np.ndarray:
        return np.load(self.paths[index])  # the reads of every item happen on this line


def work(dataset: NpyDataset, indexes: list[int], results) -> None:
    """A worker: load its share of the items."""
    total = sum(float(dataset[i].sum()) for i in indexes)
    results.put(total)


def main() -> None:
    directory, method, workers = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(workers * 2):
        path = directory / f"item{i}.npy"
        np.save(path, np.arange(20_000, dtype=np.float64) + i)  # 160 KB: several reads each
        paths.append(str(path))
    dataset = NpyDataset(paths)
    context = multiprocessing.get_context(method)
    results = context.Queue()
    procs = [context.Process(target=work, args=(dataset, list(range(w, len(paths), workers)), results))
             for w in range(workers)]
    for proc in procs:
        proc.start()
    totals = [results.get() for _ in procs]
    for proc in procs:
        proc.join()
    load_line = inspect.getsourcelines(NpyDataset.__getitem__)[1] + 1
    print(json.dumps({"workers": [p.pid for p in procs], "files": paths, "file": __file__, "load_line": load_line,
                      "total": sum(totals)}))


if __name__ == "__main__":
    main()
