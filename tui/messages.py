"""Messages the app's workers post to the UI thread."""

from __future__ import annotations

from textual.message import Message

from ioobserve.live.window_totals import Snapshot


class SnapshotReady(Message):
    """A new snapshot, taken on the worker thread."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        super().__init__()

    def can_replace(self, message: Message) -> bool:
        """A newer snapshot supersedes one still queued: the screen shows the latest."""
        return isinstance(message, SnapshotReady)
