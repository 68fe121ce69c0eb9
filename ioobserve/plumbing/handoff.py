"""A first-in first-out hand-off between two threads, bounded by the weight of what it holds
(events or bytes, not items, since one batch may be a hundred thousand times another), that
can be abandoned when a stop deadline passes: a put then no longer waits for room."""

from __future__ import annotations

import collections
import queue
import threading


class Handoff:
    """put() waits while `limit` is held (one item always fits); get() takes the oldest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._items: collections.deque = collections.deque()
        self._held = 0
        self._abandoned = False
        self._changed = threading.Condition()

    def put(self, item, weight: int = 0) -> None:
        """Append `item`, waiting while the hand-off is full (never once abandoned)."""
        with self._changed:
            self._changed.wait_for(lambda: self._held < self.limit or self._abandoned)
            self._items.append((item, weight))
            self._held += weight
            self._changed.notify_all()

    def get(self, timeout: float | None = None):
        """The oldest item; queue.Empty if none came within `timeout` seconds (None: wait)."""
        with self._changed:
            if not self._changed.wait_for(lambda: self._items, timeout):
                raise queue.Empty
            item, weight = self._items.popleft()
            self._held -= weight
            self._changed.notify_all()
            return item

    def get_nowait(self):
        """The oldest item, or queue.Empty."""
        return self.get(0)

    def abandon(self) -> None:
        """From now on put() never waits: the taker is dropping what it gets."""
        with self._changed:
            self._abandoned = True
            self._changed.notify_all()

    @property
    def held(self) -> int:
        """The weight of what is queued."""
        return self._held

    def __len__(self) -> int:
        return len(self._items)
