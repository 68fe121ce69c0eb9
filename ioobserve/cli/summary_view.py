"""The one-screen summary printed when a recording ends."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from ioobserve.data import schema as s
from ioobserve.data.units import format_bytes
from ioobserve.plumbing.deadline import UNWRITTEN
from ioobserve.probes import layers as ly
from ioobserve.sinks.summary import Summary


def short_path(path: str, width: int = 44) -> str:
    """Keep the informative end of a long path."""
    return path if len(path) <= width else "…" + path[-(width - 1) :]


LAYER_ORDER = (s.LAYER_HTTP, s.LAYER_PYTHON, s.LAYER_HDF5, s.LAYER_MPIIO, s.LAYER_STDIO, s.LAYER_POSIX, s.LAYER_SYSCALL,
               s.LAYER_IO_URING, s.LAYER_AIO, s.LAYER_TLS, s.LAYER_NET, s.LAYER_VFS, s.LAYER_BLOCK, s.LAYER_CACHE)


NOT_WALKED_SHOWN = 8  # processes named one a line whose Python frames were not read
THROTTLES_SHOWN = 4  # flood control's throttles named one a line


def print_summary(summary: Summary, result, trace_paths: list[Path], console: Console | None = None,
                  unwritten: int = 0) -> None:
    """Totals, losses (`unwritten`: captured, but not in the trace) and the top files, sized for one screen."""
    console = console or Console()
    totals = Table.grid(padding=(0, 2))
    _recording_rows(totals, summary, result, trace_paths)
    _loss_rows(totals, summary, unwritten)
    totals.add_row("processes", f"{len(summary.pids):,}")
    totals.add_row("files", f"{len(summary.files):,}")
    totals.add_row("read", format_bytes(summary.bytes_read))
    totals.add_row("written", format_bytes(summary.bytes_written))
    _job_rows(totals, summary)
    _network_rows(totals, summary, tls_probed=ly.TLS in (result.layers or {}))
    _accounting_rows(totals, summary, result)
    console.print(totals)
    if summary.disagreeing is not None:
        differ = Table(title="differ from kernel accounting", title_justify="left", show_edge=False)
        for column in ("pid", "read calls traced/kernel", "write calls traced/kernel"):
            differ.add_column(column, justify="right", no_wrap=True)
        for row in summary.disagreeing.head(5).iter_rows(named=True):
            differ.add_row(str(row["pid"]), f"{row['traced_reads']:,}/{row['read_syscalls']:,}",
                           f"{row['traced_writes']:,}/{row['write_syscalls']:,}")
        console.print(differ)
    top = Table(title="top files", title_justify="left", show_edge=False)
    for column in ("path", "calls", "read", "written"):
        top.add_column(column, justify="left" if column == "path" else "right", no_wrap=True)
    for path, calls, read, written in summary.top_files(8):
        top.add_row(short_path(path), f"{calls:,}", format_bytes(read), format_bytes(written))
    console.print(top)


def _recording_rows(totals: Table, summary: Summary, result, trace_paths: list[Path]) -> None:
    """Where the trace is, how the recording ended, its events by layer and how each was probed."""
    more = f" (+{len(trace_paths) - 1} more parts)" if len(trace_paths) > 1 else ""
    totals.add_row("trace", f"{trace_paths[0]}{more}" if trace_paths else "none kept (its files were deleted)")
    totals.add_row("duration", f"{result.duration_s:.1f} s (stopped: {result.stopped_by})")
    if result.command_status is not None:
        totals.add_row("command exit", str(result.command_status))
    totals.add_row("events", f"{summary.records:,} ({summary.calls:,} syscalls)")
    order = {layer: i for i, layer in enumerate(LAYER_ORDER)}
    layers = sorted(summary.layers.items(), key=lambda item: order.get(item[0], len(order)))
    totals.add_row("layers", ", ".join(f"{layer} {n:,}" for layer, n in layers) or "-")
    if result.layers:
        totals.add_row("probed", "; ".join(f"{layer}: {how}" for layer, how in result.layers.items()))
    if getattr(result, "exec_gate", None):
        totals.add_row("exec gate", result.exec_gate)
    refused = sorted((pid, why) for pid, why in result.frames_not_walked.items() if pid in summary.pids)
    for pid, why in refused[:NOT_WALKED_SHOWN]:
        totals.add_row("no frames", f"pid {pid}: {why}; its I/O is recorded without Python frames")
    if len(refused) > NOT_WALKED_SHOWN:
        totals.add_row("no frames", f"and {len(refused) - NOT_WALKED_SHOWN} more processes")


def _loss_rows(totals: Table, summary: Summary, unwritten: int) -> None:
    """What was lost, held back by flood control or not written, and what the recording cost."""
    dropped = {k: v for k, v in summary.lost.items() if k != UNWRITTEN}  # those are in "not written"
    lost = sum(dropped.values())
    detail = ", ".join(f"{k} {v:,}" for k, v in sorted(dropped.items())) if lost else ""
    totals.add_row("lost", f"{lost:,}" + (f" ({detail})" if detail else ""))
    for throttle in summary.throttles[:THROTTLES_SHOWN]:
        totals.add_row("throttled", throttle.describe())
    if len(summary.throttles) > THROTTLES_SHOWN:
        totals.add_row("throttled", f"and {len(summary.throttles) - THROTTLES_SHOWN} more (the trace's throttle records)")
    totals.add_row("cost", _cost(summary))
    if unwritten:
        totals.add_row("not written", f"{unwritten:,} events captured but not in the trace (see the warning below)")


def _job_rows(totals: Table, summary: Summary) -> None:
    """The Slurm jobs, ranks and application tags seen."""
    if summary.jobs:
        jobs = sorted(summary.jobs.items(), key=lambda item: item[1][1] + item[1][2], reverse=True)
        shown = ", ".join(f"{job} ({calls:,} calls, {format_bytes(read)} read, {format_bytes(written)} written)"
                          for job, (calls, read, written) in jobs[:4])
        totals.add_row("jobs", shown + (f" and {len(jobs) - 4} more" if len(jobs) > 4 else ""))
    if summary.ranks:
        ranks = sorted(summary.ranks.items())
        shown = ", ".join(f"{rank}" + (f" ({len(workers)} workers)" if workers else "") for rank, workers in ranks[:8])
        totals.add_row("ranks", shown + (f" and {len(ranks) - 8} more" if len(ranks) > 8 else ""))
    applied, malformed = summary.counters.get("tags_applied", 0), summary.counters.get("tags_malformed", 0)
    if applied or malformed:
        seen = "; ".join(f"{key}={','.join(sorted(values))}" for key, values in sorted(summary.tag_values.items()))
        totals.add_row("tags", f"{applied:,} applied" + (f", {malformed:,} malformed (ignored)" if malformed else "")
                       + (f": {seen}" if seen else ""))


def incomplete_line(writer, result) -> str | None:
    """What a trace misses, why and what it kept, in one line (None: it misses nothing).
    `result` is the RecordingResult (None if the recording did not end normally)."""
    dropped = result.dropped_at_stop if result is not None else 0
    unwritten = dropped + writer.unwritten
    if not unwritten and not writer.troubles:
        return None
    overran = result is not None and result.stop_overran
    why = list(dict.fromkeys(writer.troubles))[:2] + (["the stop deadline passed"] if overran else [])
    kept = writer.paths  # not asked of the disk: a hung one would not answer
    where = f" ({kept[0]}{' and later parts' if len(kept) > 1 else ''})" if kept else ""
    return (f"the trace misses {unwritten:,} events ({'; '.join(why) or 'not written'}); it kept "
            f"{writer.events_written:,} events in {len(kept)} file{'s' if len(kept) != 1 else ''}{where}")


def _network_rows(totals: Table, summary: Summary, tls_probed: bool) -> None:
    """HTTP requests, and (with the TLS layer on) the processes whose TLS no probe of ours reads."""
    garbled = summary.counters.get("requests_garbled", 0)
    if summary.requests or garbled:
        totals.add_row("requests", f"{summary.requests:,} HTTP requests, {format_bytes(summary.request_bytes)} answered"
                       + (f"; {garbled:,} request heads were no HTTP request" if garbled else ""))
    own = sorted(summary.own_tls.items()) if tls_probed else []
    if own:
        named = ", ".join(f"{comm} {pid}" for pid, comm in own[:NOT_WALKED_SHOWN])
        more = f" and {len(own) - NOT_WALKED_SHOWN} more" if len(own) > NOT_WALKED_SHOWN else ""
        totals.add_row("own TLS", f"{named}{more}: TLS handshakes on their sockets and no call to a probed libssl "
                       "(TLS linked in: Go, BoringSSL); their traffic is shown by socket only")


def _cost(summary: Summary) -> str:
    """What the recording cost: the probes' kernel time per event, if the kernel counted it,
    and how far behind the calls the events reached the trace writer."""
    counters = summary.counters
    run_ns, runs = counters.get("probe_run_ns", 0), counters.get("probe_runs", 0)
    if runs and summary.records:
        probes = (f"probes {run_ns / summary.records / 1000:.2f} µs of kernel time per event "
                  f"({runs:,} probe runs, {run_ns / 1e9:.2f} s)")
    else:
        probes = "probes' kernel time not counted (--probe-stats, or sysctl kernel.bpf_stats_enabled=1)"
    if "writer_lag_max_us" in counters:
        probes += (f"; events reached the writer at most {counters['writer_lag_max_us'] / 1e6:.2f} s after their "
                   f"call ended (median {counters['writer_lag_median_us'] / 1e6:.2f} s)")
    if counters.get("capture_spilled_peak_bytes"):
        probes += f"; a burst waited in the spill file ({counters['capture_spilled_peak_bytes'] / 2**20:,.0f} MiB at most)"
    return probes


def _accounting_rows(totals: Table, summary: Summary, result) -> None:
    """Traced calls and bytes of exited processes beside the kernel's own accounting."""
    from ioobserve.collect.accounting import delay_accounting_enabled

    if getattr(result, "accounting_note", None):
        totals.add_row("accounting", f"not compared: {result.accounting_note}")
        return
    if not summary.accounted:
        totals.add_row("accounting", "no process traced from its start has exited")
        return
    acc = summary.accounting
    agreeing = f"{summary.differing:,} differ" if summary.differing else "all agree"
    overruns = summary.counters.get("accounting_overruns", 0)
    missed = f" (the kernel dropped some exits {overruns:,} times: those processes are not compared)" if overruns else ""
    totals.add_row("accounting", f"{summary.accounted:,} exited processes vs the kernel's taskstats "
                                 f"(it rounds each process's counts down to a multiple of 1024): {agreeing}{missed}")
    totals.add_row("", f"read calls {acc['traced_reads']:,} traced, {acc['read_syscalls']:,} kernel; "
                       f"write calls {acc['traced_writes']:,} traced, {acc['write_syscalls']:,} kernel")
    totals.add_row("", f"read {format_bytes(acc['traced_read_bytes'])} traced, {format_bytes(acc['read_char'])} kernel; "
                       f"written {format_bytes(acc['traced_write_bytes'])} traced, {format_bytes(acc['write_char'])} kernel")
    wait = (f"block-I/O wait {acc['blkio_delay_total'] / 1e6:,.1f} ms over {acc['blkio_count']:,} waits"
            if delay_accounting_enabled() else "block-I/O wait not measured (sysctl kernel.task_delayacct=1 turns it on)")
    totals.add_row("", f"storage read {format_bytes(acc['read_bytes'])}, written {format_bytes(acc['write_bytes'])}; {wait}")
