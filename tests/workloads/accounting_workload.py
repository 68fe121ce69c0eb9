"""Known read/write counts for the accounting cross-check.

`files PATH READS WRITES`: WRITES pwrites of 64 bytes, then READS preads, on PATH.
`proc READS`: READS reads of /proc/self/stat, a pseudo-file ioobserve does not trace (so the
kernel counts reads the trace does not have). Prints {"pid", "reads", "writes"}.
"""

from __future__ import annotations

import json
import os
import sys

mode = sys.argv[1]
if mode == "files":
    path, reads, writes = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o600)
    for i in range(writes):
        os.pwrite(fd, b"w" * 64, 64 * i)
    for i in range(reads):
        os.pread(fd, 64, 64 * (i % writes))
else:
    reads, writes = int(sys.argv[2]), 0
    fd = os.open("/proc/self/stat", os.O_RDONLY)
    for _ in range(reads):
        os.pread(fd, 512, 0)
os.close(fd)
print(json.dumps({"pid": os.getpid(), "reads": reads, "writes": writes}), flush=True)
