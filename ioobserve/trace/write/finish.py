"""Finishing closed trace files in the background: each gets its columnar copy
(ioobserve.trace.read.columnar), after being recompressed (ioobserve.trace.write.compact) if the writer
deflated some of it in a hurry (at a fast level, while it was behind), in a
detached process at low CPU priority (as niced as the recorder's own work) and the idle I/O
class, so that the recorder does not wait for it and the jobs it watches do not feel it.

While a file is being finished, `<trace>.finishing` exists (made before the process starts,
removed when it is done with that file), locked by the finisher until it exits. A reader that
finds it waits for the lock and reads the copy the finisher built, instead of building a
second one beside it (`wait_for_finisher`); a finisher that died released its lock with it. A
finisher that fails leaves the trace as it was, and the copy is built on first read instead.

The finisher process runs ioobserve.cli.finisher (`python -m ioobserve.cli.finisher TRACE...`),
which also appends each trace's lineage (ioobserve.analysis.provenance): the analysis sits
above the trace package, so its step is handed to `finish` from there.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

MARK_SUFFIX = ".finishing"
FINISHER = "ioobserve.cli.finisher"  # the module the finisher process runs
RECOMPRESS = "--recompress"  # argument: recompress the traces before building their copies
FINISHER_NICE = 10  # the recorder's own (ioobserve.collect.priority): at 19 it gets next to no CPU while a job holds every core
_IOPRIO_SET = 251  # x86-64; elsewhere the call fails and only the CPU priority is lowered
_IOPRIO_WHO_PROCESS, _IOPRIO_CLASS_IDLE = 1, 3


def mark_path(trace: Path) -> Path:
    """The file that exists while a trace is being finished."""
    trace = Path(trace)
    return trace.with_name(trace.name + MARK_SUFFIX)


def finish_later(trace: Path, recompress: bool = False) -> int | None:
    """Start finishing a closed trace in the background; the finisher's pid (None if it could
    not start: the trace stays as written, which is all a reader needs)."""
    from ioobserve.trace.output import OutputError, create_private_file

    trace = Path(trace)
    try:
        mark = create_private_file(trace.parent, mark_path(trace).name)
    except (OSError, OutputError):
        return None
    try:
        fcntl.flock(mark, fcntl.LOCK_EX)  # the finisher holds it from here (it inherits the fd) until it exits
        process = subprocess.Popen(
            [sys.executable, "-m", FINISHER, *([RECOMPRESS] if recompress else []), str(trace)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            close_fds=True, pass_fds=(mark,),
        )
    except OSError:
        mark_path(trace).unlink(missing_ok=True)
        return None
    finally:
        os.close(mark)
    return process.pid


def wait_for_finisher(trace: Path) -> bool:
    """Wait while a finisher works on the trace; whether one was (its copy is then built,
    unless it failed)."""
    try:
        mark = os.open(mark_path(trace), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False  # none: nothing to wait for
    try:
        fcntl.flock(mark, fcntl.LOCK_SH)  # returns when the finisher is done or dead
    except OSError:
        return False
    finally:
        os.close(mark)
    return True


def finish(trace: Path, recompress: bool = False, then: Callable[[Path], object] | None = None) -> None:
    """Recompress a closed trace if asked, build its copy, then run `then` on it (the
    finisher's provenance step); the mark goes in every case, after them all."""
    from ioobserve.trace.read.columnar import build_copy
    from ioobserve.trace.write.compact import compact

    try:
        if recompress:
            compact(trace)
        build_copy(trace)
        if then is not None:
            then(trace)
    finally:
        mark_path(trace).unlink(missing_ok=True)


def low_priority() -> None:
    """At least FINISHER_NICE (the recorder's, which it inherits) and the idle I/O class, each where permitted."""
    try:
        os.setpriority(os.PRIO_PROCESS, 0, max(os.getpriority(os.PRIO_PROCESS, 0), FINISHER_NICE))
    except OSError:
        pass
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall(_IOPRIO_SET, _IOPRIO_WHO_PROCESS, 0, _IOPRIO_CLASS_IDLE << 13)
