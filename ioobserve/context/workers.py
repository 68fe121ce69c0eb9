"""Worker ordinals: which child of a rank is DataLoader-style worker 0, 1, ...

A child of a process that has a rank (and is not itself a worker) reserves at its fork the
lowest ordinal none of its parent's live workers holds (workers are 0..n-1 in spawn order,
and each epoch's fresh workers are 0..n-1 again). It shows it from its exec as a
multiprocessing spawn child, or (forked workers) from its first I/O other than closing or
duplicating descriptors, which is all a child does between fork and exec. A child that execs
anything else (the resource tracker, any program) is not a worker and gives the ordinal back.
Without a rank, only multiprocessing spawn children are numbered. Grandchildren keep their
parent's ordinal: a worker's own children work for it.

The ordinals read the process tree from the process table and the contexts from the context
timeline, and write the ordinals they show into that timeline.
"""

from __future__ import annotations

from ioobserve.context.launch import SPAWN_CHILD, child_kind
from ioobserve.context.processes import ProcessTable
from ioobserve.context.timeline import ContextTimeline


class WorkerOrdinals:
    """The ordinals each rank's workers hold, reserved at fork and shown once a child is a worker."""

    def __init__(self, timeline: ContextTimeline, processes: ProcessTable) -> None:
        self.timeline = timeline
        self.processes = processes  # the process tree: who forked whom, and when
        self._in_use: dict[int, set[int]] = {}  # ppid -> ordinals its live workers hold
        self._ordinals: dict[int, tuple[int, int]] = {}  # pid -> (ppid, ordinal) of workers numbered by their parent
        self._pending: set[int] = set()  # ordinal reserved at fork, not shown until it is a worker
        self._exited: set[int] = set()  # numbered processes gone: their ordinal is free for others

    def fork(self, pid: int, ppid: int, ts_ns: int) -> None:
        """A new process: an ordinal reserved if its parent is a rank that is not a worker."""
        self._release(pid)  # a reused pid starts afresh
        self._pending.discard(pid)
        parent = self.timeline.at(ppid, ts_ns)
        if parent.rank is not None and parent.worker is None:
            self._take(pid, ppid)  # reserved in spawn order, shown once it is a worker
            self._pending.add(pid)

    def exec(self, pid: int, ppid: int, ts_ns: int, argv: tuple[str, ...]) -> int | None:
        """A new program in `pid`: the ordinal it shows from its exec (a multiprocessing spawn
        child), or None; a pending child that execs anything else gives its ordinal back."""
        kind = child_kind(argv)
        pending = pid in self._pending
        self._pending.discard(pid)
        if pending and kind == SPAWN_CHILD and pid in self._ordinals:
            return self._ordinals[pid][1]
        if pending and pid in self._ordinals:
            self._give_back(pid)
        elif kind == SPAWN_CHILD and self.timeline.at(pid, ts_ns).worker is None:
            return self._take(pid, ppid)
        return None

    def exit(self, pid: int) -> None:
        """A process ended: its worker ordinal is free for the next worker of its parent (and
        stays its own for events of its still to be drained)."""
        numbered = self._ordinals.get(pid)
        if numbered is not None and pid not in self._exited:
            self._exited.add(pid)
            self._in_use.get(numbered[0], set()).discard(numbered[1])

    def pending(self) -> set[int]:
        """Children of a rank that hold an ordinal but have not yet shown they are workers."""
        return self._pending

    def confirm(self, first_io_ns: dict[int, int]) -> None:
        """Pending children that did I/O of their own (not just closing or duplicating
        descriptors, as a child does between fork and exec) are workers from that time."""
        for pid, ts_ns in first_io_ns.items():
            numbered = self._ordinals.get(pid)
            if pid in self._pending and numbered is not None:
                self._pending.discard(pid)
                self._show(pid, ts_ns, ts_ns, numbered[1])

    def forget(self, pids) -> None:
        """Processes long gone."""
        for pid in pids:
            self._in_use.pop(pid, None)
            self._release(pid)
            self._pending.discard(pid)

    def _take(self, pid: int, ppid: int) -> int:
        """The lowest ordinal no live worker of `ppid` holds (so each epoch's fresh workers
        are 0..n-1 again, as DataLoader numbers them)."""
        used = self._in_use.setdefault(ppid, set())
        ordinal = next(n for n in range(len(used) + 1) if n not in used)
        used.add(ordinal)
        self._ordinals[pid] = (ppid, ordinal)
        return ordinal

    def _release(self, pid: int) -> tuple[int, int] | None:
        numbered = self._ordinals.pop(pid, None)
        if numbered is not None and pid not in self._exited:
            self._in_use.get(numbered[0], set()).discard(numbered[1])
        self._exited.discard(pid)
        return numbered

    def _give_back(self, pid: int) -> None:
        """`pid` is not a worker after all; siblings forked after it move down into the freed
        ordinal. (Python's multiprocessing does not wait for its resource tracker to exec before
        forking the first worker, so the tracker's exec can come after a worker's fork.)"""
        ppid, ordinal = self._release(pid)
        self.timeline.renumber_worker(pid, ordinal, None)  # not even between its fork and exec
        process = self.processes.by_pid.get(pid)
        born = process.start_ns if process is not None and process.start_ns is not None else 0
        for sibling, _ in self.processes.forked_after(ppid, born):
            numbered = self._ordinals.get(sibling)
            if numbered is None or numbered[0] != ppid or sibling in self._exited:
                continue
            self._release(sibling)
            moved = self._take(sibling, ppid)
            if moved != numbered[1]:
                self.timeline.renumber_worker(sibling, numbered[1], moved)

    def _show(self, pid: int, since_ns: int, shown_ns: int, ordinal: int) -> None:
        self.timeline.set_worker(pid, since_ns, ordinal)
        # Its children forked since then work for it, even if their fork was learned first.
        for child, forked_ns in self.processes.forked_after(pid, shown_ns):
            if self._ordinals.get(child, (pid,))[0] == pid:  # not a worker of its own, then
                self._release(child)
                self._pending.discard(child)
                self._show(child, forked_ns, shown_ns, ordinal)
