"""The end-of-recording summary, accumulated batch by batch (a sink)."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from ioobserve.data import events as ev
from ioobserve.data import schema as s
from ioobserve.data import totals
from ioobserve.data.model import BatchTables
from ioobserve.data.naming import with_job_context
from ioobserve.data.operations import KERNEL_VIEW, KIND, op_kind
from ioobserve.sinks.base import Sink

MAX_DISAGREEING = 20
MAX_TAG_VALUES = 8  # per tag key, for the summary line
_COPY_OUT = "_copy_out"


@dataclass
class Throttle:
    """One cgroup's throttle: flood control held back its events past `limit` a second."""

    cgroup: str  # its path, or its id where it was not named
    job: str | None
    start_ns: int
    end_ns: int | None = None  # None: not ended when the summary was made
    dropped: int = 0
    limit: int = 0

    def describe(self) -> str:
        """'job 81234 (/slurm/.../step_0): 2.1 s, 1,234,567 events held back (limit 200,000/s)'."""
        who = f"job {self.job} ({self.cgroup})" if self.job else self.cgroup
        lasted = f"{(self.end_ns - self.start_ns) / 1e9:.1f} s" if self.end_ns is not None else "until the end"
        return f"{who}: {lasted}, {self.dropped:,} events held back (limit {self.limit:,}/s)"


@dataclass
class Summary:
    """Totals of one recording."""

    records: int = 0
    calls: int = 0
    lost: dict[str, int] = field(default_factory=dict)
    pids: set[int] = field(default_factory=set)
    ops: dict[str, int] = field(default_factory=dict)  # syscalls by name
    layers: dict[str, int] = field(default_factory=dict)  # events by layer
    bytes_read: int = 0
    bytes_written: int = 0
    files: dict[str, list[int]] = field(default_factory=dict)  # path -> [calls, read, written]
    jobs: dict[str, list[int]] = field(default_factory=dict)  # Slurm job -> [calls, read, written]
    counters: dict[str, int] = field(default_factory=dict)  # tags applied and malformed
    ranks: dict[int, set[int]] = field(default_factory=dict)  # rank -> worker ordinals seen
    tag_values: dict[str, set[str]] = field(default_factory=dict)  # tag key -> values seen (a few)
    accounting: dict[str, int] = field(default_factory=dict)  # exited processes' totals, traced and kernel's
    accounted: int = 0  # exited processes set beside the kernel's accounting
    differing: int = 0  # of which do not agree with it
    disagreeing: pl.DataFrame | None = None  # the worst of those whose counts differ
    requests: int = 0  # HTTP requests (the HTTP layer's events)
    request_bytes: int = 0  # their answers' bytes
    tls_pids: set[int] = field(default_factory=set)  # processes with TLS-layer events (a probed libssl)
    handshake_pids: dict[int, str] = field(default_factory=dict)  # pid -> comm: TLS handshakes on their sockets
    throttles: list[Throttle] = field(default_factory=list)  # cgroups flood control held back, in order

    @property
    def own_tls(self) -> dict[int, str]:
        """Processes whose sockets carried TLS handshakes but that made no call to a probed
        libssl: TLS of their own (Go, BoringSSL), seen by their sockets only."""
        return {pid: comm for pid, comm in self.handshake_pids.items() if pid not in self.tls_pids}

    @property
    def lost_total(self) -> int:
        """All records lost, every kind."""
        return sum(self.lost.values())

    def top_files(self, n: int = 10) -> list[tuple[str, int, int, int]]:
        """(path, calls, bytes read, bytes written), most bytes first."""
        rows = [(path, *totals) for path, totals in self.files.items()]
        rows.sort(key=lambda r: (r[2] + r[3], r[1]), reverse=True)
        return rows[:n]


