"""Live aggregates: batches of events folded into window totals with a few group-bys (never a
Python object per event), taken as a Snapshot one to two times a second by whoever shows
them (`top`; the same for a live capture and a replayed trace)."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import polars as pl

from ioobserve.data import schema as s
from ioobserve.data import totals
from ioobserve.data.operations import KERNEL_VIEW, KIND, READ, WRITE, op_kind

STREAM_ROWS = 500  # the most recent events kept for the event stream
HISTORY = 120  # samples kept for sparklines
LATENCY_BUCKET = "bucket"  # log2 of the duration in ns: bucket b holds [2^b, 2^(b+1)) ns
# The sums kept per process and file (ioobserve.data.totals): calls, metadata calls, bytes read and
# written, time, the longest call, and the latest call's start (which processes are still about).
OPS, METADATA_OPS = totals.CALLS, totals.METADATA_CALLS
READ_BYTES, WRITE_BYTES, TIME_NS, MAX_NS = totals.READ_BYTES, totals.WRITE_BYTES, totals.TIME_NS, totals.MAX_NS
LAST_NS = totals.LAST_START_NS
WINDOW_SUMS = (OPS, METADATA_OPS, READ_BYTES, WRITE_BYTES, TIME_NS, MAX_NS, LAST_NS)
MAX_PROCESSES = 20_000  # processes' totals kept (the most recently seen): bounded memory over days of short-lived workers
STREAM_COLUMNS = [s.TS, s.DUR, s.PID, s.COMM, s.OP, s.PATH, s.BYTES, s.RET]
PROCESS_KEYS = [s.PID]
PROCESS_NAMES = [s.COMM, s.JOB, s.RANK, s.WORKER]
# The network tab's sums per process, peer (a connection's other end, or its own for a socket
# not connected) and request operation (S3's or the method; null for the NET layer's calls):
# bytes the NET layer received and sent, its calls, and the HTTP requests made on connections
# to that peer with their total time.
PEER, RECEIVED, SENT, NET_CALLS, REQUESTS, REQUEST_NS = "peer", "received", "sent", "net_calls", "requests", "request_ns"
REQUEST_OP = "request_op"
NETWORK_SUMS = (RECEIVED, SENT, NET_CALLS, REQUESTS, REQUEST_NS)


def _resum(frames: list[pl.DataFrame], keys: list[str], names: list[str] = ()) -> pl.DataFrame:
    """Per-batch group-bys summed into one (names: the latest value)."""
    stacked = pl.concat(frames, how="vertical_relaxed")
    return stacked.group_by(keys).agg(*(pl.col(name).drop_nulls().last() for name in names), *totals.combined(*WINDOW_SUMS))


def syscall_calls(frame: pl.DataFrame) -> pl.DataFrame:
    """The kernel's view: the syscall layer's calls and the io_uring and AIO requests (the
    ground truth; other layers repeat them), with their KIND."""
    return frame.filter(pl.col(s.LAYER).is_in(KERNEL_VIEW)).with_columns(op_kind().alias(KIND))


def network_sums(frame: pl.DataFrame) -> pl.DataFrame:
    """Per process, peer and REQUEST_OP: NETWORK_SUMS of a batch's NET and HTTP events (none: an
    empty frame)."""
    net = frame.filter(pl.col(s.LAYER).is_in([s.LAYER_NET, s.LAYER_HTTP]))
    if not net.height:
        return EMPTY_NETWORK
    is_net, is_http = pl.col(s.LAYER) == s.LAYER_NET, pl.col(s.LAYER) == s.LAYER_HTTP
    connection = pl.when(is_http).then(pl.col(s.PATH2)).otherwise(pl.col(s.PATH)).cast(pl.String)
    moved = pl.col(s.BYTES).cast(pl.UInt64)
    return net.with_columns(op_kind().alias(KIND)).group_by(
        s.PID, connection.str.extract(r"->(.+)$").fill_null(connection).fill_null("?").alias(PEER),
        pl.when(is_http).then(pl.col(s.OP).cast(pl.String)).alias(REQUEST_OP)).agg(
        moved.filter(is_net & (pl.col(KIND) == READ)).sum().alias(RECEIVED),
        moved.filter(is_net & (pl.col(KIND) == WRITE)).sum().alias(SENT),
        is_net.sum().cast(pl.UInt64).alias(NET_CALLS), is_http.sum().cast(pl.UInt64).alias(REQUESTS),
        pl.col(s.DUR).filter(is_http).sum().cast(pl.UInt64).alias(REQUEST_NS))


def process_sums(calls: pl.DataFrame, by: Sequence[str | pl.Expr] = ()) -> pl.DataFrame:
    """Per process (and `by`): its names and sums, as WindowAggregator keeps them."""
    return calls.group_by(*PROCESS_KEYS, *by).agg(*(pl.col(n).drop_nulls().last() for n in PROCESS_NAMES),
                                                  *totals.over_events(*WINDOW_SUMS))


@dataclass
class Snapshot:
    """What happened in one window [start_ns, end_ns), and since the start (processes' totals)."""

    start_ns: int
    end_ns: int
    totals: dict[str, int]  # OPS, METADATA_OPS, READ_BYTES, WRITE_BYTES, TIME_NS, "lost"
    processes: pl.DataFrame  # pid, comm, job, rank, worker; this window's sums; "total_*" since the start
    files: pl.DataFrame  # pid, path: this window's sums (a file used by several processes has a row each)
    latency: pl.DataFrame  # op, LATENCY_BUCKET: count (this window)
    network: pl.DataFrame  # pid, PEER, REQUEST_OP: NETWORK_SUMS (this window)
    events: pl.DataFrame  # the most recent STREAM_ROWS events (STREAM_COLUMNS)
    history: dict[str, list[float]] = field(default_factory=dict)  # per-second rates of the last HISTORY windows

    @property
    def seconds(self) -> float:
        """The window's length."""
        return max((self.end_ns - self.start_ns) / 1e9, 1e-9)


_EMPTY_SUMS = {OPS: pl.UInt64, METADATA_OPS: pl.UInt64, READ_BYTES: pl.UInt64, WRITE_BYTES: pl.UInt64,
               TIME_NS: pl.UInt64, MAX_NS: pl.UInt64, LAST_NS: pl.UInt64}
EMPTY_PROCESSES = pl.DataFrame(schema={s.PID: pl.UInt32, s.COMM: pl.String, s.JOB: pl.String, s.RANK: pl.Int32,
                                       s.WORKER: pl.Int32, **_EMPTY_SUMS})
EMPTY_FILES = pl.DataFrame(schema={s.PID: pl.UInt32, s.PATH: pl.String, **_EMPTY_SUMS})
EMPTY_LATENCY = pl.DataFrame(schema={s.OP: pl.String, LATENCY_BUCKET: pl.Int32, "count": pl.UInt32})
EMPTY_NETWORK = pl.DataFrame(schema={s.PID: pl.UInt32, PEER: pl.String, REQUEST_OP: pl.String,
                                     **dict.fromkeys(NETWORK_SUMS, pl.UInt64)})
EMPTY_STREAM = pl.DataFrame(schema={name: s.BATCH_SCHEMA[name] for name in STREAM_COLUMNS})


class WindowAggregator:
    """Folds batches (columns of ioobserve.data.schema) into the current window; `take` closes it.
    Thread-safe: batches arrive on the collector's thread, snapshots are taken on another."""

    def __init__(self, start_ns: int, totals: pl.DataFrame | None = None) -> None:
        """totals: processes' sums before start_ns (process_sums rows, several per process allowed)."""
        self._lock = threading.Lock()
        self._window_start = start_ns
        self._parts: dict[str, list[pl.DataFrame]] = {"processes": [], "files": [], "latency": [], "network": []}
        self._stream: deque[pl.DataFrame] = deque()
        self._stream_rows = 0
        self._lost = 0
        self._totals_since_start = _resum([totals], PROCESS_KEYS, PROCESS_NAMES) if totals is not None else EMPTY_PROCESSES
        self._history: dict[str, deque[float]] = {name: deque(maxlen=HISTORY) for name in
                                                  ("read_bps", "write_bps", "iops", "metadata_ops_s", "lost")}

    def add(self, frame: pl.DataFrame) -> None:
        """Fold a batch in (its syscall layer, and its NET and HTTP layers for the network tab)."""
        network = network_sums(frame)
        if network.height:
            with self._lock:
                self._parts["network"].append(network)
        calls = syscall_calls(frame)
        if not calls.height:
            return
        processes = process_sums(calls)
        files = calls.filter(pl.col(s.PATH).is_not_null()).group_by(s.PID, s.PATH).agg(totals.over_events(*WINDOW_SUMS))
        bucket = pl.col(s.DUR).clip(lower_bound=1).log(2).floor().cast(pl.Int32).alias(LATENCY_BUCKET)
        latency = calls.group_by(pl.col(s.OP).cast(pl.String), bucket).agg(pl.len().alias("count"))
        recent = calls.select(STREAM_COLUMNS).tail(STREAM_ROWS)
        with self._lock:
            self._parts["processes"].append(processes)
            self._parts["files"].append(files)
            self._parts["latency"].append(latency)
            self._stream.append(recent)
            self._stream_rows += recent.height
            while self._stream_rows - self._stream[0].height >= STREAM_ROWS:
                self._stream_rows -= self._stream.popleft().height

    def lost(self, count: int) -> None:
        """Records the kernel could not hand over in this window."""
        with self._lock:
            self._lost += count

    def take(self, end_ns: int) -> Snapshot:
        """Close the window at end_ns and start the next one."""
        with self._lock:
            parts, self._parts = self._parts, {"processes": [], "files": [], "latency": [], "network": []}
            stream = list(self._stream)
            lost, self._lost = self._lost, 0
            start, self._window_start = self._window_start, end_ns
        processes = _resum(parts["processes"], PROCESS_KEYS, PROCESS_NAMES) if parts["processes"] else EMPTY_PROCESSES
        files = _resum(parts["files"], [s.PID, s.PATH]) if parts["files"] else EMPTY_FILES
        latency = (pl.concat(parts["latency"]).group_by(s.OP, LATENCY_BUCKET).agg(pl.col("count").sum())
                   if parts["latency"] else EMPTY_LATENCY)
        network = (pl.concat(parts["network"]).group_by(s.PID, PEER, REQUEST_OP).agg(pl.col(list(NETWORK_SUMS)).sum())
                   if parts["network"] else EMPTY_NETWORK)
        totals = {name: int(processes.get_column(name).sum() or 0) for name in (OPS, METADATA_OPS, READ_BYTES, WRITE_BYTES, TIME_NS)}
        totals["lost"] = lost
        totals_since_start = _resum([self._totals_since_start, processes], PROCESS_KEYS, PROCESS_NAMES)
        if totals_since_start.height > MAX_PROCESSES:
            totals_since_start = totals_since_start.top_k(MAX_PROCESSES, by=LAST_NS)
        self._totals_since_start = totals_since_start
        seconds = max((end_ns - start) / 1e9, 1e-9)
        for name, value in (("read_bps", totals[READ_BYTES]), ("write_bps", totals[WRITE_BYTES]), ("iops", totals[OPS]),
                            ("metadata_ops_s", totals[METADATA_OPS]), ("lost", lost)):
            self._history[name].append(value / seconds)
        named = self._totals_since_start.select(
            *PROCESS_KEYS, *PROCESS_NAMES, *(pl.col(c).alias(f"total_{c}") for c in (OPS, READ_BYTES, WRITE_BYTES, TIME_NS)))
        window = processes.drop(PROCESS_NAMES)
        return Snapshot(
            start_ns=start, end_ns=end_ns, totals=totals,
            processes=named.join(window, on=PROCESS_KEYS, how="left").with_columns(
                pl.col(list(_EMPTY_SUMS)).fill_null(0)),
            files=files, latency=latency, network=network,
            events=pl.concat(stream).tail(STREAM_ROWS) if stream else EMPTY_STREAM,
            history={name: list(values) for name, values in self._history.items()},
        )


# The sparklines' series, from the sums of each second.
_RATES = [pl.col(READ_BYTES).alias("read_bps"), pl.col(WRITE_BYTES).alias("write_bps"), pl.col(OPS).alias("iops"),
          pl.col(METADATA_OPS).alias("metadata_ops_s")]


def rates_of_seconds(sums: pl.DataFrame, second: str, first: int, end: int) -> dict[str, list[float]]:
    """The sparklines' history from process_sums rows per whole second (column `second`):
    per-second rates of seconds [first, end)."""
    per_second = sums.filter(pl.col(second).is_between(first, end, closed="left")).group_by(second).agg(
        totals.combined(*WINDOW_SUMS)).select(second, *_RATES)
    grid = pl.DataFrame({second: pl.arange(first, max(first, end), eager=True).cast(sums.schema[second])})
    full = grid.join(per_second, on=second, how="left").fill_null(0).sort(second)
    history = {name: [float(v) for v in full.get_column(name)] for name in ("read_bps", "write_bps", "iops", "metadata_ops_s")}
    history["lost"] = [0.0] * grid.height
    return history


def rates_per_second(frame: pl.DataFrame, start_ns: int, end_ns: int) -> dict[str, list[float]]:
    """The sparklines' history from recorded events: per-second rates over [start_ns, end_ns)
    (a trace's losses are per second records, not shown in replay)."""
    seconds = max(1, -(-(end_ns - start_ns) // 1_000_000_000))
    calls = frame.filter(pl.col(s.LAYER).is_in(KERNEL_VIEW) & (pl.col(s.TS) >= start_ns) & (pl.col(s.TS) < end_ns))
    sums = calls.with_columns(op_kind().alias(KIND)).group_by(((pl.col(s.TS) - start_ns) // 1_000_000_000).alias("_s")).agg(
        totals.over_events(*WINDOW_SUMS))
    return rates_of_seconds(sums, "_s", 0, seconds)
