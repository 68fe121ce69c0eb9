"""Prints READY, waits for a line on stdin (so a recording can start while it runs), then
starts its own interpreter COUNT times (default 3), each child importing a few standard
modules and exiting. Needs only the standard library. Prints one JSON line: the children's pids."""

from __future__ import annotations

import json
import subprocess
import sys

CHILD = "import os, json, email.parser, argparse; print(os.getpid())"


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    print("READY", flush=True)
    sys.stdin.readline()
    children = [int(subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True).stdout)
                for _ in range(count)]
    print(json.dumps({"children": children}), flush=True)


if __name__ == "__main__":
    main()
