"""The disk side of a trace writer: its part files, and the disk thread that appends to them.

The parts: appended member by member from the disk thread, and what is done while the disk
takes nothing (full, read-only, I/O errors, a part deleted). Every event given here is
counted: in a member on disk, or dropped. The file-system calls themselves are the disk
process's (ioobserve.trace.write.disk).

The disk thread: the members the format thread's pool made, appended to the parts in queue
order, the switch from part to part, and each part's end record, which only this thread can
write since only it knows by then how many events were dropped. A flush the pool failed to
make is counted as unwritten and the user is told once. While the disk takes nothing, it asks
the file system from time to time whether it would again, and if so has the caller's next
batch start a new part."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ioobserve.plumbing.deadline import UNWRITTEN
from ioobserve.plumbing.thread_names import name_this_thread
from ioobserve.trace.lines import complete_line
from ioobserve.trace.members import KIND_META, MemberStats, index_line, gzip_member
from ioobserve.trace.output import OutputError
from ioobserve.trace.write.disk import (
    RESUME_CHECK_MAX_S,
    RESUME_CHECK_S,
    DiskProcess,
    PartFile,
    describe_failure,
    writable_again,
)
from ioobserve.trace.write.format_thread import End, Flushed, FormatThread, Rotate, Stop

if TYPE_CHECKING:  # the writer, which imports this module, holds the rotation
    from ioobserve.trace.write.writer import Rotation


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


class DiskThread:
    """The thread "ioobserve-disk", fed by `formatting` (`thread` is started by the writer;
    `pid`: the writer's, on the end record)."""

    def __init__(self, formatting: FormatThread, parts: Parts, rotation: Rotation, pid: int,
                 on_trouble: Callable[[str], None] | None) -> None:
        self._formatting = formatting
        self._handoffs = formatting.handoffs
        self._parts = parts
        self._rotation = rotation  # asked for a new part once the disk may take writes again
        self._pid = pid
        self._on_trouble = on_trouble
        self.failed_flushes = 0  # flushes a pool thread could not format or compress (their events: unwritten)
        self.hurried_members = 0  # members deflated fast (members.HURRIED_LEVEL: the writer was behind)
        self.thread = threading.Thread(target=self._run, name="ioobserve-disk", daemon=True)

    def _run(self) -> None:
        """Compress, append and index members, switch parts, in the order they come; while
        the disk takes nothing, ask from time to time whether it would again."""
        name_this_thread()
        parts = self._parts
        while True:
            try:
                item = self._handoffs.to_disk.get(RESUME_CHECK_S if parts.trouble is not None else None)
            except queue.Empty:
                self._ask_resume()
                continue
            try:
                match item:
                    case Stop():
                        parts.finish()
                        parts.close()
                        return
                    case Rotate():
                        parts.finish()
                        parts.start(item.name)
                        continue
                    case End():
                        text, stats = self._end_member(item)
                        hurried, members = False, [(gzip_member(text), stats)]
                    case Flushed():
                        hurried, members = self._flush_members(item)
                for member, stats in members:
                    if parts.trouble is not None or (self._handoffs.abandoned.is_set() and stats.events):
                        parts.drop(stats.events)
                        self._ask_resume()
                        continue
                    parts.append(member, stats, hurried)
                    self.hurried_members += hurried
            except BaseException as exc:  # a bug: reported by the next call from the worker
                self._handoffs.error = exc
                if isinstance(item, Stop):
                    return

    def _flush_members(self, flushed: Flushed) -> tuple[bool, list[tuple[bytes, MemberStats]]]:
        """A flush's members once its pool thread made them; none if it failed: its events are
        counted as unwritten (and the flushes failed, in the end record) and the user is told, once."""
        events, meta_lines = flushed.events, flushed.meta_lines
        try:
            return flushed.made.result()
        except Exception as exc:  # noqa: BLE001 (any failure of formatting or deflate: counted, not fatal)
            self.failed_flushes += 1
            self._parts.drop(events)
            if self.failed_flushes == 1 and self._on_trouble is not None:
                self._on_trouble(f"a writer thread failed ({type(exc).__name__}: {exc}): a flush of {events:,} events "
                                 f"and {meta_lines:,} metadata lines was not written (counted as unwritten)")
            return False, []

    def _ask_resume(self) -> None:
        if self._parts.trouble is not None and not self._rotation.asked and self._parts.resume_due():
            self._rotation.ask()  # the collector's next batch starts a new part

    def _end_member(self, end: End) -> tuple[bytes, MemberStats]:
        """The end record as a member; the recording's last one says how many events the disk missed."""
        args = dict(end.args)
        if end.final:
            dropped = self._formatting.dropped + self._parts.dropped
            # the collector's own (dropped at the deadline before reaching us) came through lost()
            lost = dict(args["lost"])
            if dropped:
                lost[UNWRITTEN] = lost.get(UNWRITTEN, 0) + dropped
            args["lost"] = lost
            args["lost_total"] = sum(args["lost"].values())
            described = self._formatting.described
            if described.stacks_missing:
                args["counters"] = {**args["counters"], "py_stacks_undescribed": described.stacks_missing}
            if self.failed_flushes:
                args["counters"] = {**args["counters"], "writer_failed_flushes": self.failed_flushes}
            if self.hurried_members:
                args["counters"] = {**args["counters"], "writer_hurried_members": self.hurried_members}
        text = complete_line(end.record_id, "end", self._pid, self._pid, end.ts_us, args)
        stats = MemberStats(KIND_META)
        stats.add_text(text)
        return text, stats
