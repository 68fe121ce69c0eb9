"""The sinks' base and fan-out: every sink in the code derives from the base (so a call it
does not use is a no-op, not a crash mid-recording), the fan-out calls each sink in order,
refuses what is not a sink, and abandons the sinks still to close once the deadline passed;
a sink on its own thread makes its calls in order there and closes by the deadline."""

from __future__ import annotations

import ast
import importlib
import threading
from pathlib import Path

import polars as pl
import pytest

from ioobserve.plumbing.deadline import StopDeadline
from ioobserve.sinks.background import BackgroundSink
from ioobserve.sinks.base import Sink, Sinks

ROOT = Path(__file__).resolve().parents[2]


def _sink_like_classes() -> list[tuple[str, str]]:
    """(module, class) of every class in the package and the TUI with a sink's `events(frame, …)`."""
    found = []
    for path in [*(ROOT / "ioobserve").rglob("*.py"), *(ROOT / "tui").rglob("*.py")]:
        parts = path.relative_to(ROOT).with_suffix("").parts
        module = ".".join(("ioobserve", *parts) if parts[0] == "tui" else parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(item, ast.FunctionDef) and item.name == "events" and [a.arg for a in item.args.args[1:2]] == ["frame"]
                    for item in node.body):
                found.append((module, node.name))
    return found


SINK_LIKE = _sink_like_classes()


def test_the_search_finds_the_known_sinks():
    names = {name for _, name in SINK_LIKE}
    assert {"TraceWriter", "SummarySink", "AggregatingSink", "EventStream", "JobRecorder", "Sinks"} <= names


@pytest.mark.parametrize("module, name", SINK_LIKE, ids=lambda v: v)
def test_every_sink_derives_from_the_base(module, name):
    assert issubclass(getattr(importlib.import_module(module), name), Sink)


class _Calls(Sink):
    def __init__(self, log: list, name: str, deadline: StopDeadline | None = None):
        self.log, self.name, self.deadline = log, name, deadline

    def events(self, frame, tables) -> None:
        self.log.append((self.name, "events", frame.height))

    def abandon(self) -> None:
        self.log.append((self.name, "abandon"))

    def close(self, deadline=None) -> None:
        self.log.append((self.name, "close"))
        if self.deadline is not None:
            self.deadline.hurry()  # this one took all the time there was


def test_the_fan_out_calls_every_sink_in_order_and_the_bases_calls_do_nothing():
    log: list = []
    sinks = Sinks([_Calls(log, "a"), _Calls(log, "b")])
    sinks.events(pl.DataFrame({"x": [1, 2]}), None)
    sinks.lost(0, {"read": 1})  # neither overrides these: the base's no-ops
    sinks.forget([1])
    sinks.counters({})
    assert log == [("a", "events", 2), ("b", "events", 2)]


def test_the_fan_out_refuses_what_is_not_a_sink():
    class Loose:
        def events(self, frame, tables) -> None:
            pass

    with pytest.raises(TypeError, match="Loose is not an ioobserve.sinks.base.Sink"):
        Sinks([Loose()])


def test_once_the_deadline_passed_the_sinks_still_to_close_abandon_first():
    log: list = []
    deadline = StopDeadline(60)
    deadline.start()
    Sinks([_Calls(log, "slow", deadline), _Calls(log, "next")]).close(deadline)
    assert log == [("slow", "close"), ("next", "abandon"), ("next", "close")]


def test_a_background_sink_makes_every_call_in_order_on_its_own_thread_and_close_waits_for_them():
    log: list = []
    threads: set[str] = set()

    class Recorded(_Calls):
        def events(self, frame, tables) -> None:
            threads.add(threading.current_thread().name)
            super().events(frame, tables)

    background = BackgroundSink(Recorded(log, "summary"), "ioobserve-test-sink")
    for size in range(1, 101):
        background.events(pl.DataFrame({"x": range(size)}), None)
    background.close()
    assert log == [("summary", "events", size) for size in range(1, 101)] + [("summary", "close")]
    assert threads == {"ioobserve-test-sink"}


def test_a_background_sink_raises_what_its_sink_raised_at_close():
    class Failing(Sink):
        def events(self, frame, tables) -> None:
            raise ValueError("the summary failed")

    background = BackgroundSink(Failing(), "ioobserve-test-sink")
    background.events(pl.DataFrame({"x": [1]}), None)
    background.events(pl.DataFrame({"x": [2]}), None)  # read on, not made: the thread never blocks the worker
    with pytest.raises(ValueError, match="the summary failed"):
        background.close()


def test_a_background_sink_stuck_past_the_deadline_is_abandoned_and_close_returns():
    log: list = []
    release = threading.Event()

    class Stuck(_Calls):
        def events(self, frame, tables) -> None:
            release.wait()
            super().events(frame, tables)

    background = BackgroundSink(Stuck(log, "stuck"), "ioobserve-test-sink")
    background.events(pl.DataFrame({"x": [1]}), None)
    background.events(pl.DataFrame({"x": [2]}), None)  # queued behind the stuck call
    deadline = StopDeadline(0.2)
    deadline.start()
    background.close(deadline)
    assert ("stuck", "abandon") in log and ("stuck", "close") in log
    release.set()
    background._thread.join(5)
    assert ("stuck", "events", 2) not in log  # dropped, not made after the abandon
