"""Reads FILE whole in 64 KiB reads, with os.read, and says how many reads it made and how
many bytes it got: {"pid", "tid", "reads", "bytes"}."""

from __future__ import annotations

import json
import os
import sys
import threading

fd = os.open(sys.argv[1], os.O_RDONLY)
reads = total = 0
while chunk := os.read(fd, 65536):
    reads += 1
    total += len(chunk)
reads += 1  # the last read, at end of file
os.close(fd)
print(json.dumps({"pid": os.getpid(), "tid": threading.get_native_id(), "reads": reads, "bytes": total}), flush=True)
