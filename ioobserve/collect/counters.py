"""A recording's counters for its end record: what user space made of the records (beyond
events and losses) and what the recording cost."""

from __future__ import annotations

import numpy as np

from ioobserve.collect.accounting import ExitAccounting
from ioobserve.collect.capture import CaptureProcess
from ioobserve.collect.context_tables import ContextTables
from ioobserve.collect.enrich import Enricher


def recording_counters(probes, context: ContextTables, enricher: Enricher, accounting: ExitAccounting | None,
                       capture: CaptureProcess | None, lags_ns: list[int]) -> dict[str, int]:
    """Tags applied and malformed, Python chains and requests not understood; how far behind
    the calls the sinks got them (`lags_ns`: one per batch); what the exec gate held; and the
    probes' own run time and runs per program while the kernel's BPF stats were on."""
    counts = {"tags_applied": context.timeline.tags_applied, "tags_malformed": context.timeline.tags_malformed,
              "py_chains_unknown": context.stacks.unknown_chains, "requests_garbled": enricher.requests.garbled}
    if accounting is not None:
        counts["accounting_overruns"] = accounting.overruns
    if capture is not None and capture.spilled_peak:
        counts["capture_spilled_peak_bytes"] = capture.spilled_peak
    if lags_ns:
        counts["writer_lag_max_us"] = max(lags_ns) // 1000
        counts["writer_lag_median_us"] = int(np.median(lags_ns)) // 1000
    gate = getattr(probes, "gate", None)
    if gate is not None:
        counts["exec_gate_held"] = gate.report.held
        counts["exec_gate_longest_us"] = int(gate.report.longest_s * 1e6)
        counts["exec_gate_ran_on"] = len(gate.report.ran_on)
    stats = {name: ran for name, ran in probes.run_stats().items() if ran[1]}
    if stats:
        counts["probe_run_ns"] = sum(run_ns for run_ns, _ in stats.values())
        counts["probe_runs"] = sum(runs for _, runs in stats.values())
        for name, (run_ns, runs) in sorted(stats.items()):
            counts[f"probe_run_ns.{name}"], counts[f"probe_runs.{name}"] = run_ns, runs
    return counts
