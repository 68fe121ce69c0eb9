"""What the writer gathers between flushes, and the members a flush becomes.

A flush is the metadata lines queued since the last one, then the batches being formatted
in the writer's pool; once they are formatted it yields its members: the metadata in one,
then one per layer and shape of event line (ioobserve.trace.lines), each with what its
index entry says (ioobserve.trace.index.MemberStats).
"""

from __future__ import annotations

from concurrent.futures import Future

from ioobserve.trace.index import KIND_EVENTS, KIND_META, MemberStats

LINE_BYTES_GUESS = 200  # of text per event line, before it is formatted: when to flush


class Pending:
    """What waits for the next flush: metadata lines, then batches being formatted."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Start over after a flush."""
        self.meta: list[bytes] = []
        self.batches: list[Future] = []
        self.events = 0
        self.buffered = 0
        self.behind = False  # a batch in it reached the writer late: deflate it fast

    def add_meta(self, line: bytes) -> None:
        """A metadata line or one of our own records."""
        self.meta.append(line)
        self.buffered += len(line)

    def add_batch(self, formatting: Future, events: int, behind: bool) -> None:
        """A batch being formatted (event_lines' result to come)."""
        self.batches.append(formatting)
        self.behind = self.behind or behind
        self.events += events
        self.buffered += events * LINE_BYTES_GUESS

    def flush(self) -> Flush | None:
        """What is pending as one flush (None if nothing is), and start over."""
        flush = Flush(self.meta, self.batches, self.events, self.behind) if self.meta or self.batches else None
        self.reset()
        return flush


class Flush:
    """One flush's lines: metadata, then events per layer and shape, in separate members."""

    def __init__(self, meta: list[bytes], batches: list[Future], events: int, behind: bool) -> None:
        self.meta, self.batches, self.events, self.behind = meta, batches, events, behind

    def members(self):
        """(text, stats) of each member to write, once the batches are formatted."""
        if self.meta:
            text = b"".join(self.meta)
            stats = MemberStats(KIND_META)
            stats.add_text(text)
            yield text, stats
        texts: dict[tuple, list[memoryview]] = {}
        stats_by_key: dict[tuple, MemberStats] = {}
        for formatting in self.batches:
            for key, group in formatting.result().items():
                stats = stats_by_key.setdefault(key, MemberStats(KIND_EVENTS))
                stats.add_text(group.text, lines=group.lines)
                stats.add_events(group.ts, group.pids)
                texts.setdefault(key, []).append(group.text)
        for key, parts in texts.items():
            yield b"".join(parts), stats_by_key[key]
