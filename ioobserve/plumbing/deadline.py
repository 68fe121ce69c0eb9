"""How long a stop may take: what is still queued is written until the deadline, then
dropped and counted, so a stuck disk or thread never keeps a recorder from exiting."""

from __future__ import annotations

import math
import threading
import time

DEFAULT_STOP_TIMEOUT_S = 30.0  # writing out a second's backlog takes far less; this is for a stuck disk
POLL_S = 0.05  # how often a wait looks whether it was hurried
ABANDON_GRACE_S = 1.0  # after the deadline, how long threads get to drop what they hold and end
UNWRITTEN = "unwritten"  # the loss name of events captured but not written (the deadline, a failing disk)


class StopDeadline:
    """`seconds` from start(), or now once hurry() was called (a second Ctrl-C); any thread."""

    def __init__(self, seconds: float = DEFAULT_STOP_TIMEOUT_S) -> None:
        self.seconds = seconds
        self._at = math.inf
        self._hurried = threading.Event()

    def start(self) -> None:
        """The stop begins: the clock runs from now (a second call changes nothing)."""
        if self._at == math.inf:
            self._at = time.monotonic() + self.seconds

    def hurry(self) -> None:
        """Stop waiting at once."""
        self._hurried.set()

    def remaining(self) -> float:
        """Seconds left (0 when passed or hurried; inf before start)."""
        return 0.0 if self._hurried.is_set() else max(self._at - time.monotonic(), 0.0)

    def passed(self) -> bool:
        """Whether waiting must end now."""
        return self.remaining() == 0.0


def grace() -> StopDeadline:
    """ABANDON_GRACE_S from now: what threads get, in all, to end once abandoned."""
    deadline = StopDeadline(ABANDON_GRACE_S)
    deadline.start()
    return deadline


def join_by(threads: list[threading.Thread], deadline: StopDeadline | None) -> bool:
    """Wait for the threads to end, at most until the deadline; True if they all ended."""
    for thread in threads:
        while thread.is_alive():
            if deadline is None:
                thread.join()
            elif deadline.passed():
                return False
            else:
                thread.join(min(POLL_S, deadline.remaining()))
    return True
