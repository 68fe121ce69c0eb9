"""Screens over the main one: the keys."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Static

HELP = """[b]ioobserve top[/b]

  q          quit                      /        filter as you type (esc: clear)
  s          sort: bandwidth, IOPS, latency
  p          pause / resume            ?        this help
  enter      drill down: job → processes → files and events of one process
  esc        back up one level         1-6      the tabs, left to right
Replay only:  ← →  step one second,  space  play / stop,  home / end  first / last second

Rates are per second over the last window (about one second); read and written on the
processes tab count from the start. Totals come from the syscall layer."""


class HelpScreen(ModalScreen):
    """The keys."""

    BINDINGS = [Binding("escape,q,question_mark", "app.pop_screen", "close")]

    def compose(self) -> ComposeResult:
        yield Static(HELP, id="help")
