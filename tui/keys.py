"""`top`'s keys: the bindings and the actions they name (filter, sort, pause, help, tabs, the
drill-down and back up), with a replay's step, jump and play. The app draws; these change what
it draws and ask it to draw again."""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import DataTable, Input, TabbedContent

from ioobserve.live.source import REPLAY_STEP_S, Source
from ioobserve.live.window_totals import Snapshot
from ioobserve.tui import views
from ioobserve.tui.screens import HelpScreen

# Textual reads BINDINGS only from its own classes: TopApp declares these.
KEYS = [
    Binding("q", "quit", "quit"), Binding("slash", "filter", "filter"), Binding("s", "sort", "sort"),
    Binding("p", "pause", "pause"), Binding("question_mark", "help", "help"), Binding("escape", "back", "back"),
    Binding("1", "tab('jobs')", "jobs", show=False), Binding("2", "tab('processes')", "procs", show=False),
    Binding("3", "tab('files')", "files", show=False), Binding("4", "tab('latency')", "latency", show=False),
    Binding("5", "tab('events')", "events", show=False), Binding("6", "tab('network')", "network", show=False),
    Binding("left", "step(-1)", "back 1 s", show=False), Binding("right", "step(1)", "on 1 s", show=False),
    Binding("space", "play", "play", show=False),
    # Before the focused table's own home/end (its first and last row), which took them.
    Binding("home", "jump(0)", show=False, priority=True), Binding("end", "jump(1)", show=False, priority=True),
]


class KeyActions:
    """The actions KEYS name and the messages of the filter box and the tables, mixed into
    TopApp, whose view, source, pause and drawing they use."""

    view: views.View
    source: Source
    paused: bool
    snapshot: Snapshot | None

    def action_filter(self) -> None:
        """/: show the filter box and type into it."""
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        """The filter as typed, applied at once."""
        self.view.text = event.value.strip()
        self._draw()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter in the filter: back to the table, the filter kept."""
        if self._tab() != "latency":
            self.query_one(f"#{self._tab()}-table", DataTable).focus()

    def action_sort(self) -> None:
        """s: the next order of views.SORTS."""
        self.view.sort = views.SORTS[(views.SORTS.index(self.view.sort) + 1) % len(views.SORTS)]
        self._draw()

    def action_pause(self) -> None:
        """p: stop taking snapshots, or take them again."""
        self.paused = not self.paused
        if self.snapshot:
            self._draw_title(self.snapshot)

    def action_help(self) -> None:
        """?: the keys."""
        self.push_screen(HelpScreen())

    def action_tab(self, name: str) -> None:
        """1-5: show a tab."""
        self.query_one(TabbedContent).active = name

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter: a job shows its processes; a process its files; a file its events."""
        values = event.data_table.get_row(event.row_key)
        focus = self.view.focus
        if event.data_table.id == "jobs-table":
            focus.job, focus.pid, focus.path = values[0], None, None
            self.action_tab("processes")
        elif event.data_table.id == "processes-table":
            focus.pid = int(values[0])
            self.action_tab("files")
        elif event.data_table.id == "files-table":
            self.view.text = values[0]
            self.action_tab("events")
        self._draw()

    def action_back(self) -> None:
        """Esc: clear the filter, else go up one level of the drill-down."""
        box, focus = self.query_one("#filter", Input), self.view.focus
        if self.view.text or box.display:
            box.value, box.display, self.view.text = "", False, ""
        elif focus.pid is not None:
            focus.pid = None
            self.action_tab("processes")
        elif focus.job is not None:
            focus.job = None
            self.action_tab("jobs")
        self._draw()

    def action_step(self, seconds: int) -> None:
        """Left and right, in a replay: the cursor back or on by REPLAY_STEP_S."""
        if not self.source.live:
            self.source.step(seconds * REPLAY_STEP_S)
            self._take()

    def action_jump(self, fraction: float) -> None:
        """Home and end, in a replay: the first or the last second."""
        if not self.source.live:
            self.source.jump(fraction)
            self._take()

    def action_play(self) -> None:
        """Space, in a replay: play or stop."""
        if not self.source.live:
            self.source.playing = not self.source.playing
            self._take()
