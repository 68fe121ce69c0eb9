"""Two threads reading different files in different functions, released together; with
--wait, the process prints READY and waits for a line on stdin first (so a recording can
start while it runs). Needs nothing beyond the standard library. Prints one JSON line."""

from __future__ import annotations

import inspect
import json
import sys
import threading
from pathlib import Path

CHUNK = 4096


def read_in_alpha(path: str, start: threading.Barrier, done: list) -> None:
    """Thread A's reads."""
    start.wait()
    with open(path, "rb", buffering=0) as f:
        while f.read(CHUNK):  # alpha reads here
            pass
    done.append(threading.get_native_id())


def read_in_beta(path: str, start: threading.Barrier, done: list) -> None:
    """Thread B's reads."""
    start.wait()
    with open(path, "rb", buffering=0) as f:
        while f.read(CHUNK):  # beta reads here
            pass
    done.append(threading.get_native_id())


def _line(function, marker: str) -> int:
    lines, first = inspect.getsourcelines(function)
    return first + next(i for i, text in enumerate(lines) if marker in text)


def main() -> None:
    directory = Path(sys.argv[1])
    if "--wait" in sys.argv:
        print("READY", flush=True)
        sys.stdin.readline()
    directory.mkdir(parents=True, exist_ok=True)
    files = {}
    for name in ("alpha", "beta"):
        files[name] = str(directory / f"{name}.bin")
        Path(files[name]).write_bytes(bytes(64 * CHUNK))
    start = threading.Barrier(2)
    alpha, beta = [], []
    threads = [threading.Thread(target=read_in_alpha, args=(files["alpha"], start, alpha)),
               threading.Thread(target=read_in_beta, args=(files["beta"], start, beta))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(json.dumps({"pid": threading.get_native_id(), "files": files, "file": __file__,
                      "threads": {"alpha": alpha[0], "beta": beta[0]},
                      "lines": {"alpha": _line(read_in_alpha, "alpha reads"), "beta": _line(read_in_beta, "beta reads")},
                      "reads_each": 64 + 1}), flush=True)


if __name__ == "__main__":
    main()
