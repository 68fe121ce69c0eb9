"""h5py read loop: one-element reads of a dataset (each an H5Dread), timed by the program;
prints {"calls": N, "ns_per_call": ...}. Usage: h5py_bench.py FILE CALLS"""

from __future__ import annotations

import json
import sys
import time

import h5py
import numpy as np

ELEMENTS = 4096


def main(path: str, calls: int) -> None:
    with h5py.File(path, "w") as f:
        f.create_dataset("values", data=np.arange(ELEMENTS, dtype=np.float64))
    with h5py.File(path, "r") as f:
        dataset = f["values"]
        start = time.perf_counter_ns()
        for i in range(calls):
            dataset[i % ELEMENTS]
        elapsed = time.perf_counter_ns() - start
    print(json.dumps({"calls": calls, "ns_per_call": elapsed / calls}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