class SummarySink(Sink):
    """Folds each batch into a Summary with a few group-bys."""

    def __init__(self) -> None:
        self.summary = Summary()

    def events(self, frame: pl.DataFrame, tables: BatchTables | None = None) -> None:
        """Add a batch's counts and bytes: an id batch with its tables (files are named in its
        few groups), or a named frame as `load` gives it (tables None)."""
        out = self.summary
        out.records += frame.height
        out.pids.update(frame.get_column(s.PID).unique().to_list())
        if tables is not None:
            frame = with_job_context(frame, tables)
        # One pass over the events, by ids (a file id names one path); everything else is
        # summed from its few groups.
        copy_out = ((pl.col(s.FLAGS) & ev.F_PAIR_OUT) != 0).alias(_COPY_OUT)
        file_key = s.PATH if tables is None else s.FILE
        groups = frame.group_by(s.LAYER, s.OP, file_key, s.JOB, copy_out).agg(
            *totals.over_events(totals.EVENTS, totals.CALLS, totals.BYTES))
        if tables is not None:
            groups = groups.join(tables.files.select(s.FILE, s.PATH), on=s.FILE, how="left")
        for layer, n in groups.group_by(s.LAYER).agg(totals.combined(totals.EVENTS)).iter_rows():
            out.layers[layer] = out.layers.get(layer, 0) + n
        # Calls, bytes and files are the kernel's view (syscalls, io_uring and AIO requests:
        # the ground truth): the layers above and below describe the same I/O again.
        kernel = groups.filter(pl.col(s.LAYER).is_in(KERNEL_VIEW)).with_columns(
            op_kind(copy_out=pl.col(_COPY_OUT)).alias(KIND))
        out.calls += int(kernel.get_column(totals.CALLS).sum() or 0)
        for op, n in kernel.group_by(s.OP).agg(totals.combined(totals.CALLS)).filter(pl.col(totals.CALLS) > 0).iter_rows():
            out.ops[op] = out.ops.get(op, 0) + n
        sums = [*totals.combined(totals.CALLS), *totals.by_kind(totals.READ_BYTES, totals.WRITE_BYTES)]
        _add_totals(out.files, kernel.filter(pl.col(s.PATH).is_not_null()).group_by(s.PATH).agg(sums))
        _add_totals(out.jobs, kernel.filter(pl.col(s.JOB).is_not_null()).group_by(s.JOB).agg(sums))
        read, written = kernel.select(sums[1:]).row(0)
        out.bytes_read += int(read or 0)
        out.bytes_written += int(written or 0)
        if frame.get_column(s.RANK).null_count() < frame.height or frame.get_column(s.TAGS).null_count() < frame.height:
            self._add_context(frame.filter(pl.col(s.LAYER).is_in(KERNEL_VIEW)))
        network = frame.filter(pl.col(s.LAYER).is_in([s.LAYER_NET, s.LAYER_TLS, s.LAYER_HTTP]))
        if network.height:
            self._add_network(network)

    def _add_network(self, frame: pl.DataFrame) -> None:
        """Count a batch's HTTP requests and note which processes do TLS, and how."""
        out = self.summary
        http = frame.filter(pl.col(s.LAYER) == s.LAYER_HTTP)
        out.requests += http.height
        out.request_bytes += int(http.get_column(s.BYTES).sum() or 0)
        out.tls_pids.update(frame.filter(pl.col(s.LAYER) == s.LAYER_TLS).get_column(s.PID).unique().to_list())
        hellos = frame.filter((pl.col(s.LAYER) == s.LAYER_NET) & ((pl.col(s.FLAGS) & ev.F_TLS_HELLO) != 0))
        comm = pl.col(s.COMM).cast(pl.String) if s.COMM in frame.columns else pl.lit(None, pl.String)  # a trace's
        for pid, name in hellos.select(s.PID, comm).unique(s.PID).iter_rows():
            out.handshake_pids.setdefault(pid, name or "pid")

    def _add_context(self, frame: pl.DataFrame) -> None:
        """Note the ranks, workers and tags a batch shows (distinct values only)."""
        out = self.summary
        if frame.get_column(s.RANK).null_count() < frame.height:
            for rank, worker in frame.select(s.RANK, s.WORKER).drop_nulls(s.RANK).unique().iter_rows():
                workers = out.ranks.setdefault(rank, set())
                if worker is not None:
                    workers.add(worker)
        if frame.get_column(s.TAGS).null_count() < frame.height:
            entries = frame.select(pl.col(s.TAGS).explode().struct.unnest()).drop_nulls().unique()
            for key, value in entries.iter_rows():
                values = out.tag_values.setdefault(key, set())
                if len(values) < MAX_TAG_VALUES:
                    values.add(value)

    def throttled(self, ts_ns: int, mark: dict) -> None:
        """Note a throttle's start, or end it with its count."""
        name = mark["cgroup_path"] or f"cgroup id {mark['cgroup_id']}"
        if mark["throttle"] == "start":
            self.summary.throttles.append(Throttle(name, mark["job"], ts_ns, limit=mark["limit"]))
            return
        for throttle in reversed(self.summary.throttles):
            if throttle.end_ns is None and throttle.cgroup == name:
                throttle.end_ns, throttle.dropped = ts_ns, mark["dropped"]
                return

    def lost(self, ts_ns: int, counts: dict[str, int]) -> None:
        """Add a loss report."""
        for name, count in counts.items():
            self.summary.lost[name] = self.summary.lost.get(name, 0) + count

    def counters(self, counts: dict[str, int]) -> None:
        """Keep the recording-wide counters."""
        self.summary.counters.update(counts)

    def accounting(self, rows: pl.DataFrame) -> None:
        """Add exited processes' accounting; keep the few that differ most."""
        out = self.summary
        out.accounted += rows.height
        for name, total in rows.drop("pid", "agrees").sum().row(0, named=True).items():
            out.accounting[name] = out.accounting.get(name, 0) + int(total or 0)
        differ = rows.filter(~pl.col("agrees"))
        out.differing += differ.height
        if differ.height:
            kept = differ if out.disagreeing is None else pl.concat([out.disagreeing, differ])
            gap = (pl.col("traced_reads").cast(pl.Int64) - pl.col("read_syscalls").cast(pl.Int64)).abs() + \
                (pl.col("traced_writes").cast(pl.Int64) - pl.col("write_syscalls").cast(pl.Int64)).abs()
            out.disagreeing = kept.sort(gap, descending=True).head(MAX_DISAGREEING)

def _add_totals(into: dict[str, list[int]], rows: pl.DataFrame) -> None:
    """Add (key, calls, read, written) rows to running totals."""
    for key, calls, read, written in rows.iter_rows():
        totals = into.setdefault(key, [0, 0, 0])
        totals[0] += calls
        totals[1] += read
        totals[2] += written
