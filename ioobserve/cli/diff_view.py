"""`diff`'s screen: the runs, their figures side by side, the changes, and each table's rows
that changed most."""

from __future__ import annotations

import polars as pl
from rich.console import Console
from rich.table import Table

from ioobserve.analysis import compare as c
from ioobserve.analysis.changes import FIGURES, MEASURES, TITLES, change_of
from ioobserve.data import schema as s


def print_comparison(comparison: c.Comparison, names: list[list[str]], threshold: int, console: Console | None = None,
                     top: int = 10) -> None:
    """Everything `diff` shows, in reading order."""
    console = console or Console()
    for which, analysis, traces in zip((c.BASELINE, c.VARIANT), (comparison.baseline, comparison.variant), names, strict=True):
        console.print(f"[bold]{which}[/bold]: {len(traces)} trace(s) from {', '.join(analysis.hosts) or '-'}, "
                      f"totals from the {analysis.layer or '-'} layer", highlight=False)
    overview = _table("Overview", "figure", c.BASELINE, c.VARIANT, "change")
    for row in comparison.overview.iter_rows(named=True):
        figure = FIGURES[row[c.FIGURE]]
        before, after = row[c.BASELINE], row[c.VARIANT]
        overview.add_row(figure.label, "-" if before is None else figure.write(before),
                         "-" if after is None else figure.write(after), change_of(before, after))
    console.print(overview)
    console.print(f"\n[bold]Changes of {threshold}% or more ({len(comparison.changes)})[/bold]")
    for change in comparison.changes:
        console.print(f"  • {change.text}", highlight=False)
    if not comparison.changes:
        console.print("  none: no figure grew or shrank that much")
    console.print()
    for name, title in TITLES.items():
        frame = comparison.tables[name]
        if name in ("jobs", "functions", "endpoints", "requests") and frame.filter(pl.col(c.TABLES[name].keys[0]).is_not_null()).is_empty():
            continue
        _compared_table(console, title, name, frame, top)


def _table(title: str, *columns: str) -> Table:
    table = Table(title=title, title_justify="left", title_style="bold")
    for index, column in enumerate(columns):
        table.add_column(column, justify="left" if index == 0 else "right", overflow="fold")
    return table


def _compared_table(console: Console, title: str, name: str, frame: pl.DataFrame, top: int) -> None:
    spec = c.TABLES[name]
    shown = [m for m in spec.measures if m in MEASURES]
    keys = [" ".join(spec.keys).replace("_", " ")]
    suffix = f", the {top} of {frame.height} that changed most" if frame.height > top else ""
    table = _table(title + suffix, *keys, *(MEASURES[m][0] for m in shown))
    for row in frame.head(top).iter_rows(named=True):
        key = " ".join("-" if row[k] is None else str(row[k]) for k in spec.keys)
        if name == "functions":
            key = f"{row[s.PY_FUNCTION]} ({row[s.PY_FILE]})"
        cells = []
        for m in shown:
            write = MEASURES[m][1]
            before, after = row[f"{m}_{c.BASELINE}"], row[f"{m}_{c.VARIANT}"]
            cells.append(f"{write(before)} → {write(after)} {change_of(before, after)}".rstrip())
        table.add_row(key, *cells)
    console.print(table)
