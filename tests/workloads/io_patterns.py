"""I/O patterns that each raise one kind of insight, and a clean one that raises none.

Usage: io_patterns.py MODE DIR. Prints READY, waits for a line on stdin (so that a recorder
can start), does MODE's I/O under DIR and prints {"pid", "mode", "calls"}: the file calls it
made besides creating its input files. Modes: clean, small, random, metadata, fsync, tiny,
rereads."""

from __future__ import annotations

import json
import os
import random
import sys

MiB = 1 << 20


def _write_file(path: str, size: int, chunk: int = 4 * MiB) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    block = os.urandom(chunk)
    for _ in range(size // chunk):
        os.write(fd, block)
    os.close(fd)


def _read_all(path: str, chunk: int) -> int:
    fd, calls = os.open(path, os.O_RDONLY), 0
    while os.read(fd, chunk):
        calls += 1
    os.close(fd)
    return calls + 1


def clean(work: str) -> int:
    """64 MiB written and read back once, 4 MiB at a time, one fsync."""
    path = os.path.join(work, "big.bin")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    block = os.urandom(4 * MiB)
    for _ in range(16):
        os.write(fd, block)
    os.fsync(fd)
    os.close(fd)
    return 16 + _read_all(path, 4 * MiB)


def small(work: str) -> int:
    """A 20 MiB file read in order, 4 KiB at a time."""
    path = os.path.join(work, "data.bin")
    _write_file(path, 20 * MiB)
    return _read_all(path, 4096)


def random_reads(work: str) -> int:
    """3000 reads of 4 KiB at random places of a 16 MiB file."""
    path = os.path.join(work, "data.bin")
    _write_file(path, 16 * MiB)
    fd, rng = os.open(path, os.O_RDONLY), random.Random(1)
    for _ in range(3000):
        os.pread(fd, 4096, rng.randrange(0, 16 * MiB // 4096) * 4096)
    os.close(fd)
    return 3000


def metadata(work: str) -> int:
    """300 files of 1 KiB made, then each checked (stat) before every open, twice; read once."""
    paths = [os.path.join(work, f"f{i:04d}") for i in range(300)]
    for path in paths:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, b"x" * 1024)
        os.close(fd)
    calls = 0
    for round_ in range(2):
        for path in paths:
            if os.path.exists(path):
                fd = os.open(path, os.O_RDONLY)
                if round_ == 0:
                    os.read(fd, 4096)
                    calls += 1
                os.close(fd)
                calls += 3
    return calls


def fsyncs(work: str) -> int:
    """300 writes of 4 KiB, each followed by an fsync."""
    fd = os.open(os.path.join(work, "log.bin"), os.O_WRONLY | os.O_CREAT, 0o600)
    block = os.urandom(4096)
    for _ in range(300):
        os.write(fd, block)
        os.fsync(fd)
    os.close(fd)
    return 600


def tiny(work: str) -> int:
    """3000 unbuffered writes of 64 bytes."""
    fd = os.open(os.path.join(work, "log.txt"), os.O_WRONLY | os.O_CREAT, 0o600)
    for i in range(3000):
        os.write(fd, f"{i:063d}\n".encode())
    os.close(fd)
    return 3000


def rereads(work: str) -> int:
    """A 32 MiB file read whole three times, 4 MiB at a time."""
    path = os.path.join(work, "data.bin")
    _write_file(path, 32 * MiB)
    return sum(_read_all(path, 4 * MiB) for _ in range(3))


MODES = {"clean": clean, "small": small, "random": random_reads, "metadata": metadata, "fsync": fsyncs, "tiny": tiny,
         "rereads": rereads}

if __name__ == "__main__":
    mode, work = sys.argv[1], sys.argv[2]
    print("READY", flush=True)
    sys.stdin.readline()
    calls = MODES[mode](work)
    print(json.dumps({"pid": os.getpid(), "mode": mode, "calls": calls}), flush=True)
