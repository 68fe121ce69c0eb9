"""The trace writer's disk thread: the members the format thread's pool made, appended to
the parts in queue order (ioobserve.trace.write.parts), the switch from part to part, and each
part's end record, which only this thread can write since only it knows by then how many
events were dropped. A flush the pool failed to make is counted as unwritten and the user is
told once. While the disk takes nothing, it asks the file system from time to time whether it
would again, and if so has the caller's next batch start a new part."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from ioobserve.plumbing.deadline import UNWRITTEN
from ioobserve.plumbing.thread_names import name_this_thread
from ioobserve.trace.index import KIND_META, MemberStats
from ioobserve.trace.lines import complete_line
from ioobserve.trace.members import gzip_member
from ioobserve.trace.write.disk import RESUME_CHECK_S
from ioobserve.trace.write.format_thread import FormatThread
from ioobserve.trace.write.parts import Parts
from ioobserve.trace.write.queued import End, Flushed, Rotate, Stop
from ioobserve.trace.write.rotation import Rotation


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
