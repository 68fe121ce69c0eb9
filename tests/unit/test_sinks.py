"""The sinks' base and fan-out: every sink in the code derives from the base (so a call it
does not use is a no-op, not a crash mid-recording), the fan-out calls each sink in order,
refuses what is not a sink, and abandons the sinks still to close once the deadline passed."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import polars as pl
import pytest

from ioobserve.deadline import StopDeadline
from ioobserve.sink import Sink, Sinks

ROOT = Path(__file__).resolve().parents[2]


def _sink_like_classes() -> list[tuple[str, str]]:
    """(module, class) of every class in the package and the TUI with a sink's `events(frame, …)`."""
    found = []
    for path in [*(ROOT / "ioobserve").rglob("*.py"), *(ROOT / "tui").rglob("*.py")]:
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
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

    with pytest.raises(TypeError, match="Loose is not an ioobserve.sink.Sink"):
        Sinks([Loose()])


def test_once_the_deadline_passed_the_sinks_still_to_close_abandon_first():
    log: list = []
    deadline = StopDeadline(60)
    deadline.start()
    Sinks([_Calls(log, "slow", deadline), _Calls(log, "next")]).close(deadline)
    assert log == [("slow", "close"), ("next", "abandon"), ("next", "close")]
