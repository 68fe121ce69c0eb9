"""One function called N times from one line, each call with its own arguments and one
pread of a file: the same Python stack N times, N distinct calls. Needs nothing beyond the
standard library. Prints one JSON line: {"calls": N, "pid": ..., "file": ..., "line": ...}."""

from __future__ import annotations

import inspect
import json
import os
import sys


def read_one(fd: int, index: int) -> bytes:
    """One call: a pread at the call's own offset."""
    return os.pread(fd, 16, index * 16)  # the read


def main() -> None:
    path, calls = sys.argv[1], int(sys.argv[2])
    with open(path, "wb") as handle:
        handle.write(bytes(16 * calls))
    fd = os.open(path, os.O_RDONLY)
    # The indices live until the end, each its own object: a call is told from the next by its
    # frame and first arguments, and an int freed after one call may be made again at its address.
    indices = list(range(calls))
    for index in indices:
        read_one(fd, index)
    os.close(fd)
    lines, first = inspect.getsourcelines(read_one)
    line = first + next(i for i, text in enumerate(lines) if "# the read" in text)
    print(json.dumps({"calls": calls, "pid": os.getpid(), "file": __file__, "line": line}), flush=True)


if __name__ == "__main__":
    main()
