"""A DataLoader-like workload that reports exactly what I/O it did, per process.

The main process creates N files, indexes them (listdir + stat), then K workers (started
with multiprocessing 'spawn' or 'fork') each read their share in 4 KiB and 1 MiB chunks (or --chunk),
stat and list the directory; a thread pool in the main process reads too; finally the main
process renames and unlinks the files. Every process counts its own calls and bytes, and the
main process prints one JSON line: {"EXPECTED": {pid: {...}}}. Tests compare a trace against it.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import threading
import time

SMALL, LARGE = 4096, 1 << 20


def new_counts() -> dict:
    """Per-process tallies, keyed like syscall names."""
    return {"openat": 0, "read": 0, "write": 0, "close": 0, "newfstatat": 0, "getdents64_dirs": 0,
            "rename": 0, "unlink": 0, "files": {}}


def read_file(path: str, chunk: int, counts: dict) -> None:
    """open, read to EOF in `chunk`-byte reads (the last returns 0), close."""
    fd = os.open(path, os.O_RDONLY)
    counts["openat"] += 1
    got = 0
    while True:
        data = os.read(fd, chunk)
        counts["read"] += 1
        got += len(data)
        if not data:
            break
    os.close(fd)
    counts["close"] += 1
    counts["files"][path] = counts["files"].get(path, 0) + got


def worker(directory: str, paths: list[str], chunk: int, results, outputs: bool = False) -> None:
    """One loader worker: stat + read its files, list the directory once (and write a
    small output file with --outputs)."""
    counts = new_counts()
    if outputs:
        fd = os.open(os.path.join(directory, f"out-{os.getpid()}.bin"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, b"\0" * SMALL)
        os.close(fd)
        counts.update(openat=1, write=1, close=1)
    for path in paths:
        os.stat(path)
        counts["newfstatat"] += 1
        read_file(path, chunk, counts)
    os.listdir(directory)
    counts["getdents64_dirs"] += 1
    results.put({"pid": os.getpid(), "ppid": os.getppid(), "counts": counts})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=None, help="work directory (default: a new temp dir)")
    parser.add_argument("--files", type=int, default=16)
    parser.add_argument("--size", type=int, default=LARGE, help="bytes per file")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--start", choices=["spawn", "fork"], default="spawn")
    parser.add_argument("--threads", type=int, default=2, help="thread-pool readers in the main process")
    parser.add_argument("--epochs", type=int, default=1, help="worker pools started one after another")
    parser.add_argument("--report", choices=["json", "text"], default="json", help="json for tests, text for people")
    parser.add_argument("--outputs", action="store_true", help="each worker also writes an output file")
    parser.add_argument("--short", type=int, default=0, help="forked children that read one file and exit at once")
    parser.add_argument("--chunk", type=int, default=None,
                        help="bytes per read in every worker (default: 4 KiB and 1 MiB by turns)")
    args = parser.parse_args()

    base = args.dir or tempfile.mkdtemp(prefix="ioobserve-loader-")
    directory = os.path.join(base, "data")
    os.makedirs(directory, exist_ok=True)
    main_counts = new_counts()
    payload = os.urandom(args.size)
    paths = []
    for i in range(args.files):
        path = os.path.join(directory, f"sample-{i:04d}.bin")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        main_counts["openat"] += 1
        os.write(fd, payload)
        main_counts["write"] += 1
        os.close(fd)
        main_counts["close"] += 1
        paths.append(path)
    for name in os.listdir(directory):
        os.stat(os.path.join(directory, name))
        main_counts["newfstatat"] += 1
    main_counts["getdents64_dirs"] += 1

    started = time.monotonic()
    results = []
    ctx = mp.get_context(args.start)
    queue = ctx.Queue()
    for epoch in range(args.epochs):
        # ioobserve's application tag (docs/containers.md): about a microsecond, a no-op when not recording.
        os.access(f"/run/ioobserve/tag/epoch={epoch}", os.F_OK)
        # Like a DataLoader: fresh worker processes every epoch, each with its share.
        workers = [
            ctx.Process(target=worker, args=(directory, paths[w :: args.workers], args.chunk or (SMALL if w % 2 == 0 else LARGE),
                                                  queue, args.outputs))
            for w in range(args.workers)
        ]
        for proc in workers:
            proc.start()
        results.extend(queue.get() for _ in workers)
        for proc in workers:
            proc.join()
    for i in range(args.short):
        # Children that live well under 10 ms: one small read each, then _exit.
        child = os.fork()
        if child == 0:
            fd = os.open(paths[i % len(paths)], os.O_RDONLY)
            os.read(fd, SMALL)
            os.close(fd)
            os._exit(0)
        os.waitpid(child, 0)
        counts = new_counts()
        counts.update(openat=1, read=1, close=1, files={paths[i % len(paths)]: min(SMALL, args.size)})
        results.append({"pid": child, "ppid": os.getpid(), "counts": counts})
    # Reader threads in the main process (one file each), like a prefetching thread pool.
    threads = [threading.Thread(target=read_file, args=(p, LARGE, main_counts)) for p in paths[: args.threads]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for path in paths:
        renamed = path + ".done"
        os.rename(path, renamed)
        main_counts["rename"] += 1
        os.unlink(renamed)
        main_counts["unlink"] += 1
    for name in os.listdir(directory):  # worker outputs
        os.unlink(os.path.join(directory, name))
    main_counts["getdents64_dirs"] += 1
    os.rmdir(directory)
    if not args.dir:
        os.rmdir(base)

    expected: dict = {}
    for result in results:
        slot = expected.setdefault(result["pid"], {"ppid": result["ppid"], "counts": new_counts()})
        for key, value in result["counts"].items():
            if key == "files":
                for path, n in value.items():
                    slot["counts"]["files"][path] = slot["counts"]["files"].get(path, 0) + n
            else:
                slot["counts"][key] += value
    expected[os.getpid()] = {"ppid": os.getppid(), "counts": main_counts}
    if args.report == "text":
        read = sum(sum(e["counts"]["files"].values()) for e in expected.values())
        print(f"workload: 1 main process + {len(results)} workers/children ({args.start}, {args.epochs} epochs) "
              f"read {read / 2**20:.1f} MiB of {args.files} files in {directory}", flush=True)
        return
    print(json.dumps({"EXPECTED": expected, "dir": directory, "start": args.start,
                      "elapsed_s": time.monotonic() - started}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
