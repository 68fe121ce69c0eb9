"""`ioobserve top`: node totals with sparklines, jobs, processes, files, latency histograms and
the event stream, for a live capture or a replayed trace. Snapshots are taken on a worker
thread and arrive as messages; the UI thread only draws."""

from __future__ import annotations

import asyncio
import datetime
import signal

from rich.cells import cell_len
from textual import events, work
from textual.app import App, ComposeResult
from textual.containers import Horizontal
from textual.geometry import Size
from textual.widgets import DataTable, Footer, Input, Label, Static, TabbedContent, TabPane

from ioobserve.data.units import format_count, format_rate
from ioobserve.live.source import Source
from ioobserve.live.window_totals import METADATA_OPS, OPS, READ_BYTES, WRITE_BYTES, Snapshot
from ioobserve.tui import views
from ioobserve.tui.keys import KEYS, KeyActions
from ioobserve.tui.messages import SnapshotReady
from ioobserve.tui.widgets import Stat

MIN_WIDTH, MIN_HEIGHT = 60, 16
REFRESH_S = 1.0
TABLES = {
    "jobs": ("job", "procs", "read/s", "write/s", "IOPS", "latency"),
    "processes": ("pid", "comm", "job", "rank/w", "read/s", "write/s", "IOPS", "latency", "read", "written"),
    "files": ("path", "procs", "read/s", "write/s", "IOPS", "latency"),
    "network": ("peer", "procs", "recv/s", "sent/s", "calls/s", "requests/s", "latency", "requests by operation /s"),
    "events": ("time", "pid", "comm", "op", "path", "bytes", "latency", "ret"),
}
ROWS = {"jobs": views.job_rows, "processes": views.process_rows, "files": views.file_rows, "network": views.network_rows,
        "events": views.event_rows}


