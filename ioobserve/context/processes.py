"""The process table: lineage, names and command lines, from fork/exec/exit records and /proc.
It is the one process tree: the context timeline and the worker ordinals read theirs from it."""

from __future__ import annotations

from pathlib import Path

from ioobserve.data import events as ev
from ioobserve.data.decode import ProcRecord
from ioobserve.data.model import Process

PROC = Path("/proc")


def read_proc(pid: int, proc: Path = PROC) -> Process | None:
    """A live process as /proc shows it, or None if it is gone."""
    base = proc / str(pid)
    try:
        stat = (base / "stat").read_text()
        cmdline = (base / "cmdline").read_bytes()
    except OSError:
        return None
    # comm may contain spaces and parentheses: it ends at the last ')'.
    comm = stat[stat.index("(") + 1 : stat.rindex(")")]
    ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
    try:
        exe = str((base / "exe").readlink())
    except OSError:
        exe = ""
    argv = tuple(a.decode("utf-8", "backslashreplace") for a in cmdline.rstrip(b"\0").split(b"\0")) if cmdline else ()
    return Process(pid=pid, ppid=ppid, comm=comm, exe=exe, cmdline=argv, seeded=True)


class ProcessTable:
    """Processes by pid, kept up to date from lifecycle records."""

    def __init__(self) -> None:
        self.by_pid: dict[int, Process] = {}

    def seed_from_proc(self, proc: Path = PROC) -> None:
        """Add every live process not already known (those born before recording began)."""
        for entry in proc.iterdir():
            if entry.name.isdigit() and int(entry.name) not in self.by_pid:
                found = read_proc(int(entry.name), proc)
                if found:
                    self._add(found)

    def _add(self, process: Process) -> Process:
        self.by_pid[process.pid] = process
        parent = self.by_pid.get(process.ppid)
        if parent is not None and process.pid not in parent.children:
            parent.children.append(process.pid)
        return process

    def get(self, pid: int) -> Process:
        """The process, learning it from /proc (or as unknown) the first time it is asked for."""
        found = self.by_pid.get(pid)
        if found is None:
            found = self._add(read_proc(pid) or Process(pid=pid))
        return found

    def apply(self, records: list[ProcRecord]) -> list[Process]:
        """Apply fork/exec/exit records in order; returns the processes whose identity changed."""
        changed: list[Process] = []
        for rec in records:
            if rec.kind == ev.PROC_FORK:
                parent = self.get(rec.ppid)
                child = Process(
                    pid=rec.pid, ppid=rec.ppid, comm=rec.comm, exe=parent.exe, cmdline=parent.cmdline,
                    start_ns=rec.ts_ns, uid=rec.uid, cgroup_id=rec.cgroup_id,
                )
                changed.append(self._add(child))
            elif rec.kind == ev.PROC_EXEC:
                process = self.get(rec.pid)
                process.comm, process.exe, process.cmdline = rec.comm, rec.exe, rec.argv
                process.uid, process.cgroup_id = rec.uid, rec.cgroup_id
                if not process.ppid:
                    process.ppid = rec.ppid
                changed.append(process)
            elif rec.kind == ev.PROC_EXIT:
                process = self.get(rec.pid)
                process.exit_ns, process.exit_code = rec.ts_ns, rec.exit_code
        return changed

    def forget_exited(self, before_ns: int) -> list[int]:
        """Drop processes that exited before `before_ns` (monotonic), so a long recording on a
        busy node does not grow without bound; returns their pids."""
        gone = [pid for pid, p in self.by_pid.items() if p.exit_ns is not None and p.exit_ns < before_ns]
        for pid in gone:
            parent = self.by_pid.get(self.by_pid.pop(pid).ppid)
            if parent is not None and pid in parent.children:  # a long-lived parent keeps only children still of use
                parent.children.remove(pid)
        return gone

    def forked_after(self, pid: int, after_ns: int) -> list[tuple[int, int]]:
        """(child, fork time) of the children of `pid` seen forking after `after_ns`, oldest first."""
        parent = self.by_pid.get(pid)
        found = []
        for child in parent.children if parent is not None else ():
            process = self.by_pid.get(child)
            # A reused pid may still be listed under its old parent: it counts under its new one.
            if process is not None and process.ppid == pid and process.start_ns is not None and process.start_ns > after_ns:
                found.append((child, process.start_ns))
        return sorted(found, key=lambda forked: forked[1])

    def ppids(self, pids) -> dict[int, int]:
        """pid -> ppid for the given pids."""
        return {int(pid): self.get(int(pid)).ppid for pid in pids}

    def descendants(self, pid: int) -> set[int]:
        """pid and every process known to descend from it."""
        found, todo = set(), [pid]
        while todo:
            current = todo.pop()
            if current not in found:
                found.add(current)
                todo.extend(self.by_pid.get(current, Process(current)).children)
        return found
