"""A DataLoader-like workload on the standard library alone (it runs on any CPython, in any
root): a Dataset whose __getitem__ reads one shard in 4 KiB chunks, read by worker processes
started with spawn or fork, 4 shards each. Prints one JSON line: its pid, the workers'
pids, the shards, the reads and bytes each worker made, and the line of the read in
__getitem__."""

from __future__ import annotations

import inspect
import json
import multiprocessing
import os
import sys
from pathlib import Path

CHUNK = 4096
SHARD_CHUNKS = 4  # and one read more, of nothing, at each shard's end
SHARDS_PER_WORKER = 4


class ShardDataset:
    """One shard file per item."""

    def __init__(self, paths: list[str]):
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> tuple[int, int]:
        reads = size = 0
        with open(self.paths[index], "rb", buffering=0) as shard:
            while chunk := shard.read(CHUNK):  # every read of a shard happens on this line
                reads += 1
                size += len(chunk)
        return reads + 1, size


def work(dataset: ShardDataset, indexes: list[int], results) -> None:
    """A worker: read its share of the items, then say how many reads and bytes that took."""
    done = [dataset[i] for i in indexes]
    results.put((os.getpid(), sum(reads for reads, _ in done), sum(size for _, size in done)))


def main() -> None:
    directory, method, workers = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(workers * SHARDS_PER_WORKER):
        path = directory / f"shard{i}.bin"
        path.write_bytes(bytes([i]) * CHUNK * SHARD_CHUNKS)
        paths.append(str(path))
    dataset = ShardDataset(paths)
    context = multiprocessing.get_context(method)
    results = context.Queue()
    procs = [context.Process(target=work, args=(dataset, list(range(w, len(paths), workers)), results))
             for w in range(workers)]
    for proc in procs:
        proc.start()
    done = [results.get() for _ in procs]
    for proc in procs:
        proc.join()
    read_line = inspect.getsourcelines(ShardDataset.__getitem__)[1] + 3
    report = json.dumps({"pid": os.getpid(), "workers": {str(pid): {"reads": reads, "bytes": size} for pid, reads, size in done},
                         "files": paths, "file": __file__, "read_line": read_line,
                         "version": list(sys.version_info[:2]), "gil": getattr(sys, "_is_gil_enabled", lambda: True)()})
    # One write of the whole line (under PIPE_BUF): two runs share a pipe in the tests, and
    # print() may write the text and its newline apart, letting the other's line in between.
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), (report + "\n").encode())


if __name__ == "__main__":
    main()
