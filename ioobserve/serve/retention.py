"""How long `serve` keeps its job traces: files older than `retain-days` go, then the oldest
while `record-dir` holds more than `retain-gb`. A trace goes with its companions (index,
Parquet copy and its key); a file being written never goes, nor anything that is not a plain
file of ours inside a job's directory (no symlink is followed)."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

TRACE_SUFFIX = ".pfw.gz"
COMPANIONS = (".ioidx", ".parquet", ".parquet.key")  # appended to a trace's name
JOB_DIR_PREFIX = "job-"


@dataclass(frozen=True)
class KeptTrace:
    """One trace file of a job's directory and what it holds on disk, companions included."""

    path: Path
    mtime: float
    size: int


def job_traces(record_dir: Path) -> list[KeptTrace]:
    """Every trace in record-dir's job directories, oldest first."""
    found = []
    try:
        jobs = [entry for entry in os.scandir(record_dir) if entry.name.startswith(JOB_DIR_PREFIX)
                and entry.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    for job in jobs:
        try:
            entries = {entry.name: entry for entry in os.scandir(job.path) if entry.is_file(follow_symlinks=False)}
        except OSError:
            continue
        for name, entry in entries.items():
            if not name.endswith(TRACE_SUFFIX):
                continue
            try:
                info = entry.stat(follow_symlinks=False)
                size = info.st_size + sum(entries[name + c].stat(follow_symlinks=False).st_size
                                          for c in COMPANIONS if name + c in entries)
            except OSError:
                continue  # removed meanwhile
            found.append(KeptTrace(Path(entry.path), info.st_mtime, size))
    return sorted(found, key=lambda trace: (trace.mtime, str(trace.path)))


def sweep(record_dir: Path, retain_days: float | None, retain_bytes: int | None, writing: set[Path],
          now: float) -> list[Path]:
    """Remove what the limits leave out (never a trace in `writing`); the traces removed."""
    traces = [trace for trace in job_traces(record_dir) if trace.path not in writing]
    total = sum(trace.size for trace in job_traces(record_dir))
    removed = []
    for trace in traces:
        too_old = retain_days is not None and now - trace.mtime > retain_days * 86400
        too_big = retain_bytes is not None and total > retain_bytes
        if not (too_old or too_big):
            continue
        if _remove(trace.path):
            removed.append(trace.path)
            total -= trace.size
    return removed


def _remove(trace: Path) -> bool:
    """The trace and its companions, each only if a plain file."""
    gone = False
    for path in (trace, *(trace.with_name(trace.name + c) for c in COMPANIONS)):
        try:
            if stat.S_ISREG(os.lstat(path).st_mode):
                path.unlink()
                gone = gone or path == trace
        except OSError:
            continue  # gone meanwhile, or not ours to remove: the trace stays listed
    return gone
