"""Per-job traces for `serve`: the jobs being recorded, the kernel told to let their cgroups'
events out, and a TraceWriter per job (<record-dir>/job-<id>/, rotated like `record`'s).

A job is recorded from a rule in the config (`record-job`, "*" for every Slurm job) or
between the scheduler's prolog and epilog (`start` / `stop`). Its cgroups may not exist yet
when the prolog runs, so `discover` (called every second) looks again for new ones.

A job's trace on a failing disk (full, read-only, I/O errors) is said in the log and resumes
in a new file when the disk takes writes again (ioobserve.trace.write.writer); the service, its
metrics and its socket go on meanwhile."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import polars as pl

from ioobserve.collect.traces import StartRecord, open_trace
from ioobserve.context.cgroups import CgroupTable
from ioobserve.data import schema as s
from ioobserve.data.model import BatchTables
from ioobserve.data.naming import with_job_context
from ioobserve.plumbing.deadline import DEFAULT_STOP_TIMEOUT_S, StopDeadline
from ioobserve.sinks.base import Sink
from ioobserve.trace.output import OutputError, check_output_dir
from ioobserve.trace.write.disk import RESUME_CHECK_S, describe_failure
from ioobserve.trace.write.writer import TraceWriter

EVERY_JOB = "*"
_JOB_ID = re.compile(r"^[0-9A-Za-z_.-]{1,64}$")


class JobError(Exception):
    """A job command that cannot be carried out; the message says why."""


def check_job_id(job: str) -> str:
    """A job id as Slurm writes it (digits, or letters, '_', '.', '-' for arrays and others)."""
    if not _JOB_ID.match(job):
        raise JobError(f"job {job!r}: a job id is 1 to 64 letters, digits, '_', '.' or '-'")
    return job


class JobRecorder(Sink):
    """A collector sink: each recorded job's events into its own trace."""

    def __init__(self, probes, directory: Path, rules: list[str], rotate_bytes: int | None = None,
                 rotate_seconds: float | None = None, cgroups: CgroupTable | None = None,
                 stop_timeout: float = DEFAULT_STOP_TIMEOUT_S, log=print) -> None:
        self.probes = probes
        self.stop_timeout = stop_timeout  # how long closing one job's trace may take
        self.log = log
        self.directory = directory
        self.rules = set(rules)  # jobs recorded whenever they run
        self.rotate_bytes, self.rotate_seconds = rotate_bytes, rotate_seconds
        self.cgroups = cgroups if cgroups is not None else CgroupTable()
        self.writers: dict[str, TraceWriter] = {}
        self._asked: set[str] = set()  # started by a command, until stopped
        self._emitting: dict[int, str] = {}  # cgroup id -> job, let out of the kernel
        self._processes: dict = {}  # every process seen (pid -> Process): a new writer describes them
        self.unopened: dict[str, int] = {}  # job -> events lost because its trace could not be created
        self._retry_at: dict[str, float] = {}  # job -> when creating its trace may be tried again
        self._lock = threading.Lock()  # commands and discovery (other threads) against the sink calls

    def wanted(self, job: str | None) -> bool:
        """Whether a job is being recorded now."""
        return job is not None and (job in self._asked or job in self.rules or EVERY_JOB in self.rules)

    def start(self, job: str) -> None:
        """Record this job from now until stop (the prolog's command)."""
        with self._lock:
            self._asked.add(check_job_id(job))
        self.discover()

    def stop(self, job: str) -> Path | None:
        """Stop recording a job and close its trace (the epilog's command); returns the trace."""
        with self._lock:
            self._asked.discard(check_job_id(job))
            if self.wanted(job):  # a rule still records it
                return None
            for cgroup_id in [c for c, j in self._emitting.items() if j == job]:
                self.probes.tables.emit_cgroup(cgroup_id, False)
                del self._emitting[cgroup_id]
            writer = self.writers.pop(job, None)
        if writer is None:
            return None
        deadline = StopDeadline(self.stop_timeout)
        deadline.start()
        writer.close(deadline)
        return writer.path

    def discover(self) -> None:
        """Let out of the kernel the events of recorded jobs' cgroups not seen before, and take
        out those that are gone (the kernel's set is bounded: a rule like "*" would fill it);
        the table forgets every removed cgroup (this table only finds jobs: nothing looks up
        a removed one later), so months of jobs leave it no larger."""
        with self._lock:
            gone = self.cgroups.gone(list(self.cgroups.by_id))
            for cgroup_id in gone & self._emitting.keys():
                self.probes.tables.emit_cgroup(cgroup_id, False)
                del self._emitting[cgroup_id]
            self.cgroups.forget(gone)
            if not (self._asked or self.rules):
                return
            tops = self.cgroups.ids_where(lambda ctx: self.wanted(ctx.job))
            for cgroup_id in tops - self._emitting.keys():
                self._emitting[cgroup_id] = self.cgroups.by_id[cgroup_id].job
                self.probes.tables.emit_cgroup(cgroup_id, True)

    def writing(self) -> set[Path]:
        """The files being written now (each recorded job's current part)."""
        with self._lock:
            return {writer.paths[-1] for writer in self.writers.values() if writer.paths}

    def reopen(self) -> None:
        """SIGHUP: every job's trace starts a new part file with its next batch."""
        with self._lock:
            for writer in self.writers.values():
                writer.rotate_soon()
            self.log(f"ioobserve serve: SIGHUP: {len(self.writers)} job trace(s) start a new file with their next events",
                     flush=True)

    def _writer(self, job: str) -> TraceWriter:
        writer = self.writers.get(job)
        if writer is None:
            directory = check_output_dir(self.directory / f"job-{job}")
            writer = self.writers[job] = open_trace(
                self.probes, directory, StartRecord(["ioobserve", "serve"], self.probes.layers, job=job),
                rotate_bytes=self.rotate_bytes, rotate_seconds=self.rotate_seconds,
                on_trouble=lambda message: self.log(f"ioobserve serve: job {job}: {message}", flush=True))
            if self._processes:
                writer.processes(list(self._processes.values()))
        return writer

    # The collector's sink calls (its thread).

    def processes(self, changed) -> None:
        """Kept, and passed on: a job's trace describes its processes."""
        for process in changed:
            self._processes[process.pid] = process
        with self._lock:
            for writer in self.writers.values():
                writer.processes(changed)

    def events(self, frame: pl.DataFrame, tables: BatchTables) -> None:
        """Each recorded job's share of the batch into its trace, with the batch's tables."""
        frame = with_job_context(frame, tables)
        jobs = frame.get_column(s.JOB).drop_nulls().unique().to_list()
        with self._lock:  # wanted() under the lock: a job stopped meanwhile gets no new trace
            for job in filter(self.wanted, jobs):
                mine = frame.filter(pl.col(s.JOB) == job)
                if time.monotonic() < self._retry_at.get(job, 0.0):
                    self.unopened[job] = self.unopened.get(job, 0) + mine.height
                    continue
                try:
                    self._writer(job).events(mine, tables)
                except OutputError as exc:  # the directory went bad (a symlink, others may write): not fixed by waiting
                    self.log(f"ioobserve serve: job {job}: {exc}; its recording stops", flush=True)
                    self._asked.discard(job)
                    self.rules.discard(job)
                except OSError as exc:  # full, read-only, failing: tried again in a while, its events counted
                    self.unopened[job] = self.unopened.get(job, 0) + mine.height
                    if job not in self._retry_at:
                        self.log(f"ioobserve serve: job {job}: cannot create its trace in {self.directory}: "
                                 f"{describe_failure(exc)}; events are counted as lost until it can", flush=True)
                    self._retry_at[job] = time.monotonic() + RESUME_CHECK_S
                    continue
                if self._retry_at.pop(job, None) is not None:
                    self.log(f"ioobserve serve: job {job}: recording again, in {self.writers[job].path} "
                             f"({self.unopened.get(job, 0):,} events lost meanwhile)", flush=True)

    def lost(self, ts_ns: int, counts: dict[str, int]) -> None:
        """Every open trace says what the node lost (the kernel does not know whose it was)."""
        with self._lock:
            for writer in self.writers.values():
                writer.lost(ts_ns, counts)

    def throttled(self, ts_ns: int, mark: dict) -> None:
        """A throttle goes into its job's open trace (marks of no job recorded go nowhere)."""
        with self._lock:
            writer = self.writers.get(mark.get("job") or "")
            if writer is not None:
                writer.throttled(ts_ns, mark)

    def forget(self, pids: list[int]) -> None:
        """Exited processes."""
        for pid in pids:
            self._processes.pop(pid, None)
        with self._lock:
            for writer in self.writers.values():
                writer.forget(pids)

    def counters(self, counts: dict[str, int]) -> None:
        """Passed on."""
        with self._lock:
            for writer in self.writers.values():
                writer.counters(counts)

    def abandon(self) -> None:
        """The stop deadline passed: every job's trace drops what it holds."""
        for writer in list(self.writers.values()):
            writer.abandon()

    def close(self, deadline: StopDeadline | None = None) -> None:
        """Close every job's trace (the daemon is stopping), by the deadline."""
        with self._lock:
            writers, self.writers = self.writers, {}
        for writer in writers.values():
            writer.close(deadline)
