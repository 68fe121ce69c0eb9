"""Charts as inline SVG strings: no script, no font, no URL, so that the report opens offline.
Text from traces (file names, process names) is escaped; axes and text use currentColor so
the charts read on light and dark pages; the output is deterministic."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from html import escape

# Okabe-Ito: told apart by colour-blind readers too.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
MAX_POINTS = 1000  # per line: more are binned, keeping each bin's highest value
LABEL_CHARS = 48
LEFT, RIGHT, TOP, BOTTOM = 70, 16, 34, 40
ROW = 18  # px per bar or lane


def _text(x: float, y: float, text: str, anchor: str = "start", size: int = 12, extra: str = "") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" fill="currentColor"{extra}>'
            f"{escape(text, quote=True)}</text>")


def _open(width: int, height: int, title: str) -> str:
    label = escape(title, quote=True)
    return (f'<svg viewBox="0 0 {width} {height}" width="100%" role="img" aria-label="{label}" '
            f'font-family="system-ui, sans-serif">' + _text(LEFT, 18, title, size=14, extra=' font-weight="600"'))


def _empty(width: int, height: int, title: str) -> str:
    return _open(width, height, title) + _text(width / 2, height / 2, "no data", "middle", extra=' opacity="0.6"') + "</svg>"


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """0 and steps of 1, 2 or 5 x 10^k up to at least `top`, about `count` of them."""
    if not top or top <= 0 or math.isnan(top):
        return [0.0, 1.0]
    raw = top / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    ticks = [0.0]
    while ticks[-1] < top - 1e-12 * step:
        ticks.append(round(ticks[-1] + step, 12))
    return ticks


def shorten(label: str, chars: int = LABEL_CHARS) -> str:
    """A long label with its middle replaced by an ellipsis."""
    if len(label) <= chars:
        return label
    keep = chars - 1
    return label[: keep // 3] + "…" + label[len(label) - (keep - keep // 3):]


def _downsample(points: Sequence[tuple[float, float]], limit: int = MAX_POINTS) -> list[tuple[float, float]]:
    """At most `limit` points: consecutive points binned, each bin its highest."""
    clean = [(x, y) for x, y in points if x is not None and y is not None and not math.isnan(x) and not math.isnan(y)]
    if len(clean) <= limit:
        return clean
    size = math.ceil(len(clean) / limit)
    return [max(clean[i:i + size], key=lambda p: p[1]) for i in range(0, len(clean), size)]


def _y_axis(ticks: list[float], y_of: Callable[[float], float], width: int, fmt: Callable[[float], str]) -> str:
    parts = []
    for tick in ticks:
        y = y_of(tick)
        parts.append(f'<line x1="{LEFT}" x2="{width - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="currentColor" '
                     f'stroke-opacity="0.15"/>')
        parts.append(_text(LEFT - 6, y + 4, fmt(tick), "end", 11))
    return "".join(parts)


def _x_axis(ticks: list[float], x_of: Callable[[float], float], y: float, label: str, width: int) -> str:
    parts = [f'<line x1="{LEFT}" x2="{width - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="currentColor" stroke-opacity="0.5"/>']
    parts += [_text(x_of(tick), y + 15, f"{tick:g}", "middle", 11) for tick in ticks]
    parts.append(_text((LEFT + width - RIGHT) / 2, y + 32, label, "middle", 11, ' opacity="0.8"'))
    return "".join(parts)


def _legend(names: Sequence[str], width: int) -> str:
    parts, x = [], width - RIGHT
    for index, name in reversed(list(enumerate(names))):
        label = shorten(name, 24)
        x -= 18 + 7 * len(label)
        parts.append(f'<rect x="{x:.1f}" y="9" width="10" height="10" fill="{PALETTE[index % len(PALETTE)]}"/>')
        parts.append(_text(x + 14, 18, label, size=11))
    return "".join(parts)


def line_chart(series: Mapping[str, Sequence[tuple[float, float]]], *, title: str, y_format: Callable[[float], str],
               x_label: str = "seconds since start", width: int = 800, height: int = 260) -> str:
    """Named series of (x, y) as lines over shared axes starting at 0, with a legend."""
    lines = {name: _downsample(points) for name, points in series.items()}
    lines = {name: points for name, points in lines.items() if points}
    if not lines or not any(y for points in lines.values() for _, y in points):
        return _empty(width, height, title)
    x_ticks = nice_ticks(max(x for points in lines.values() for x, _ in points))
    y_ticks = nice_ticks(max(y for points in lines.values() for _, y in points))
    plot_w, plot_h = width - LEFT - RIGHT, height - TOP - BOTTOM

    def x_of(x: float) -> float:
        return LEFT + plot_w * x / x_ticks[-1]

    def y_of(y: float) -> float:
        return TOP + plot_h * (1 - y / y_ticks[-1])

    parts = [_open(width, height, title), _y_axis(y_ticks, y_of, width, y_format),
             _x_axis(x_ticks, x_of, TOP + plot_h, x_label, width), _legend(list(lines), width)]
    for index, (name, points) in enumerate(lines.items()):
        coords = " ".join(f"{x_of(x):.1f},{y_of(y):.1f}" for x, y in points)
        parts.append(f'<polyline fill="none" stroke="{PALETTE[index % len(PALETTE)]}" stroke-width="1.5" '
                     f'points="{coords}"><title>{escape(name, quote=True)}</title></polyline>')
    return "".join(parts) + "</svg>"


def bar_chart(labels: Sequence[str], values: Sequence[float], *, title: str, value_format: Callable[[float], str],
              width: int = 800) -> str:
    """Horizontal bars, one row per label, each with its value at its end."""
    rows = [(str(label), float(value)) for label, value in zip(labels, values, strict=True)
            if value is not None and not math.isnan(value)]
    height = TOP + ROW * max(len(rows), 3) + 12
    if not rows or not any(value for _, value in rows):
        return _empty(width, height, title)
    left = 8 + 6.5 * min(LABEL_CHARS, max(len(shorten(label)) for label, _ in rows))
    room = width - left - RIGHT - 80
    top = max(value for _, value in rows)
    parts = [_open(width, height, title)]
    for index, (label, value) in enumerate(rows):
        y = TOP + index * ROW
        bar = room * value / top
        parts.append(_text(left - 6, y + 12, shorten(label), "end", 11)[:-7] + f"<title>{escape(label, quote=True)}</title></text>")
        parts.append(f'<rect x="{left:.1f}" y="{y + 2:.1f}" width="{bar:.1f}" height="{ROW - 5}" fill="{PALETTE[0]}"/>')
        parts.append(_text(left + bar + 4, y + 12, value_format(value), size=11))
    return "".join(parts) + "</svg>"


def grouped_bars(categories: Sequence[str], series: Mapping[str, Sequence[float]], *, title: str,
                 value_format: Callable[[float], str], width: int = 800, height: int = 260) -> str:
    """Vertical bars grouped by category, one bar per series, with a legend."""
    names = list(series)
    values = [[float(v or 0) for v in series[name]] for name in names]
    top = max((v for column in values for v in column if not math.isnan(v)), default=0)
    if not categories or not names or not top:
        return _empty(width, height, title)
    y_ticks = nice_ticks(top)
    plot_w, plot_h = width - LEFT - RIGHT, height - TOP - BOTTOM
    group = plot_w / len(categories)
    bar = group * 0.8 / len(names)

    def y_of(y: float) -> float:
        return TOP + plot_h * (1 - y / y_ticks[-1])

    parts = [_open(width, height, title), _y_axis(y_ticks, y_of, width, value_format), _legend(names, width)]
    for c, category in enumerate(categories):
        x0 = LEFT + c * group + group * 0.1
        for s, name in enumerate(names):
            value = values[s][c] if c < len(values[s]) else 0.0
            y = y_of(value)
            parts.append(f'<rect x="{x0 + s * bar:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{TOP + plot_h - y:.1f}" '
                         f'fill="{PALETTE[s % len(PALETTE)]}"><title>{escape(f"{category} {name}: {value_format(value)}", quote=True)}'
                         "</title></rect>")
        parts.append(_text(LEFT + c * group + group / 2, TOP + plot_h + 15, shorten(category, max(4, int(group / 6.5))),
                           "middle", 11))
    return "".join(parts) + "</svg>"


def timeline(rows: Sequence[tuple[str, Sequence[tuple[float, float]]]], *, title: str, x_label: str = "seconds since start",
             width: int = 800) -> str:
    """One lane per row, its (start, end) intervals as bars; intervals closer than a pixel are
    drawn as one, so the SVG stays small however many there are."""
    left = 8 + 6.5 * min(LABEL_CHARS, max((len(shorten(label)) for label, _ in rows), default=10))
    height = TOP + ROW * max(len(rows), 3) + BOTTOM
    ends = [end for _, spans in rows for _, end in spans]
    if not rows or not ends:
        return _empty(width, height, title)
    x_ticks = nice_ticks(max(ends))
    plot_w = width - left - RIGHT
    scale = plot_w / x_ticks[-1]
    parts = [_open(width, height, title)]
    for index, (label, spans) in enumerate(rows):
        y = TOP + index * ROW
        parts.append(_text(left - 6, y + 12, shorten(label), "end", 11)[:-7] + f"<title>{escape(label, quote=True)}</title></text>")
        for start, end in _pixel_spans(sorted(spans), scale):
            parts.append(f'<rect x="{left + start * scale:.1f}" y="{y + 2:.1f}" width="{max((end - start) * scale, 1):.1f}" '
                         f'height="{ROW - 5}" fill="{PALETTE[index % len(PALETTE)]}"/>')
    axis_y = TOP + ROW * len(rows) + 4
    parts.append(f'<line x1="{left:.1f}" x2="{width - RIGHT}" y1="{axis_y:.1f}" y2="{axis_y:.1f}" stroke="currentColor" '
                 f'stroke-opacity="0.5"/>')
    parts += [_text(left + tick * scale, axis_y + 15, f"{tick:g}", "middle", 11) for tick in x_ticks]
    parts.append(_text(left + plot_w / 2, axis_y + 32, x_label, "middle", 11, ' opacity="0.8"'))
    return "".join(parts) + "</svg>"


def _pixel_spans(spans: list[tuple[float, float]], scale: float) -> list[tuple[float, float]]:
    """Sorted spans with those less than a pixel apart joined."""
    joined: list[list[float]] = []
    for start, end in spans:
        if joined and (start - joined[-1][1]) * scale < 1:
            joined[-1][1] = max(joined[-1][1], end)
        else:
            joined.append([start, end])
    return [(start, end) for start, end in joined]


def flow(columns: Sequence[Sequence[str]], links: Sequence[tuple[int, int, int]], *, title: str, width: int = 800) -> str:
    """Boxes in three columns (what was read, the processes, what was written) joined by lines:
    `links` are (column, row, row of the next column) from a box to one in the column after."""
    rows = max((len(column) for column in columns), default=0)
    height = TOP + ROW * max(rows, 3) + 12
    if not rows:
        return _empty(width, height, title)
    box_w = (width - 2 * 8) / (2 * len(columns) - 1)

    def x_of(column: int) -> float:
        return 8 + column * 2 * box_w

    def y_of(column: int, row: int) -> float:
        spread = ROW * rows / max(len(columns[column]), 1)  # a short column is spread over the height
        return TOP + spread * row + spread / 2

    parts = [_open(width, height, title)]
    for column, row, onward in links:
        parts.append(f'<line x1="{x_of(column) + box_w:.1f}" y1="{y_of(column, row):.1f}" x2="{x_of(column + 1):.1f}" '
                     f'y2="{y_of(column + 1, onward):.1f}" stroke="{PALETTE[column % len(PALETTE)]}" stroke-opacity="0.5"/>')
    for column, labels in enumerate(columns):
        for row, label in enumerate(labels):
            y = y_of(column, row)
            parts.append(f'<rect x="{x_of(column):.1f}" y="{y - ROW / 2 + 2:.1f}" width="{box_w:.1f}" height="{ROW - 4}" '
                         f'rx="3" fill="{PALETTE[column % len(PALETTE)]}" fill-opacity="0.15"/>')
            parts.append(_text(x_of(column) + 4, y + 4, shorten(label, int(box_w / 6.5)), size=11)[:-7]
                         + f"<title>{escape(label, quote=True)}</title></text>")
    return "".join(parts) + "</svg>"
