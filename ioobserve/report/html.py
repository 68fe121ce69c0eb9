"""The self-contained HTML report of an Analysis: one file, inline CSS and SVG, no script and
no URL, so that it opens on an air-gapped cluster. Every value from a trace is escaped."""

from __future__ import annotations

import datetime
from html import escape

import polars as pl

from ioobserve.analysis import lineage as ln
from ioobserve.analysis import results as r
from ioobserve.analysis.copies import CELLS, cells
from ioobserve.analysis.requests import ENDPOINT, ERRORS, LATENCY_BUCKETS, REQUESTS, status_spread
from ioobserve.analysis.sizes import BUCKET, BUCKETS, COUNT
from ioobserve.analysis.timeline import BIN
from ioobserve.data import schema as s
from ioobserve.data.operations import DATA_KINDS, KIND, METADATA
from ioobserve.data.units import format_bytes, format_count, format_rate, format_seconds
from ioobserve.report.svg import bar_chart, flow, grouped_bars, line_chart, timeline

MAX_LANES = 32  # processes in the timeline
TOP_FILES = 15
TOP_ROWS = 20
FLOW_ROWS = 12  # boxes per column of the lineage graph

CSS = """
:root { color-scheme: light dark; --fg: #1d2025; --bg: #ffffff; --muted: #5f6672; --card: #f4f5f7; --line: #d9dce1;
        --high: #b42318; --warn: #9a6700; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e6e8eb; --bg: #16181c; --muted: #9aa3ad; --card: #20242a; --line: #343a42; --high: #ff8a80; --warn: #f2c94c; }
}
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg);
       max-width: 1100px; margin: 0 auto; padding: 24px; }
h1 { font-size: 24px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 32px 0 8px; border-bottom: 1px solid var(--line); }
.muted { color: var(--muted); } .figures { display: grid; grid-template-columns: repeat(auto-fill, minmax(190px, 1fr)); gap: 10px; }
.figure { background: var(--card); border-radius: 8px; padding: 10px 12px; }
.figure b { display: block; font-size: 20px; } .figure span { color: var(--muted); font-size: 13px; }
.insight { background: var(--card); border-left: 4px solid var(--warn); border-radius: 6px; padding: 10px 14px; margin: 10px 0; }
.insight.high { border-left-color: var(--high); } .insight .level { font-weight: 700; color: var(--warn); }
.insight.high .level { color: var(--high); } .insight ul { margin: 6px 0; } .insight .advice { color: var(--muted); }
table { border-collapse: collapse; width: 100%; font-size: 13px; margin: 8px 0; }
th, td { text-align: right; padding: 4px 8px; border-bottom: 1px solid var(--line); }
th:first-child, td:first-child { text-align: left; word-break: break-all; }
svg { display: block; margin: 8px 0 16px; color: var(--fg); }
"""


def esc(value: object) -> str:
    """A value for HTML text or an attribute, "-" for None."""
    return escape("-" if value is None else str(value), quote=True)


def _ms(ns: float | None) -> str:
    return "-" if ns is None else format_seconds(ns / 1e9)


def figure(value: str, label: str) -> str:
    """A figure card: the value large, its label under it."""
    return f'<div class="figure"><b>{esc(value)}</b><span>{esc(label)}</span></div>'


