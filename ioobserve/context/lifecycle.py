"""What fork, exec and exit records and /proc tell the context timeline and the worker
ordinals (the process table takes the same records first: both read the tree from it)."""

from __future__ import annotations

from ioobserve.context.launch import Launch, launch_from_environ, read_environ
from ioobserve.context.timeline import ContextTimeline
from ioobserve.context.workers import WorkerOrdinals
from ioobserve.data import events as ev
from ioobserve.data.decode import EnvRecord, ProcRecord


def apply_lifecycle(timeline: ContextTimeline, workers: WorkerOrdinals, procs: list[ProcRecord],
                    envs: list[EnvRecord]) -> None:
    """Feed fork, exec and exit records, in order, with the environments sent beside the execs."""
    environ = {(env.pid, env.ts_ns): env for env in envs}
    for rec in procs:
        launch = _launch(environ.get((rec.pid, rec.ts_ns)), rec.pid) if rec.kind == ev.PROC_EXEC else None
        apply_record(timeline, workers, rec, launch)


def apply_record(timeline: ContextTimeline, workers: WorkerOrdinals, rec: ProcRecord, launch: Launch | None = None) -> None:
    """One fork, exec (launch: its environment's launch context, None to keep the inherited one)
    or exit record."""
    if rec.kind == ev.PROC_FORK:
        workers.fork(rec.pid, rec.ppid, rec.ts_ns)
        timeline.fork(rec.pid, rec.ppid, rec.ts_ns)
    elif rec.kind == ev.PROC_EXEC:
        # The ordinal first: it reads the context before the exec's change, and goes into that change.
        timeline.exec(rec.pid, rec.ts_ns, launch, workers.exec(rec.pid, rec.ppid, rec.ts_ns, rec.argv))
    elif rec.kind == ev.PROC_EXIT:
        workers.exit(rec.pid)


def _launch(env: EnvRecord | None, pid: int) -> Launch | None:
    """The launch context of an exec's environment; from /proc if the kernel's copy was lost
    or cut short (None if the process is gone too: it keeps what it inherited)."""
    if env is not None and not env.truncated:
        return launch_from_environ(env.data)
    data = read_environ(pid)
    if data is None:
        return launch_from_environ(env.data) if env is not None else None
    return launch_from_environ(data)


def seed_from_proc(timeline: ContextTimeline, pids) -> None:
    """The launch context of processes alive when recording began."""
    for pid in pids:
        data = read_environ(pid)
        if data:
            timeline.seed(pid, launch_from_environ(data))
