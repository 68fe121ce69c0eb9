"""A trace writer's parts as its caller's thread sees them: when one ends (its size, its age,
or asked: logrotate's SIGHUP, or the disk thread once the disk may take writes again), and what
it queues so that each part stands alone: its own start and end records, and a PR line for
every process it mentions. The files themselves are the disk thread's (ioobserve.trace.write.parts)."""

from __future__ import annotations

import time
from collections.abc import Callable

from ioobserve.data.model import Mount, Process
from ioobserve.plumbing.host import node_name
from ioobserve.trace.lines import complete_line, metadata_line
from ioobserve.trace.write.format_thread import Handoffs
from ioobserve.trace.write.parts import Parts
from ioobserve.trace.write.queued import End, FlushNow, Line, ProcessLine, Rotate

SUFFIX = ".pfw.gz"


def part_name(name: str, part: int) -> str:
    """The file name of part `part` of a rotated trace (part 0 keeps the original name)."""
    return name if part == 0 else f"{name[: -len(SUFFIX)]}-{part}{SUFFIX}"


class Rotation:
    """The parts of one recording named `name`, from the caller's thread (`pid`, `hhash`: the
    writer's, on every record; `unwritten`: its count so far, for a start after trouble)."""

    def __init__(self, handoffs: Handoffs, parts: Parts, name: str, pid: int, hhash: str, recording: dict,
                 mounts: list[Mount], rotate_bytes: int | None, rotate_seconds: float | None,
                 unwritten: Callable[[], int]) -> None:
        self._handoffs = handoffs
        self._parts = parts  # read only: the part's size and the disk's troubles
        self._name = name
        self._pid, self._hhash = pid, hhash
        self._recording = recording
        self._mounts = mounts
        self._rotate_bytes = rotate_bytes
        self._rotate_seconds = rotate_seconds
        self._unwritten = unwritten
        self.number = 0
        self.asked = False  # a new part with the next batch (any thread sets it)
        self.events = 0  # events queued in this part
        self._started = time.monotonic()
        self._next_id = 1
        self._part_pids: set[int] = set()  # per part: PR lines written
        self._proc_lines: dict[int, ProcessLine] = {}  # latest PR line of every process

    def ask(self) -> None:
        """Start a new part with the next batch; any thread."""
        self.asked = True

    def due(self) -> bool:
        """Whether the next batch starts a new part."""
        if self.asked:
            return True
        if self._rotate_seconds is not None and time.monotonic() - self._started >= self._rotate_seconds:
            return True
        return self._rotate_bytes is not None and self._parts.size >= self._rotate_bytes

    def open_part(self) -> None:
        """Queue the part's first records (host, mounts, start) and flush them: the file is readable at once."""
        put = self._handoffs.put
        put(Line(metadata_line("HH", self._pid, self._pid, {"hhash": self._hhash, "name": node_name(), "value": self._hhash})))
        for mount in self._mounts:  # which file system each dev is: local or shared
            put(Line(metadata_line("MT", self._pid, self._pid, {"dev": mount.dev, "name": mount.mountpoint,
                                                                 "value": mount.fstype})))
        start = {"hhash": self._hhash, **self._recording, "part": self.number}
        if self._parts.troubles:
            start["after_trouble"] = {"error": self._parts.troubles[-1], "unwritten_so_far": self._unwritten()}
        put(Line(complete_line(self.take_id(), "start", self._pid, self._pid, time.time_ns() // 1000, start)))
        self._handoffs.to_format.put(FlushNow())

    def rotate(self) -> None:
        """End this part and start the next; the writer's threads switch files in queue order."""
        self.end()
        self.number += 1
        self.asked = False
        self._handoffs.put(Rotate(part_name(self._name, self.number)))
        self._part_pids.clear()
        self._started = time.monotonic()
        self.events = 0
        self.open_part()

    def end(self, totals: dict | None = None) -> None:
        """Queue this part's end record: the next part's name, or, the recording's last, its
        `totals` (the disk thread adds what it dropped: DiskThread._end_member)."""
        args = {"hhash": self._hhash, "num_events": self.events, "part": self.number}
        if totals is not None:
            args |= totals
        else:
            args["next"] = part_name(self._name, self.number + 1)
        self._handoffs.put(End(self.take_id(), args, totals is not None))

    def take_id(self) -> int:
        """The id of our next own record (start, lost, end)."""
        self._next_id += 1
        return self._next_id - 1

    def processes(self, changed: list[Process]) -> None:
        """Queue a PR line per process, and keep it for later parts."""
        for proc in changed:
            args = {
                "hhash": self._hhash, "ppid": proc.ppid, "comm": proc.comm, "exe": proc.exe,
                "cmdline": list(proc.cmdline), "uid": proc.uid, "cgroup": proc.cgroup_id,
            }
            line = ProcessLine(metadata_line("PR", proc.pid, proc.pid, args), proc.pid, proc.uid, proc.cgroup_id)
            self._proc_lines[proc.pid] = line
            self._part_pids.add(proc.pid)
            self._handoffs.put(line)

    def forget(self, pids) -> None:
        """Processes long gone: their PR lines need not be repeated in later parts."""
        for pid in pids:
            self._proc_lines.pop(pid, None)

    def introduce(self, pids) -> None:
        """Queue the PR lines this part lacks for processes described in an earlier one."""
        for pid in set(pids) - self._part_pids:
            if pid in self._proc_lines:
                self._handoffs.put(self._proc_lines[pid])
            self._part_pids.add(pid)