def html_table(headers: list[str], rows: list[list[object]]) -> str:
    """A table of escaped cells."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{esc(cell)}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _overview(a: r.Analysis) -> str:
    o = a.overview
    figures = [
        (format_count(o[r.CALLS] or 0), f"calls ({a.layer or '-'} layer)"),
        (format_bytes(o[r.BYTES_READ] or 0), "read"), (format_bytes(o[r.BYTES_WRITTEN] or 0), "written"),
        ("-" if o["read_write_ratio"] is None else f"{o['read_write_ratio']:.2f}", "bytes read per byte written"),
        (_ms(o[r.TIME_NS]), "in calls (sum)"), (_ms(o[r.IO_BUSY_NS]), "with I/O in progress (union)"),
        ("-" if o[r.BYTES_PER_S] is None else format_rate(o[r.BYTES_PER_S]), "bandwidth over data busy time"),
        ("-" if o["metadata_share"] is None else f"{o['metadata_share']:.0%}", "of call time in metadata"),
        (_ms(o[r.UNOVERLAPPED_NS]), "unoverlapped I/O (no thread computing)"),
        (format_count(o["processes"] or 0), "processes"), (format_count(o["files"] or 0), "files"),
    ]
    if o.get("python_io_busy_ns") is not None:
        figures += [(_ms(o["python_io_busy_ns"]), "in Python I/O calls (imports, open(), functions doing I/O)"),
                    (_ms(o["python_unoverlapped_ns"]), "of them unoverlapped")]
    return '<div class="figures">' + "".join(figure(v, label) for v, label in figures) + "</div>"


def _insights(a: r.Analysis) -> str:
    if not a.insights:
        return "<p>No insight fired: nothing in these traces crossed a threshold.</p>"
    parts = []
    for insight in a.insights:
        evidence = "".join(f"<li>{esc(item)}</li>" for item in insight.evidence)
        parts.append(
            f'<div class="insight {esc(insight.level)}"><span class="level">{esc(insight.level.upper())}</span> '
            f"<b>{esc(insight.title)}</b>: {esc(insight.detail)}"
            + (f"<ul>{evidence}</ul>" if evidence else "")
            + f'<div class="advice">Try: {esc(insight.advice)}</div></div>')
    return "".join(parts)


def _over_time(a: r.Analysis, start_ns: int) -> str:
    """Bandwidth and operations per second over time, a line per layer (0 in bins without events)."""
    width = a.timeline_ns
    if not a.timeline.height:
        return line_chart({}, title="Bandwidth per layer", y_format=format_rate) + line_chart(
            {}, title="Operations per second per layer", y_format=format_count)
    first, last = a.timeline.get_column(BIN).min(), a.timeline.get_column(BIN).max()
    grid = pl.DataFrame({BIN: pl.arange(first, last + width, width, eager=True).cast(pl.UInt64)})
    per_layer = a.timeline.group_by(s.LAYER, BIN).agg(pl.col(s.BYTES).sum(), pl.col(COUNT).sum())

    def series(value: str) -> dict[str, list[tuple[float, float]]]:
        out = {}
        # every layer in both charts, in one order: a layer keeps its colour (a flat line: it moved no bytes)
        for (layer,), rows in sorted(per_layer.partition_by(s.LAYER, as_dict=True).items()):
            full = grid.join(rows.select(BIN, value), on=BIN, how="left").fill_null(0).sort(BIN)
            out[layer] = [((b - start_ns) / 1e9, v * 1e9 / width) for b, v in full.iter_rows()]
        return out

    # what each layer moved: a syscall's bytes, a block request's, the pages the cache filled
    return (line_chart(series(s.BYTES), title="Bandwidth per layer (bytes moved per second)", y_format=format_rate)
            + line_chart(series(COUNT), title="Operations per second per layer", y_format=format_count))


def _sizes(a: r.Analysis) -> str:
    counts = {(kind, bucket): n for kind, bucket, n in a.sizes.select(
        pl.col(KIND).cast(pl.String), pl.col(BUCKET).cast(pl.String), COUNT).iter_rows()}
    series = {kind: [counts.get((kind, bucket), 0) for bucket in BUCKETS] for kind in DATA_KINDS}
    return grouped_bars(BUCKETS, series, title="Access sizes requested (Darshan's buckets)", value_format=format_count)


def _label(row: dict) -> str:
    tags = [f"rank {row[s.RANK]}"] if row.get(s.RANK) is not None else []
    tags += [f"worker {row[s.WORKER]}"] if row.get(s.WORKER) is not None else []
    return f"{row[s.COMM] or '?'} {row[s.PID]}" + (f" ({', '.join(tags)})" if tags else "")


def _lanes(a: r.Analysis, start_ns: int) -> str:
    """Each process's busy time, workers first, in order of their first I/O."""
    shown = a.processes.sort(pl.col(s.WORKER).is_null(), r.FIRST_NS).head(MAX_LANES)
    rows = []
    for row in shown.iter_rows(named=True):
        lane = a.lanes.filter((pl.col(s.HOST) == row[s.HOST]) & (pl.col(s.PID) == row[s.PID])).sort("start")
        spans = [((begin - start_ns) / 1e9, (end - start_ns) / 1e9) for begin, end in lane.select("start", "end").iter_rows()]
        rows.append((_label(row), spans))
    more = f" ({MAX_LANES} of {a.processes.height} processes)" if a.processes.height > MAX_LANES else ""
    return timeline(rows, title=f"When each process was in I/O, workers first{more}")


