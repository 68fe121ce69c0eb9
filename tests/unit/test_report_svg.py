"""The report's SVG charts: well-formed, escaped, bounded in size, honest about no data."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ioobserve.data.units import format_bytes, format_count, format_seconds
from ioobserve.report.svg import bar_chart, grouped_bars, line_chart, nice_ticks, shorten, timeline

HOSTILE = '<script>alert("x")</script>&'


def _parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def _all(root: ET.Element, tag: str) -> list[ET.Element]:
    return [element for element in root.iter() if element.tag == tag]


def test_nice_ticks():
    assert nice_ticks(0.93) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(7300) == [0.0, 2000.0, 4000.0, 6000.0, 8000.0]
    assert nice_ticks(0) == [0.0, 1.0]


def test_line_chart_keeps_a_spike_when_it_thins_a_long_series():
    flat = [(i / 10, 1.0) for i in range(10_000)]
    flat[5_001] = (500.1, 99.0)
    root = _parse(line_chart({"SYSCALL": flat, "BLOCK": [(0, 2), (1, 3)]}, title="t", y_format=str))
    lines = _all(root, "polyline")
    assert len(lines) == 2
    points = lines[0].get("points").split()
    assert len(points) <= 1000
    top = min(float(point.split(",")[1]) for point in points)  # SVG y grows downwards
    assert top < 60  # the spike is drawn near the top


def test_bars_lanes_and_escaping():
    root = _parse(bar_chart(["/a", HOSTILE, "/c"], [3, 2, 1], title=HOSTILE, value_format=str))
    assert len(_all(root, "rect")) == 3
    assert HOSTILE in root.get("aria-label") and "<script" not in bar_chart([HOSTILE], [1], title="t", value_format=str)
    grouped = _parse(grouped_bars(["0-100", "100-1K"], {"read": [5, 0], "write": [1, 2]}, title="sizes", value_format=str))
    assert len(_all(grouped, "rect")) == 4 + 2  # 2 categories x 2 series, 2 legend swatches
    lanes = _parse(timeline([("w0", [(0.0, 1.0)]), ("w1", [(2.0, 3.0)])], title="lanes"))
    assert len(_all(lanes, "rect")) == 2


def test_timeline_merges_what_a_pixel_cannot_tell_apart():
    dense = [(i * 1e-5, i * 1e-5 + 5e-6) for i in range(100_000)]  # 100k intervals within one second
    lone = [(5.0, 5.01)]
    svg = timeline([("busy", dense), ("once", lone)], title="lanes")
    assert len(svg) < 200_000
    rects = _all(_parse(svg), "rect")
    assert len(rects) < 1000 and float(rects[-1].get("width")) >= 1  # the lone interval stays visible


def test_no_data_says_so():
    for title, svg in (("a", line_chart({}, title="a", y_format=str)), ("b", bar_chart([], [], title="b", value_format=str)),
                       ("c", grouped_bars([], {}, title="c", value_format=str)), ("d", timeline([], title="d"))):
        assert [text.text for text in _all(_parse(svg), "text")] == [title, "no data"], svg  # its title, nothing drawn


def test_shorten_and_units():
    assert shorten("x" * 100, 20).count("…") == 1 and len(shorten("x" * 100, 20)) == 20
    assert [format_bytes(n) for n in (0, 1023, 1024, 1536)] == ["0 B", "1023 B", "1.0 KiB", "1.5 KiB"]
    assert [format_count(n) for n in (999, 12_300, 4_500_000)] == ["999", "12.3k", "4.5M"]
    assert [format_seconds(s) for s in (0.00085, 0.0125, 3.2, 59.9, 125)] == ["850 µs", "12.5 ms", "3.20 s", "59.90 s",
                                                                               "2 min 5 s"]
