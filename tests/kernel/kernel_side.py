"""A matrix test in two halves: its kernel side (probes, workloads, recordings) and its checks.

A test marked `matrix` calls the `kernel_side` fixture once, `kernel_side(record, *args)`:
`record(side, *args)` does everything that depends on the kernel, leaves its traces under
`side.out` (what the checks read), works in `side.scratch` (the workloads' own files, which stay
where they ran), and returns what the checks need as JSON (`ran(done)` for a finished command;
a path becomes its text). The test then checks the returned `Recorded` with Polars and the
analysis.

- In the suite on this machine both halves run here, one after the other.
- In a guest of the kernel matrix (IOOBSERVE_MATRIX_PHASE=record) only the kernel side runs:
  the facts go to `out/facts.json` under IOOBSERVE_MATRIX_RECORDINGS (the guest's share, which
  the guest mounts at the host's own path, so that every path in the facts holds on both sides)
  and the test ends there, passed.
- On the host after the guest (IOOBSERVE_MATRIX_PHASE=check) `record` does not run: the facts
  and traces that guest left are checked at native speed, and so every assertion is still made
  for each kernel, without emulating Polars and the analysis.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

PHASE = "IOOBSERVE_MATRIX_PHASE"  # "record" in a guest, "check" on the host; unset in the suite
RECORDINGS = "IOOBSERVE_MATRIX_RECORDINGS"  # where each test's kernel side leaves its facts and traces
RECORD, CHECK = "record", "check"
FACTS = "facts.json"


class KernelSideDone(Exception):
    """Ends a matrix test in a guest once its kernel side is recorded (its checks run on the host)."""


def phase() -> str | None:
    """The matrix's phase this process runs in (None: the ordinary suite, both halves)."""
    return os.environ.get(PHASE) or None


def ran(done: subprocess.CompletedProcess) -> dict:
    """A finished command as facts: its exit status and output."""
    return {"returncode": done.returncode, "stdout": done.stdout, "stderr": done.stderr}


def as_completed(facts: dict) -> subprocess.CompletedProcess:
    """The command that `ran` described, as the checks read one."""
    return subprocess.CompletedProcess([], facts["returncode"], facts["stdout"], facts["stderr"])


@dataclass(frozen=True)
class Side:
    """Where a kernel side works: `out` travels to the checks, `scratch` stays."""

    out: Path
    scratch: Path


@dataclass(frozen=True)
class Recorded:
    """What a test's kernel side left: its directory and its facts."""

    out: Path
    facts: dict

    def __getitem__(self, key: str):
        return self.facts[key]

    def traces(self, name: str = "trace") -> list[Path]:
        """The trace files the recorder wrote into `out/name`."""
        return sorted((self.out / name).glob("*.pfw.gz"))

    def done(self, key: str | None = None) -> subprocess.CompletedProcess:
        """The command the kernel side ran (its facts are `ran(done) | {...}`), or the one kept
        under `key`."""
        return as_completed(self.facts if key is None else self.facts[key])


def recording_key(what: str) -> str:
    """A directory name for a test's (or a shared) kernel side: readable, and unique by the
    digest of its whole name."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", what.split("::", 1)[-1])[-80:]
    return f"{readable}-{hashlib.sha256(what.encode()).hexdigest()[:10]}"


_SHARED: dict[str, Recorded] = {}  # the suite's kernel sides that several tests check (share=True)


class KernelSide:
    """The fixture's callable: runs (or, on the host after a guest, reads back) one kernel side."""

    def __init__(self, nodeid: str, new_directory: Callable[[], Path]):
        self.nodeid = nodeid
        self.new_directory = new_directory
        self.called = False

    def __call__(self, record: Callable[..., dict], *args, share: bool = False) -> Recorded:
        """`record(side, *args)`'s facts, with its `out`, as this phase has them. share: the
        first test's run of the same record and arguments serves the next ones, in the suite and
        in a guest alike (tests that check one recording in several ways); the arguments name the
        recording by their repr, the same in the guest and on the host (no object addresses)."""
        if self.called:
            raise AssertionError(f"{self.nodeid} calls kernel_side twice: one kernel side per test (the guest stops after it)")
        self.called = True
        current = phase()
        what = f"{record.__module__}.{record.__qualname__}{args!r}" if share else self.nodeid
        if current is None:
            if share and what in _SHARED:
                return _SHARED[what]
            side = Side(self.new_directory(), self.new_directory())
            recorded = Recorded(side.out, json.loads(json.dumps(record(side, *args), default=str)))  # JSON, as between guest and host
            if share:
                _SHARED[what] = recorded
            return recorded
        out = Path(os.environ[RECORDINGS]) / recording_key(what)
        if current == CHECK:
            if not (out / FACTS).is_file():
                raise AssertionError(f"the guest left no recording for {self.nodeid} in {out}: its kernel side failed "
                                     "there (the guest's lines above say how)")
            return Recorded(out, json.loads((out / FACTS).read_text()))
        if share and (out / FACTS).is_file():
            raise KernelSideDone(f"{self.nodeid}: recorded in {out} by an earlier test; checked on the host")
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        facts = record(Side(out, self.new_directory()), *args)
        partial = out / f"{FACTS}.part"
        partial.write_text(json.dumps(facts, default=str))
        partial.rename(out / FACTS)  # whole or absent: a guest that died mid-write leaves none
        raise KernelSideDone(f"{self.nodeid}: recorded in {out}; checked on the host")
