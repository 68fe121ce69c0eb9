"""Compiles done by another machine for this one, through a shared spool directory.

Under software emulation (the kernel matrix's qemu guests) clang takes minutes per compile.
The compile's inputs are the probes' text and flags, and the flags already carry everything
taken from this kernel (BTF offsets, tracepoint formats), so a host with bcc and the same
header tree makes the same object. With IOOBSERVE_COMPILE_SPOOL=DIR, a cache miss writes
DIR/<key>.request and waits for the host's DIR/<key>.json (an object-cache entry) or
DIR/<key>.error; `python -m ioobserve.probes.build.compile_spool answer REQUEST` is the host's side.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from ioobserve.probes.build.headers import Headers
from ioobserve.probes.build.object_cache import CompiledObject, extract, lookup, store

ENV = "IOOBSERVE_COMPILE_SPOOL"
WAIT_S = 900.0  # a host compile of the whole probe set takes about 5 s; a busy host, longer
POLL_S = 0.2


def spool_dir() -> Path | None:
    """The spool directory asked for, if any."""
    value = os.environ.get(ENV)
    return Path(value) if value else None


def compile_remotely(directory: Path, key: str, text: str, cflags: list[str], headers: Headers) -> CompiledObject:
    """The object the host compiled for this request; raises RuntimeError with the host's
    reason, or when no answer comes in time."""
    request = {"key": key, "text": text, "cflags": cflags, "headers": str(headers.path) if headers.path else None,
               "release": os.uname().release}
    try:
        _write_atomically(directory / f"{key}.request", json.dumps(request))
    except OSError as exc:
        raise RuntimeError(f"cannot ask for a compile through {directory} ({ENV}): {exc.strerror or exc}") from exc
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        compiled = lookup(key, directory)
        if compiled is not None:
            return compiled
        error = directory / f"{key}.error"
        if error.exists():
            raise RuntimeError(f"the spool's host could not compile the probes: {error.read_text().strip()}")
        time.sleep(POLL_S)
    raise RuntimeError(f"no compile came back through {directory} within {WAIT_S:.0f} s ({ENV})")


def answer(request_path: Path) -> None:
    """Compile one request here and leave its entry (or its error) beside it."""
    from ioobserve.probes.build.compile import ProbeError, compile_bpf  # deferred: it imports bcc

    request = json.loads(request_path.read_text())
    key = request["key"]
    directory = request_path.parent
    headers = Headers(Path(request["headers"]) if request["headers"] else
                      Path("/lib/modules") / request["release"] / "build", False, "the guest's")
    try:
        bpf = compile_bpf(text=request["text"], cflags=request["cflags"], headers=headers)
    except ProbeError as exc:
        _write_atomically(directory / f"{key}.error", str(exc))
        raise
    try:
        store(extract(bpf, key), directory, keep=None)
    finally:
        bpf.cleanup()


def _write_atomically(path: Path, text: str) -> None:
    fd, staging = tempfile.mkstemp(prefix=".staging-", dir=path.parent)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.replace(staging, path)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "answer":
        sys.exit("usage: python -m ioobserve.probes.build.compile_spool answer REQUEST")
    answer(Path(sys.argv[2]))
