"""I/O patterns that each raise one kind of insight, and a clean one that raises none.

Usage: io_patterns.py MODE DIR. Prints READY, waits for a line on stdin (so that a recorder
can start), does MODE's I/O under DIR and prints {"pid", "mode", "dir", "calls", "file_calls"}:
"calls" the calls of the pattern itself (not those creating its input files), "file_calls"
every call it made on files under DIR. Modes: clean, small, random, metadata, fsync, tiny,
rereads."""

from __future__ import annotations

import json
import os
import random
import sys

MiB = 1 << 20
file_calls = 0


def _do(call, *args):
    """One system call on a file under DIR, counted into "file_calls"."""
    global file_calls
    file_calls += 1
    return call(*args)


def _write_file(path: str, size: int, chunk: int = 4 * MiB) -> None:
    fd = _do(os.open, path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    block = os.urandom(chunk)
    for _ in range(size // chunk):
        _do(os.write, fd, block)
    _do(os.close, fd)


def _read_all(path: str, chunk: int) -> int:
    fd, calls = _do(os.open, path, os.O_RDONLY), 0
    while _do(os.read, fd, chunk):
        calls += 1
    _do(os.close, fd)
    return calls + 1


def clean(work: str) -> int:
    """64 MiB written and read back once, 4 MiB at a time, one fsync."""
    path = os.path.join(work, "big.bin")
    fd = _do(os.open, path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    block = os.urandom(4 * MiB)
    for _ in range(16):
        _do(os.write, fd, block)
    _do(os.fsync, fd)
    _do(os.close, fd)
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
    fd, rng = _do(os.open, path, os.O_RDONLY), random.Random(1)
    for _ in range(3000):
        _do(os.pread, fd, 4096, rng.randrange(0, 16 * MiB // 4096) * 4096)
    _do(os.close, fd)
    return 3000


def metadata(work: str) -> int:
    """300 files of 1 KiB made, then each checked (stat) before every open, twice; read once."""
    paths = [os.path.join(work, f"f{i:04d}") for i in range(300)]
    for path in paths:
        fd = _do(os.open, path, os.O_WRONLY | os.O_CREAT, 0o600)
        _do(os.write, fd, b"x" * 1024)
        _do(os.close, fd)
    calls = 0
    for round_ in range(2):
        for path in paths:
            if _do(os.path.exists, path):
                fd = _do(os.open, path, os.O_RDONLY)
                if round_ == 0:
                    _do(os.read, fd, 4096)
                    calls += 1
                _do(os.close, fd)
                calls += 3
    return calls


def fsyncs(work: str) -> int:
    """300 writes of 4 KiB, each followed by an fsync."""
    fd = _do(os.open, os.path.join(work, "log.bin"), os.O_WRONLY | os.O_CREAT, 0o600)
    block = os.urandom(4096)
    for _ in range(300):
        _do(os.write, fd, block)
        _do(os.fsync, fd)
    _do(os.close, fd)
    return 600


def tiny(work: str) -> int:
    """3000 unbuffered writes of 64 bytes."""
    fd = _do(os.open, os.path.join(work, "log.txt"), os.O_WRONLY | os.O_CREAT, 0o600)
    for i in range(3000):
        _do(os.write, fd, f"{i:063d}\n".encode())
    _do(os.close, fd)
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
    print(json.dumps({"pid": os.getpid(), "mode": mode, "dir": work, "calls": calls, "file_calls": file_calls}), flush=True)
