"""Issue N preadv calls of 64 bytes on one file as fast as Python can; print N."""

import os
import sys

n, path = int(sys.argv[1]), sys.argv[2]
with open(path, "wb") as handle:
    handle.write(b"x" * 4096)
fd = os.open(path, os.O_RDONLY)
buf = bytearray(64)
for _ in range(n):
    os.preadv(fd, [buf], 0)
os.close(fd)
print(n, flush=True)
