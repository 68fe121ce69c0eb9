"""The app's own widgets."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Label, Sparkline


class Stat(Vertical):
    """One node total: its value and a sparkline of its history."""

    def __init__(self, label: str, key: str) -> None:
        super().__init__(classes="stat")
        self.label, self.key = label, key

    def compose(self) -> ComposeResult:
        # name and value on lines of their own: five stats fit 80 columns with any value
        yield Label(self.label, classes="name")
        yield Label("", classes="value")
        yield Sparkline([], summary_function=max)

    def show(self, text: str, history: list[float]) -> None:
        """Refresh the value and the line."""
        self.query_one(".value", Label).update(f"[b]{text}[/b]")
        # all zero: no line at all (Textual would draw a flat series at full height)
        self.query_one(Sparkline).data = history if any(history) else []
