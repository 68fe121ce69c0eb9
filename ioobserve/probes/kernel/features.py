"""What this kernel offers the probes, read off the running system: tracefs and its
tracepoints, kprobes, uprobes and lockdown. A leaf: every layer's
attach module and the doctor ask here."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

TRACEFS_PATHS = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))
LOCKDOWN = Path("/sys/kernel/security/lockdown")


def tracefs_dir(mount: bool = True) -> Path | None:
    """The tracefs directory with events/, mounting tracefs if allowed and needed."""
    for path in TRACEFS_PATHS:
        if (path / "events").is_dir():
            return path
    if mount and os.geteuid() == 0 and TRACEFS_PATHS[0].is_dir():
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACEFS_PATHS[0])], check=True, capture_output=True, timeout=10)
        if (TRACEFS_PATHS[0] / "events").is_dir():
            return TRACEFS_PATHS[0]
    return None


def first_tracepoint(*names: str) -> str | None:
    """The first of these tracepoints ("group/name") this kernel has."""
    tracefs = tracefs_dir()
    for name in names:
        if tracefs and (tracefs / "events" / name).is_dir():
            return name
    return None


def kprobes_available() -> bool:
    """Whether this kernel has kprobes (CONFIG_KPROBES and kprobe events)."""
    tracefs = tracefs_dir()
    return bool(tracefs and (tracefs / "kprobe_events").exists())


def uprobes_available() -> bool:
    """Whether this kernel has uprobes (the library layers' probes)."""
    tracefs = tracefs_dir()
    return bool(tracefs and (tracefs / "uprobe_events").exists())


def lockdown_mode(path: Path = LOCKDOWN) -> str | None:
    """The kernel's lockdown mode ("none", "integrity", "confidentiality"), None if unknown."""
    try:
        text = path.read_text()
    except OSError:
        return None
    chosen = [word.strip("[]") for word in text.split() if word.startswith("[")]
    return chosen[0] if chosen else None
