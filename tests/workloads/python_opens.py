"""Python-level open() calls: writes one file and reads it back (two opens that succeed),
then opens a missing file (one that raises). Needs only the standard library. Prints one
JSON line: its pid, the file and the missing path."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main() -> None:
    directory = Path(sys.argv[1])
    directory.mkdir(parents=True, exist_ok=True)
    path, missing = directory / "data.txt", directory / "missing.txt"
    with open(path, "w") as out:
        out.write("x" * 1000)
    with open(path) as back:
        back.read()
    try:
        open(missing)
    except FileNotFoundError:
        pass
    print(json.dumps({"pid": os.getpid(), "file": str(path), "missing": str(missing)}), flush=True)


if __name__ == "__main__":
    main()
