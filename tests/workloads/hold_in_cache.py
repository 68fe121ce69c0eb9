"""Holds FILE in the page cache: maps it shared, locks its pages in memory (root), prints
"held", and keeps them there until its stdin closes, so that no memory pressure on a busy
machine evicts them meanwhile."""

from __future__ import annotations

import ctypes
import mmap
import os
import sys

libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
libc.mlock.argtypes = (ctypes.c_void_p, ctypes.c_size_t)

fd = os.open(sys.argv[1], os.O_RDONLY)
size = os.fstat(fd).st_size
# Python's mmap gives no address for a read-only mapping, and a private one would lock copies.
address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
if address in (None, ctypes.c_void_p(-1).value) or libc.mlock(address, size) != 0:
    sys.exit(f"hold_in_cache: cannot map and lock {sys.argv[1]}: {os.strerror(ctypes.get_errno())}")
print("held", flush=True)
sys.stdin.read()
