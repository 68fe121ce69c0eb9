"""Imports modules from a directory of its own: `outer` (a package whose __init__ imports
`inner`, a module beside it) and `outer` again (already loaded: no I/O), then reads a data
file from `main` (outside any import). Needs only the standard library. Prints one JSON line:
its pid, the directory, the files each module import should touch and the data file."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

OUTER_INIT = "import inner\nVALUE = inner.VALUE + 1\n"
INNER = "VALUE = 41\n"


def main() -> None:
    directory = Path(sys.argv[1]).resolve()
    (directory / "outer").mkdir(parents=True, exist_ok=True)
    (directory / "outer" / "__init__.py").write_text(OUTER_INIT)
    (directory / "inner.py").write_text(INNER)
    sys.path.insert(0, str(directory))
    sys.dont_write_bytecode = True  # sources, not .pyc files: the files read are the ones above
    import outer  # noqa: F401  (reads outer/__init__.py, which imports inner: reads inner.py)
    import outer as again  # noqa: F401  (already loaded: no I/O, no event)
    data = directory / "data.txt"
    data.write_text("data\n")
    with open(data) as file:  # outside any import: its reads have a stack, main's
        file.read()

    print(json.dumps({"pid": os.getpid(), "dir": str(directory),
                      "files": {"outer": str(directory / "outer" / "__init__.py"), "inner": str(directory / "inner.py")},
                      "data": str(data)}),
          flush=True)


if __name__ == "__main__":
    main()