class TopApp(KeyActions, App):
    """The app over any Source (live or replay): it takes snapshots and draws them; its keys
    are KeyActions' (tui.keys)."""

    CSS_PATH = "app.tcss"
    TITLE = "ioobserve top"
    BINDINGS = KEYS

    def __init__(self, source: Source, theme: str = "textual-dark", refresh_s: float | None = REFRESH_S) -> None:
        super().__init__()
        self.theme = theme
        self.source = source
        self.refresh_s = refresh_s  # None: a snapshot only at start and on keys (a replay under test)
        self.view = views.View()
        self.paused = False
        self.snapshot: Snapshot | None = None

    def compose(self) -> ComposeResult:
        yield Label("", id="title")
        yield Label(f"terminal too small: at least {MIN_WIDTH}x{MIN_HEIGHT} needed", id="too-small")
        with Horizontal(id="stats"):
            yield Stat("read", "read_bps")
            yield Stat("write", "write_bps")
            yield Stat("IOPS", "iops")
            yield Stat("meta/s", "metadata_ops_s")
            yield Stat("lost", "lost")
        yield Input(placeholder="filter: pid, comm, job, path or op", id="filter")
        with TabbedContent(initial="processes", id="tabs"):
            for name in ("jobs", "processes", "files"):
                with TabPane(name, id=name):
                    yield DataTable(id=f"{name}-table", cursor_type="row", zebra_stripes=True)
            with TabPane("latency", id="latency"):
                yield Static("", id="latency-view")
            with TabPane("events", id="events"):
                yield DataTable(id="events-table", cursor_type="row")
            with TabPane("network", id="network"):  # the NET and HTTP layers (--layers net or tls)
                yield DataTable(id="network-table", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        # SIGTERM, and SIGHUP when the SSH session or terminal goes, end the app as q does: the
        # CLI then detaches the probes and closes a --record trace with its end record
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(signum, self.exit)
        for name, columns in TABLES.items():
            self.query_one(f"#{name}-table", DataTable).add_columns(*columns)
        self.query_one("#processes-table", DataTable).focus()
        self.source.start()
        if self.refresh_s is not None:
            self.set_interval(self.refresh_s, self.refresh_snapshot)
        self.refresh_snapshot()
        self._fit()

    def on_resize(self, event: events.Resize) -> None:
        self._fit(event.size)

    def _fit(self, size: Size | None = None) -> None:
        """Below the minimum size, only the message shows (size: the new one while resizing,
        which self.size does not know yet)."""
        size = size or self.size
        small = size.width < MIN_WIDTH or size.height < MIN_HEIGHT
        self.query_one("#too-small").display = small
        for selector in ("#title", "#stats", "#tabs", "Footer"):
            self.query_one(selector).display = not small

    def refresh_snapshot(self) -> None:
        """Every tick: unless paused, move a playing replay on and take a snapshot off the UI thread."""
        if self.paused:
            return
        if not self.source.live:
            self.source.tick()
        self._take()

    @work(thread=True, exclusive=True, group="snapshot")
    def _take(self) -> None:
        self.post_message(SnapshotReady(self.source.snapshot()))

    def on_snapshot_ready(self, message: SnapshotReady) -> None:
        self.snapshot = message.snapshot
        self._draw()

    def _draw(self) -> None:
        """Title, totals and the tab in view (the others are drawn when shown: less work on
        the UI thread, so keys get through at once)."""
        snap = self.snapshot
        if snap is None:
            return
        self._draw_title(snap)
        sec = snap.seconds
        for stat, text in zip(self.query(Stat), (
                format_rate(snap.totals[READ_BYTES] / sec), format_rate(snap.totals[WRITE_BYTES] / sec),
                format_count(snap.totals[OPS] / sec), format_count(snap.totals[METADATA_OPS] / sec),
                format_count(snap.totals["lost"])), strict=True):
            stat.show(text, snap.history.get(stat.key, []))
        tab = self._tab()
        if tab == "latency":
            self.query_one("#latency-view", Static).update("\n".join(views.latency_lines(snap, self.view)))
        else:
            self._fill(self.query_one(f"#{tab}-table", DataTable), ROWS[tab](snap, self.view))

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self._draw()

    def _draw_title(self, snap: Snapshot) -> None:
        when = datetime.datetime.fromtimestamp(snap.end_ns / 1e9).strftime("%H:%M:%S")
        if self.source.live:  # until the probes are attached nothing is seen yet: say so
            mode = "live" if self.source.ready.is_set() else "attaching probes…"
        else:
            mode = f"replay {when}" + (" ▶" if self.source.playing else "")
        state = " [reverse] PAUSED [/reverse]" if self.paused else ""
        unavailable = "".join(f"  {layer}: unavailable" for layer in self.source.unavailable)
        self.query_one("#title", Label).update(
            f"[b]ioobserve top[/b]  {mode}{state}  view: {self.view.focus.describe()}  sort: {self.view.sort}"
            + (f"  filter: {self.view.text!r}" if self.view.text else "") + unavailable)

    @staticmethod
    def _fill(table: DataTable, rows: list[tuple]) -> None:
        """Replace a table's rows, keeping the cursor where it was."""
        row = table.cursor_row
        _fit_columns(table, rows)
        table.clear()
        table.add_rows(rows)
        if rows:
            table.move_cursor(row=min(row, len(rows) - 1))

    def _tab(self) -> str:
        return self.query_one(TabbedContent).active

    def on_unmount(self) -> None:
        self.source.stop()


def _fit_columns(table: DataTable, rows: list[tuple]) -> None:
    """Size each column to its label and the rows about to be shown, before they are added.

    DataTable's own auto width measures new rows only when idle, and rows drawn before that
    (a repaint under load) stay cached at the old widths: values cut short until the next
    refresh, and screenshots that depend on timing."""
    for index, column in enumerate(table.ordered_columns):
        column.auto_width = False
        column.width = max([column.label.cell_len, *(cell_len(str(row[index])) for row in rows)])


THEMES = {"dark": "textual-dark", "light": "textual-light", "ansi-dark": "ansi-dark", "ansi-light": "ansi-light"}


def make_app(source: Source, theme: str = "dark", refresh_s: float | None = REFRESH_S) -> TopApp:
    """The app over a source, in one of THEMES (ansi-*: the terminal's own colours), taking a
    snapshot every refresh_s (None: only at start and on keys, so that what a replay shows
    depends on nothing but the keys pressed); the CLI and the tests build it the same way."""
    return TopApp(source, THEMES[theme], refresh_s)