def _files(a: r.Analysis) -> str:
    top = a.files.head(TOP_FILES)
    chart = bar_chart(top.get_column(s.PATH).to_list(), (top.get_column(r.TIME_NS) / 1e9).to_list(),
                      title=f"Top {top.height} files by time in calls", value_format=format_seconds)
    rows = [[row[s.PATH], row[r.PROCESSES], format_count(row[r.CALLS]), format_bytes(row[r.BYTES_READ] or 0),
             format_bytes(row[r.REREAD_BYTES] or 0), format_bytes(row[r.BYTES_WRITTEN] or 0), _ms(row[r.TIME_NS])]
            for row in a.files.head(TOP_ROWS).iter_rows(named=True)]
    return chart + html_table(["path", "processes", "calls", "read", "re-read", "written", "time"], rows)


def _object_storage(a: r.Analysis) -> list[str]:
    """Object-storage requests (the HTTP layer, recorded with --layers net or tls): the objects
    that took most time, and each endpoint's requests by latency. Nothing when none was seen."""
    if not a.objects.height:
        return []
    chart = grouped_bars(list(LATENCY_BUCKETS),
                         {row[ENDPOINT] or "?": [row[bucket] for bucket in LATENCY_BUCKETS]
                          for row in a.endpoints.iter_rows(named=True)},
                         title="Requests by latency, per endpoint", value_format=format_count)
    endpoints = [[row[ENDPOINT] or "?", format_count(row[REQUESTS]), format_bytes(row[s.BYTES] or 0), _ms(row[r.TIME_NS])]
                 for row in a.endpoints.iter_rows(named=True)]
    objects = [[row[s.PATH], format_count(row[REQUESTS]), format_bytes(row[s.BYTES] or 0), _ms(row[r.TIME_NS])]
               for row in a.objects.head(TOP_ROWS).iter_rows(named=True)]
    more = f" ({TOP_ROWS} of {a.objects.height:,})" if a.objects.height > TOP_ROWS else ""
    by_operation = [[row[s.OP] or "?", format_count(row[REQUESTS]), format_count(row[ERRORS]),
                     status_spread(a.statuses, row[s.OP]), format_bytes(row[s.BYTES] or 0), _ms(row[r.TIME_NS])]
                    for row in a.requests.iter_rows(named=True)]
    shown = ["<h2>Object storage</h2>", chart, html_table(["endpoint", "requests", "bytes", "time"], endpoints),
             "<p>Requests by operation (S3's, or the method):</p>",
             html_table(["operation", "requests", "failed", "answers by status", "bytes", "time"], by_operation),
             f"<p>Objects by time in requests{esc(more)}:</p>",
             html_table(["object", "requests", "bytes", "time"], objects)]
    if a.copies.height:
        more = f" ({TOP_ROWS} of {a.copies.height:,})" if a.copies.height > TOP_ROWS else ""
        shown += [f"<p>Objects read through a local copy, bytes fetched against bytes read, most unread first{esc(more)}:</p>",
                  html_table(list(CELLS), [cells(row) for row in a.copies.head(TOP_ROWS).iter_rows(named=True)])]
    return shown


def _lineage(a: r.Analysis) -> list[str]:
    """The data the processes read and wrote: a graph of the files they used, the processes and
    the files they generated (the largest of each), and the job's files. Nothing without data files."""
    if not a.lineage.height:
        return []
    data = a.lineage.group_by(s.HOST, s.PID, s.COMM, s.PATH).agg(pl.col(ln.BYTES_READ).sum(), pl.col(ln.GENERATED).any())
    written = a.lineage.filter(ln.GENERATED).group_by(s.PATH).agg(pl.col(ln.BYTES_WRITTEN).sum())
    used = (data.filter(pl.col(ln.BYTES_READ) > 0).group_by(s.PATH).agg(pl.col(ln.BYTES_READ).sum())
            .sort(ln.BYTES_READ, s.PATH, descending=[True, False]).head(FLOW_ROWS).get_column(s.PATH).to_list())
    made = written.sort(ln.BYTES_WRITTEN, s.PATH, descending=[True, False]).head(FLOW_ROWS).get_column(s.PATH).to_list()
    touching = data.filter((pl.col(ln.BYTES_READ) > 0) & pl.col(s.PATH).is_in(used)
                           | pl.col(ln.GENERATED) & pl.col(s.PATH).is_in(made))
    procs = touching.select(s.HOST, s.PID, s.COMM).unique().sort(s.HOST, s.PID).head(FLOW_ROWS).rows()
    at = {(host, pid): index for index, (host, pid, _) in enumerate(procs)}
    links = []
    for host, pid, _, path, read, written in touching.iter_rows():
        if (host, pid) in at and read and path in used:
            links.append((0, used.index(path), at[host, pid]))
        if (host, pid) in at and written and path in made:
            links.append((1, at[host, pid], made.index(path)))
    graph = flow([used, [f"{pid} {comm or ''}".strip() for _, pid, comm in procs], made], links,
                 title="Files read → processes → files written (the largest of each)")
    rows = [[row[s.JOB] or "-", row[s.PATH], ln.role(row[ln.BYTES_READ], row[ln.GENERATED]), format_bytes(row[ln.BYTES_READ]),
             format_bytes(row[ln.BYTES_WRITTEN]), format_count(row[ln.PROCESSES])]
            for row in ln.per_job(a.lineage).head(TOP_ROWS).iter_rows(named=True)]
    return ["<h2>Lineage</h2>", graph, html_table(["job", "file", "role", "read", "written", "processes"], rows),
            f"<p>{a.derived.height:,} derived-from link(s): a file read by a process before it wrote another.</p>"]


