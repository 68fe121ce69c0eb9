"""What a recording cost, stated by `record`: the probes' kernel run time per program (with
--probe-stats) and how far behind the calls the writer ran, in the summary and the end record."""

from __future__ import annotations

import sys

from ioobserve.trace.read.reader import own_records
from tests.kernel.recorder import record_command

STATS = 5000
WORKLOAD = [sys.executable, "-c", f"import os\nfor _ in range({STATS}):\n    os.stat('/')"]


def _end_counters(out) -> dict:
    (end,) = own_records(sorted(out.glob("*.pfw.gz"))[0], "end")
    return end["args"]["counters"]


def test_probe_stats_count_every_traced_syscall(root_required, tmp_path):
    done = record_command(tmp_path / "trace", WORKLOAD, "--probe-stats")
    assert done.returncode == 0, done.stderr
    counters = _end_counters(tmp_path / "trace")
    # Every stat of the workload ran both syscall programs (other processes' calls come on top).
    assert counters["probe_runs.on_sys_enter"] >= STATS and counters["probe_runs.on_sys_exit"] >= STATS
    assert counters["probe_run_ns.on_sys_enter"] > 0
    assert counters["probe_runs"] == sum(v for k, v in counters.items() if k.startswith("probe_runs."))
    assert 0 <= counters["writer_lag_median_us"] <= counters["writer_lag_max_us"] < 300e6
    summary = " ".join(done.stdout.split())
    assert "µs of kernel time per event" in summary and "events reached the writer at most" in summary, summary


def test_without_probe_stats_the_summary_says_so(root_required, tmp_path):
    with open("/proc/sys/kernel/bpf_stats_enabled") as switch:
        node_wide = switch.read().strip() == "1"
    done = record_command(tmp_path / "trace", WORKLOAD)
    assert done.returncode == 0, done.stderr
    counters = _end_counters(tmp_path / "trace")
    summary = " ".join(done.stdout.split())
    if node_wide:  # an admin turned the stats on for the node: they are counted anyway
        assert counters["probe_runs.on_sys_enter"] >= STATS
    else:
        assert not any(k.startswith("probe_run") for k in counters), counters
        assert "kernel time not counted (--probe-stats" in summary, summary
    assert "events reached the writer at most" in summary, summary
