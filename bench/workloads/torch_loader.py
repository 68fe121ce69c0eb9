"""The reference job: a real PyTorch DataLoader reading samples from files.

Writes SAMPLES files of SIZE bytes, then runs EPOCHS epochs of a DataLoader with WORKERS
workers started by 'spawn' (so each imports torch itself, as on real nodes) and not kept
between epochs: each epoch spawns and ends its own workers. Dataset.__getitem__ opens its
sample, reads it whole (or in --read-size reads) and makes a tensor of it. Prints one JSON
line with what it did: {"samples_read": N, "bytes_read": B, "seconds": S, "ended_at": epoch seconds at its end}.

Needs torch (the CPU wheel: `pip install torch==2.13.0` in a scratch venv).
Usage: python bench/workloads/torch_loader.py --dir DIR [--samples 48 --workers 4 --epochs 2 --read-size 0]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch
from torch.utils.data import DataLoader, Dataset


class FileSamples(Dataset):
    """One file per sample, read whole in __getitem__ (in `read_size` reads, if not 0)."""

    def __init__(self, paths: list[str], read_size: int = 0):
        self.paths = paths
        self.read_size = read_size

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> torch.Tensor:
        if not self.read_size:
            with open(self.paths[index], "rb") as handle:
                data = handle.read()
        else:
            with open(self.paths[index], "rb", buffering=0) as handle:  # unbuffered: a read() is a system call
                data = b"".join(iter(lambda: handle.read(self.read_size), b""))
        return torch.frombuffer(bytearray(data), dtype=torch.uint8).float().mean().reshape(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True, help="where the sample files go")
    parser.add_argument("--samples", type=int, default=48)
    parser.add_argument("--size", type=int, default=1 << 20, help="bytes per sample file")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--read-size", type=int, default=0, help="bytes per read() of a sample (0: the whole file at once)")
    args = parser.parse_args()

    os.makedirs(args.dir, exist_ok=True)
    paths = []
    for index in range(args.samples):
        path = os.path.join(args.dir, f"sample-{index:05d}.bin")
        if not os.path.exists(path) or os.path.getsize(path) != args.size:
            with open(path, "wb") as handle:
                handle.write(os.urandom(args.size))
        paths.append(path)

    started = time.monotonic()
    loader = DataLoader(FileSamples(paths, args.read_size), batch_size=4, num_workers=args.workers,
                        multiprocessing_context="spawn", persistent_workers=False)
    seen = 0
    for _ in range(args.epochs):
        for batch in loader:
            seen += batch.shape[0]
    print(json.dumps({"samples_read": seen, "bytes_read": seen * args.size,
                      "seconds": round(time.monotonic() - started, 3), "ended_at": time.time()}), flush=True)


if __name__ == "__main__":
    main()