def _short_label(row: dict) -> str:
    """pid, and w<N> for a worker: fits under a bar."""
    return f"{row[s.PID]}" + (f" w{row[s.WORKER]}" if row.get(s.WORKER) is not None else "")


def _metadata_vs_data(a: r.Analysis) -> str:
    top = a.processes.head(12)
    labels = [_short_label(row) for row in top.iter_rows(named=True)]
    series = {"data (read, write)": (top.get_column(r.DATA_NS) / 1e9).to_list(),
              METADATA: (top.get_column(r.META_NS) / 1e9).to_list()}
    return grouped_bars(labels, series, title="Data vs metadata time (pid, w = worker)",
                        value_format=format_seconds)


def _processes_table(a: r.Analysis) -> str:
    rows = [[_label(row), format_count(row[r.CALLS]), format_bytes(row[r.BYTES_READ] or 0),
             format_bytes(row[r.BYTES_WRITTEN] or 0), _ms(row[r.TIME_NS]), _ms(row[r.WALL_NS]),
             "-" if row[r.IO_SHARE] is None else f"{row[r.IO_SHARE]:.0%}"]
            for row in a.processes.head(TOP_ROWS).iter_rows(named=True)]
    spawned = "".join(f"<p>pid {esc(row[s.PPID])} started {esc(row['workers'])} worker processes in "
                      f"{esc(row['slots'])} slots over {esc(row['epochs'])} epoch(s).</p>"
                      for row in a.spawns.iter_rows(named=True))
    return html_table(["process", "calls", "read", "written", "I/O time", "seen for", "in I/O"], rows) + spawned


def render(analysis: r.Analysis, traces: list[str]) -> str:
    """The report as one HTML document."""
    a = analysis
    start_ns = a.overview.get(r.FIRST_NS) or 0
    span = ((a.overview.get(r.LAST_NS) or 0) - start_ns) / 1e9
    made = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    began = datetime.datetime.fromtimestamp(start_ns / 1e9).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z") if start_ns else "-"
    sections = [
        (f"<h1>ioobserve report</h1><p class=\"muted\">{esc(len(traces))} trace(s) from {esc(', '.join(a.hosts) or '-')}; "
         f"from {esc(began)} for {esc(format_seconds(span))}; made {esc(made)}.</p>"),
        "<h2>Overview</h2>", _overview(a),
        f"<h2>Insights ({len(a.insights)})</h2>", _insights(a),
        "<h2>Over time</h2>", _over_time(a, start_ns),
        "<h2>Processes</h2>", _lanes(a, start_ns), _metadata_vs_data(a), _processes_table(a),
        "<h2>Files</h2>", _files(a),
        *_object_storage(a),
        *_lineage(a),
        "<h2>Access sizes</h2>", _sizes(a),
        "<h2>Traces</h2>", "<ul>" + "".join(f"<li>{esc(trace)}</li>" for trace in traces) + "</ul>",
        ('<p class="muted">Busy time is the union of the calls\' intervals; bandwidth is bytes over the union of read and '
         "write calls; unoverlapped I/O is I/O time when no thread was computing (between its own I/O calls).</p>"),
    ]
    return page("ioobserve report", sections)


def page(title: str, sections: list[str]) -> str:
    """One HTML document of the sections, with the report's style."""
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{esc(title)}</title>"
            f"<style>{CSS}</style></head><body>" + "".join(sections) + "</body></html>\n")
