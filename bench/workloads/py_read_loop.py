"""A tight Python read loop: N x os.pread(4 KiB) over a warm 1 MiB file, made DEPTH Python
frames down (a realistic call depth). Prints one JSON line with ns per call as it measures it.

  python py_read_loop.py FILE CALLS [DEPTH]
"""

from __future__ import annotations

import json
import os
import sys
import time

SIZE = 1 << 20
CHUNK = 4096


def read_loop(fd: int, calls: int) -> None:
    """The measured loop."""
    for i in range(calls):
        os.pread(fd, CHUNK, (i * CHUNK) % SIZE)


def nested(depth: int, fd: int, calls: int) -> None:
    """`depth` frames of this function above the loop."""
    if depth > 1:
        nested(depth - 1, fd, calls)
    else:
        read_loop(fd, calls)


def main() -> None:
    path, calls = sys.argv[1], int(sys.argv[2])
    depth = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    if not os.path.exists(path) or os.path.getsize(path) != SIZE:
        with open(path, "wb") as out:
            out.write(os.urandom(SIZE))
    fd = os.open(path, os.O_RDONLY)
    nested(depth, fd, min(calls, 10_000))  # warm the page cache and the interpreter
    start = time.perf_counter_ns()
    nested(depth, fd, calls)
    elapsed = time.perf_counter_ns() - start
    os.close(fd)
    print(json.dumps({"calls": calls, "depth": depth, "ns_per_call": elapsed / calls}), flush=True)


if __name__ == "__main__":
    main()
