"""The disk side of a trace writer: its part files, appended member by member from the
writer's disk thread, and what is done while the disk takes nothing (full, read-only, I/O
errors, a part deleted). Every event given here is counted: in a member on disk, or dropped.
The file-system calls themselves are the disk process's (ioobserve.trace.write.disk)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ioobserve.trace.index import MemberStats, index_line
from ioobserve.trace.output import OutputError
from ioobserve.trace.write.disk import (
    RESUME_CHECK_MAX_S,
    RESUME_CHECK_S,
    DiskProcess,
    PartFile,
    describe_failure,
    writable_again,
)


class Parts:
    """One recording's parts, written from one thread; the first is created at once (its
    errors, such as the file existing, reach the caller)."""

    def __init__(self, directory: Path, first: str, on_trouble: Callable[[str], None] | None,
                 lost_so_far: Callable[[], int], on_closed: Callable[[Path], None] | None = None) -> None:
        self.directory = Path(directory)
        self.disk = DiskProcess()  # makes every file-system call: a hung disk holds it, not us
        try:
            self.part: PartFile | None = PartFile(self.disk, self.directory, first)
        except BaseException:
            self.disk.close()
            raise
        self.first_path = self.part.path
        self.paths: list[Path] = [self.part.path]  # the recording's files (a part deleted meanwhile is left out)
        self.on_trouble = on_trouble  # told when writing fails and when it works again
        self.lost_so_far = lost_so_far  # the writer's count of every event dropped, for those messages
        self.on_closed = on_closed  # told of each part closed whole (ioobserve.trace.write.finish)
        self.trouble: str | None = None  # why the disk takes nothing now (None: it does)
        self.troubles: list[str] = []  # every failure of the recording, in order
        self.appended = 0  # events in members on disk
        self.dropped = 0  # events in members the disk did not take
        self.hurried: set[Path] = set()  # parts holding members deflated at the hurried level
        self._part_appended = 0
        self._resume_at = self._resume_wait = 0.0  # when to ask the file system again
        self._resuming: str | None = None  # the trouble a new part is trying to end

    @property
    def size(self) -> int:
        """Bytes in the current part (0 while there is none)."""
        return self.part.size if self.part is not None else 0

    def append(self, member: bytes, stats: MemberStats, hurried: bool = False) -> None:
        """One member and its index line; a disk failure drops it (counted) and starts the trouble.
        `hurried`: deflated fast rather than small (the finisher recompresses such parts)."""
        if self.part is None:
            self._fail(FileNotFoundError("no trace file is open"), stats.events)
            return
        try:
            self.part.append(member, index_line(stats.entry(self.part.size, len(member))))
            self.part.check_present()
        except FileNotFoundError as exc:  # deleted: what the part held went with it
            self.appended -= self._part_appended
            if self.part.path in self.paths:
                self.paths.remove(self.part.path)
            self._fail(exc, stats.events + self._part_appended)
            return
        except OSError as exc:
            self._fail(exc, stats.events)
            return
        self.appended += stats.events
        self._part_appended += stats.events
        if hurried:
            self.hurried.add(self.part.path)
        if self._resuming is not None:  # the new part took its first member: the trouble is over
            self._resuming = None
            self._say(f"writing again, in {self.part.path} ({self.lost_so_far():,} events lost meanwhile)")

    def drop(self, events: int) -> None:
        """Events of a member not written (the disk in trouble, or the stop deadline passed)."""
        self.dropped += events

    def resume_due(self) -> bool:
        """While in trouble, from time to time: whether the file system looks able to take a new part."""
        if time.monotonic() < self._resume_at:
            return False
        self._resume_at = time.monotonic() + self._resume_wait
        self._resume_wait = min(self._resume_wait * 2, RESUME_CHECK_MAX_S)
        return writable_again(self.disk, self.directory)

    def start(self, name: str) -> None:
        """The next part; after a trouble, it is over once a member goes in."""
        try:
            self.part = PartFile(self.disk, self.directory, name)
        except (OSError, OutputError) as exc:
            self._fail(exc if isinstance(exc, OSError) else OSError(str(exc)), 0)
            return
        self.paths.append(self.part.path)
        self._part_appended = 0
        if self.trouble is not None:
            self._resuming, self.trouble = self.trouble, None

    def finish(self) -> None:
        """Flush and close the current part."""
        if self.part is None:
            return
        part, self.part = self.part, None
        try:
            part.close()
        except OSError as exc:  # the last members may not have reached the disk
            self._fail(exc, 0)
            return
        if self.on_closed is not None and part.path in self.paths:
            self.on_closed(part.path)

    def close(self) -> None:
        """The last part is finished: let the disk process go."""
        self.disk.close()

    def _fail(self, exc: OSError, events: int) -> None:
        """The disk took nothing: drop `events`, give up the part, and say so (once per trouble:
        a new part that fails at once only puts the next try further off)."""
        self.dropped += events
        where = exc.filename or (self.part.path if self.part is not None else self.directory)
        if self.part is not None:
            self.part.discard()
            if self.part.size == 0:  # nothing of it reached the disk: leave no empty file behind
                self.part.remove()
                if self.part.path in self.paths:
                    self.paths.remove(self.part.path)
            self.part = None
        if self._resuming is not None:
            self.trouble, self._resuming = self._resuming, None
        elif self.trouble is None:
            self.trouble = f"cannot write {where}: {describe_failure(exc)}"
            self.troubles.append(self.trouble)
            self._resume_wait = RESUME_CHECK_S
            self._resume_at = time.monotonic() + self._resume_wait
            self._say(f"{self.trouble}; events are counted as lost until it can write again")

    def _say(self, message: str) -> None:
        if self.on_trouble is not None:
            self.on_trouble(message)
