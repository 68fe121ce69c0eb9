"""The capture layers a recording can switch on, and the `--layers` option's grammar."""

from __future__ import annotations

SYSCALL, BLOCK, CACHE, LIBC, VFS, HDF5, MPIIO = "syscall", "block", "cache", "libc", "vfs", "hdf5", "mpiio"
PYTHON = "python"  # the Python stack of each syscall a CPython process makes
IO_URING, AIO = "io_uring", "aio"  # asynchronous requests: I/O no read or write syscall carries
NET = "net"  # the syscalls on Internet sockets (opt-in)
TLS = "tls"  # libssl's reads and writes, plaintext (opt-in)
KNOWN = (SYSCALL, IO_URING, AIO, BLOCK, CACHE, PYTHON, NET, TLS, LIBC, VFS, HDF5, MPIIO)
LIBRARY_LAYERS = (LIBC, HDF5, MPIIO, TLS)  # uprobes on shared libraries
DEFAULT = frozenset({SYSCALL, IO_URING, AIO, BLOCK, CACHE, PYTHON})


class LayerError(ValueError):
    """A --layers value that names no layer, or removes the syscall layer."""


def parse_layers(text: str | None) -> frozenset[str]:
    """The layers of `--layers`: names add to the defaults, `no-NAME` removes one, `all` adds
    every layer; e.g. "libc", "libc,no-cache", "all,no-vfs". The TLS layer brings the net
    layer: its calls' Python frames and sockets come from the socket calls beneath them."""
    layers = set(DEFAULT)
    for item in (text or "").split(","):
        name = item.strip().lower()
        if not name:
            continue
        removing = name.startswith("no-")
        name = name.removeprefix("no-")
        if name == "all" and not removing:
            layers.update(KNOWN)
            continue
        if name not in KNOWN:
            raise LayerError(f"--layers: unknown layer {item.strip()!r}; known: {', '.join(KNOWN)} (and all, no-NAME)")
        if removing and name == SYSCALL:
            raise LayerError("--layers: the syscall layer cannot be switched off (every other layer links to it)")
        if removing:
            layers.discard(name)
        else:
            layers.add(name)
    if TLS in layers:
        layers.add(NET)
    return frozenset(layers)
