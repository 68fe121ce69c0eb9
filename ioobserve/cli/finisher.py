"""The finisher process (ioobserve.trace.write.finish): each closed trace recompressed if asked,
given its columnar copy, then its lineage as provenance records (ioobserve.analysis.provenance),
at low priority. Run as `python -m ioobserve.cli.finisher [--recompress] TRACE...`; detached,
so nobody reads what it prints: a trace it fails on stays as written.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ioobserve.analysis.provenance import add_provenance
from ioobserve.trace.write.finish import RECOMPRESS, finish, low_priority


def main(argv: list[str]) -> int:
    """Finish each trace named; 1 if any failed."""
    low_priority()
    failed = 0
    recompress = RECOMPRESS in argv
    for name in argv:
        if name == RECOMPRESS:
            continue
        try:
            finish(Path(name), recompress, then=add_provenance)
        except Exception:  # noqa: BLE001 - the trace stays as written; the copy is built on first read
            failed = 1
    return failed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
