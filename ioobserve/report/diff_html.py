"""The comparison of two runs as a self-contained HTML report (`diff --html`): the figures side
by side, the changes, charts of baseline against variant (operations' time and calls, layers,
call latency, Python functions) and each table's rows that changed most. Inline CSS and SVG,
as the analysis report; every value from a trace is escaped."""

from __future__ import annotations

import datetime

import polars as pl

from ioobserve.analysis import compare as c
from ioobserve.analysis import results as r
from ioobserve.analysis.changes import FIGURES, MEASURES, TITLES, change_of
from ioobserve.data import schema as s
from ioobserve.data.units import format_count, format_seconds
from ioobserve.report.html import esc, html_table, page
from ioobserve.report.svg import grouped_bars

CHART_ROWS = 8  # categories per chart
TABLE_ROWS = 20


def _key(name: str, row: dict) -> str:
    if name == "functions":
        return f"{row[s.PY_FUNCTION]} ({row[s.PY_FILE]})"
    return " ".join("-" if row[k] is None else str(row[k]) for k in c.TABLES[name].keys)


def _chart(comparison: c.Comparison, name: str, measure: str, title: str, write) -> str:
    """Baseline and variant of one measure, for the rows of a table that changed most."""
    frame = comparison.tables[name].head(CHART_ROWS)
    rows = list(frame.iter_rows(named=True))
    return grouped_bars([_key(name, row) for row in rows],
                        {side: [row[f"{measure}_{side}"] for row in rows] for side in (c.BASELINE, c.VARIANT)},
                        title=title, value_format=write)


def _overview(comparison: c.Comparison) -> str:
    rows = []
    for row in comparison.overview.iter_rows(named=True):
        figure = FIGURES[row[c.FIGURE]]
        before, after = row[c.BASELINE], row[c.VARIANT]
        rows.append([figure.label, "-" if before is None else figure.write(before),
                     "-" if after is None else figure.write(after), change_of(before, after)])
    return html_table(["figure", c.BASELINE, c.VARIANT, "change"], rows)


def _changes(comparison: c.Comparison, threshold: int) -> str:
    if not comparison.changes:
        return f"<p>No figure grew or shrank by {threshold}% or more.</p>"
    return "".join(f'<div class="insight"><span class="level">{esc(change.table.upper())}</span> {esc(change.text)}</div>'
                   for change in comparison.changes)


def _table(comparison: c.Comparison, name: str) -> str:
    spec, frame = c.TABLES[name], comparison.tables[name]
    shown = [m for m in spec.measures if m in MEASURES]
    rows = []
    for row in frame.head(TABLE_ROWS).iter_rows(named=True):
        cells = [_key(name, row)]
        for m in shown:
            write = MEASURES[m][1]
            before, after = row[f"{m}_{c.BASELINE}"], row[f"{m}_{c.VARIANT}"]
            cells.append(f"{write(before)} → {write(after)} {change_of(before, after)}".rstrip())
        rows.append(cells)
    title = f"<h3>{esc(TITLES[name])}" + (f" (the {TABLE_ROWS} of {frame.height} that changed most)" if frame.height > TABLE_ROWS
                                          else "") + "</h3>"
    return title + html_table([" ".join(spec.keys).replace("_", " "), *(MEASURES[m][0] for m in shown)], rows)


def _ns(value: float) -> str:
    return format_seconds(value / 1e9)


def render_comparison(comparison: c.Comparison, baseline: list[str], variant: list[str], threshold: int) -> str:
    """The comparison as one HTML document."""
    made = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    runs = "; ".join(f"{which}: {len(traces)} trace(s) from {', '.join(a.hosts) or '-'}"
                     for which, a, traces in ((c.BASELINE, comparison.baseline, baseline), (c.VARIANT, comparison.variant, variant)))
    shown = [name for name in TITLES if name not in ("jobs", "functions", "endpoints", "requests")
             or not comparison.tables[name].filter(pl.col(c.TABLES[name].keys[0]).is_not_null()).is_empty()]
    sections = [
        f'<h1>ioobserve diff</h1><p class="muted">{esc(runs)}; made {esc(made)}.</p>',
        "<h2>Overview</h2>", _overview(comparison),
        f"<h2>Changes of {threshold}% or more ({len(comparison.changes)})</h2>", _changes(comparison, threshold),
        "<h2>Baseline against variant</h2>",
        _chart(comparison, "ops", r.TIME_NS, "time in calls per operation", _ns),
        _chart(comparison, "ops", r.CALLS, "calls per operation", format_count),
        _chart(comparison, "layers", r.TIME_NS, "time per layer (every event)", _ns),
        _chart(comparison, "latency", "p99_ns", "99th percentile of call duration", _ns),
        _chart(comparison, "latency", "p50_ns", "median call duration", _ns),
        *([_chart(comparison, "functions", r.TIME_NS, "I/O time per Python function", _ns)] if "functions" in shown else []),
        "<h2>Tables</h2>", *(_table(comparison, name) for name in shown),
        "<h2>Traces</h2>",
        *(f"<p><b>{which}</b></p><ul>" + "".join(f"<li>{esc(t)}</li>" for t in traces) + "</ul>"
          for which, traces in ((c.BASELINE, baseline), (c.VARIANT, variant))),
    ]
    return page("ioobserve diff", sections)
