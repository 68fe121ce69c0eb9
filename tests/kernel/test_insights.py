"""Insights on real workloads: each pattern raises its own insight, the clean one none."""

from __future__ import annotations

import sys

import pytest

from ioobserve.analysis.engine import analyze_partial
from ioobserve.analysis.insights import insights
from ioobserve.analysis.results import results
from ioobserve.analysis.trace_partial import Filters
from tests.conftest import ROOT
from tests.kernel.recorder import Recorder, Workload, json_line

PATTERNS = str(ROOT / "tests" / "workloads" / "io_patterns.py")
EXPECTED = {
    "clean": set(),
    "small": {"small-io"},
    "random": {"small-io", "random-access"},
    "metadata": {"metadata-storm", "stat-before-open", "many-small-files"},
    "fsync": {"fsync-storm"},
    "tiny": {"tiny-writes", "small-io"},
    "rereads": {"re-reads"},
}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """One recording of every mode's workload (each in its own directory): the trace and pids."""
    import os

    if os.geteuid() != 0:
        return None
    base = tmp_path_factory.mktemp("insights")
    workloads = {}
    for mode in EXPECTED:
        (base / mode).mkdir()
        workloads[mode] = Workload([sys.executable, PATTERNS, mode, str(base / mode)])
    recorder = Recorder(base / "trace", *(arg for w in workloads.values() for arg in ("--pid", str(w.pid))))
    reports = {mode: json_line(w.go(), "mode") for mode, w in workloads.items()}
    code, _, err = recorder.stop()
    assert code == 0, err
    return recorder.traces(), reports


@pytest.mark.kernel
@pytest.mark.parametrize("mode", list(EXPECTED))
def test_each_pattern_raises_its_insight_and_the_clean_one_none(root_required, recorded, mode):
    traces, reports = recorded
    analysis = results(analyze_partial(traces, Filters(pids=(reports[mode]["pid"],))))
    found = insights(analysis)
    # exactly the calls it made on its own files (the path filter leaves out its stdin and stdout)
    on_files = results(analyze_partial(traces, Filters(pids=(reports[mode]["pid"],), path_prefixes=(reports[mode]["dir"],))))
    assert on_files.overview["calls"] == reports[mode]["file_calls"]
    assert {insight.code for insight in found} == EXPECTED[mode], [(i.code, i.detail) for i in found]
    for insight in found:  # each cites its numbers and says what to try
        assert any(ch.isdigit() for ch in insight.detail) and insight.advice
