"""Tests wait on a state, never for a fixed time: a predicate polled until it holds, or the
test fails saying what never happened."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")
DEADLINE_S = 30.0  # generous: a loaded CI machine is slow, and a state that holds returns at once
POLL_S = 0.05


def _never(what: str | Callable[[], str], timeout: float) -> AssertionError:
    return AssertionError(f"within {timeout:g} s this never happened: {what() if callable(what) else what}")


def wait_until(predicate: Callable[[], T], what: str | Callable[[], str], timeout: float = DEADLINE_S) -> T:
    """The predicate's first truthy value; AssertionError naming `what` (a string, or a function
    giving one with the state at the deadline) if none comes before the deadline."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise _never(what, timeout)
        time.sleep(POLL_S)
    return value


async def wait_until_async(predicate: Callable[[], T], what: str | Callable[[], str], timeout: float = DEADLINE_S,
                           pause: Callable[[float], Awaitable] = asyncio.sleep) -> T:
    """wait_until inside an event loop; `pause` lets it run between polls (a Textual Pilot's pause, say)."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise _never(what, timeout)
        await pause(POLL_S)
    return value
