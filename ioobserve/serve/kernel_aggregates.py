"""The kernel's aggregates (counts, sums and log2 histograms per cgroup, user, operation and
device) as labelled Polars frames: the metrics' numbers, with no kernel in sight (tests feed
rows built by hand).

Labels are few and bounded, as Prometheus wants: node, job (the Slurm job, else the
Kubernetes pod, else ""), user, layer (syscall, block, cache, net: the op says which), op,
mountpoint, and endpoint: a socket call's service end (`tcp:10.0.0.9:443`, the net layer's;
its rows' dev is the end's hash in the kernel's endpoint_names, not a device)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from ioobserve.data import events as ev
from ioobserve.data import schema as s
from ioobserve.data import totals
from ioobserve.data.operations import DATA_KINDS, KIND, layer_of, op_kind

LABELS = ("node", "job", "namespace", "pod", "user", "layer", "op", "mountpoint", "endpoint")
REQ_BYTES, CACHE_BYTES = "req_bytes", "cache_bytes"  # the kernel's aggregates' own: bytes asked for, pages cached
SUMS = (totals.CALLS, totals.ERRORS, totals.READ_BYTES, totals.WRITE_BYTES, REQ_BYTES, CACHE_BYTES, totals.TIME_NS)
# Histogram bounds, inclusive (slot k of the kernel holds values <= 2^k): 1 µs .. 34 s, 1 B .. 1 GiB.
LATENCY_SLOTS = range(10, 36)
SIZE_SLOTS = range(31)
OP = pl.Enum(list(dict.fromkeys(ev.OP_LABELS)))
# The layer label of each op code: the trace's layer names in lower case (syscall, block, cache, ...).
LAYER_OF_OP = np.asarray([layer_of(code).lower() for code in range(len(ev.OP_LABELS))], dtype=object)
CACHE = s.LAYER_CACHE.lower()
NET = s.LAYER_NET.lower()


KEY_SCHEMA = {"cgroup_id": pl.UInt64, "uid": pl.UInt32, "dev": pl.UInt32, "out": pl.UInt16}


def _ops(key: np.ndarray) -> pl.Series:
    """Operation names of AGG_KEY rows."""
    names = np.asarray(ev.OP_LABELS, dtype=object)[key["op"]] if len(key) else np.array([], dtype=object)
    return pl.Series(names, dtype=pl.String)


def _layers(key: np.ndarray) -> pl.Series:
    """The layer of each AGG_KEY row's op."""
    return pl.Series(LAYER_OF_OP[key["op"]] if len(key) else np.array([], dtype=object), dtype=pl.String)


def call_frame(entries: np.ndarray) -> pl.DataFrame:
    """ev.AGG_ENTRY rows as columns: cgroup_id, uid, dev, layer, op (name), out, and the value's sums."""
    key, value = entries["key"], entries["value"]
    return pl.DataFrame({
        "cgroup_id": key["cgroup_id"], "uid": key["uid"], "dev": key["dev"], "layer": _layers(key), "op": _ops(key),
        "out": key["out"], **{name: value[name] for name in ev.AGG_SUMS},
    }, schema_overrides=KEY_SCHEMA)


def hist_frame(entries: np.ndarray) -> pl.DataFrame:
    """The histograms of ev.AGG_ENTRY rows, one row per slot in use: cgroup_id, uid, dev, layer,
    op, out, kind, slot, count."""
    parts = []
    for kind, column in ((ev.AGG_LATENCY, "latency"), (ev.AGG_SIZE, "size")):
        counts = entries["value"][column].reshape(len(entries), ev.AGG_SLOTS)
        row, slot = np.nonzero(counts)
        key = entries["key"][row]
        parts.append(pl.DataFrame({
            "cgroup_id": key["cgroup_id"], "uid": key["uid"], "dev": key["dev"], "layer": _layers(key), "op": _ops(key),
            "out": key["out"], "kind": np.full(len(row), kind, dtype=np.uint32), "slot": slot.astype(np.uint32), "count": counts[row, slot],
        }, schema_overrides={**KEY_SCHEMA, "kind": pl.UInt32, "slot": pl.UInt32, "count": pl.UInt64}))
    return pl.concat(parts)


def _kind() -> pl.Expr:
    """The KIND of each row's op (ioobserve.data.operations): block reads and writes are reads and
    writes; the page cache's changes are OTHER (their bytes are cache_bytes)."""
    return op_kind(pl.col("op").cast(pl.String), pl.col("layer").str.to_uppercase(), pl.col("out") > 0)


def _counted_once() -> pl.Expr:
    """A two-file call's second record (out 2) repeats the call its first one counted."""
    return pl.col("out") != 2


def call_sums(calls: pl.DataFrame) -> pl.DataFrame:
    """Per key: calls, errors, bytes read and written (by the op's kind and side), bytes asked for,
    bytes of pages entering the page cache, time (the kernel summed each op's events: these
    combine its sums as ioobserve.data.totals combines any view's)."""
    once = _counted_once()
    zero = pl.lit(0, pl.UInt64)
    rows = calls.with_columns(
        _kind().alias(KIND), pl.col("ret_sum").alias(totals.BYTES),
        *(pl.when(once).then(pl.col(name)).otherwise(zero).alias(name) for name in (totals.CALLS, totals.ERRORS, totals.TIME_NS)))
    return rows.group_by("cgroup_id", "uid", "dev", "layer", "op", maintain_order=True).agg(
        *totals.combined(totals.CALLS, totals.ERRORS), *totals.by_kind(totals.READ_BYTES, totals.WRITE_BYTES),
        pl.col("req_sum").filter(once & pl.col(KIND).is_in(DATA_KINDS)).sum().alias(REQ_BYTES),
        pl.col(totals.BYTES).filter(pl.col("layer") == CACHE).sum().alias(CACHE_BYTES),
        *totals.combined(totals.TIME_NS),
    )


@dataclass
class LabelMaps:
    """What the ids mean: cgroup id -> job, Kubernetes namespace and pod name; uid -> user;
    kernel dev -> mount point; a net row's dev (a hash) -> its endpoint."""

    node: str
    jobs: dict[int, str] = field(default_factory=dict)
    namespaces: dict[int, str] = field(default_factory=dict)
    pods: dict[int, str] = field(default_factory=dict)
    users: dict[int, str] = field(default_factory=dict)
    mountpoints: dict[int, str] = field(default_factory=dict)
    endpoints: dict[int, str] = field(default_factory=dict)

    def label(self, frame: pl.DataFrame) -> pl.DataFrame:
        """The frame's ids replaced by LABELS (ids without a name: "" for jobs, mounts and
        endpoints, the uid for users)."""
        def mapping(column: str, values: dict[int, str]) -> pl.Expr:
            return pl.col(column).replace_strict(list(values), list(values.values()), default=None, return_dtype=pl.String) \
                if values else pl.lit(None, pl.String)

        return frame.with_columns(
            pl.lit(self.node).alias("node"),
            mapping("cgroup_id", self.jobs).fill_null("").alias("job"),
            mapping("cgroup_id", self.namespaces).fill_null("").alias("namespace"),
            mapping("cgroup_id", self.pods).fill_null("").alias("pod"),
            mapping("uid", self.users).fill_null(pl.col("uid").cast(pl.String)).alias("user"),
            pl.when(pl.col("layer") != NET).then(mapping("dev", self.mountpoints)).fill_null("").alias("mountpoint"),
            pl.when(pl.col("layer") == NET).then(mapping("dev", self.endpoints)).fill_null("").alias("endpoint"),
        ).drop("cgroup_id", "uid", "dev")


def by_labels(frame: pl.DataFrame, columns) -> pl.DataFrame:
    """Sums of `columns` per label set."""
    return frame.group_by(LABELS).agg(
        totals.TOTALS[c].combine(pl.col(c)).alias(c) if c in totals.TOTALS else pl.col(c).sum() for c in columns)


def cumulative_buckets(hist: pl.DataFrame, kind: int, slots: range) -> pl.DataFrame:
    """Per label set: the count at or below each bound 2^slot (LATENCY_SLOTS or SIZE_SLOTS), and all."""
    rows = hist.filter((pl.col("kind") == kind) & _counted_once())
    if kind == ev.AGG_LATENCY:
        rows = rows.filter(pl.col("layer") != CACHE)  # page cache changes have no duration
    if kind == ev.AGG_SIZE:
        rows = rows.filter(_kind().is_in(DATA_KINDS))
    per_slot = rows.group_by(*LABELS, "slot").agg(pl.col("count").sum())
    bounds = pl.DataFrame({"bound": list(slots)}, schema={"bound": pl.UInt32})
    per_bound = per_slot.join(bounds, how="cross").filter(pl.col("slot") <= pl.col("bound"))
    below = per_bound.group_by(*LABELS, "bound").agg(pl.col("count").sum())
    total = per_slot.group_by(LABELS).agg(pl.col("count").sum().alias("total"))
    grid = total.join(bounds, how="cross")
    return grid.join(below, on=[*LABELS, "bound"], how="left").with_columns(pl.col("count").fill_null(0)) \
        .sort(*LABELS, "bound")


JOB_KEEP_S = 3600.0  # a finished job's series stay this long after its last cgroup went, then are let go


class Carry:
    """The sums of cgroups that are gone, kept in user space once their kernel entries are
    removed (the tables stay bounded, and a counter never goes down). Series of a job none of
    whose cgroups is left are let go JOB_KEEP_S later; those of no job stay."""

    def __init__(self) -> None:
        self.sums: pl.DataFrame | None = None  # LABELS + SUMS
        self.hist: pl.DataFrame | None = None  # labelled hist_frame rows: LABELS + out, kind, slot, count
        self._since: dict[str, float] = {}  # job -> when it was last carried

    def add(self, sums: pl.DataFrame, hist: pl.DataFrame, now: float) -> None:
        """Labelled call_sums and hist rows of cgroups that are gone."""
        self.sums = by_labels(pl.concat([f for f in (self.sums, sums.select(*LABELS, *SUMS)) if f is not None]), SUMS)
        keys = [*LABELS, "out", "kind", "slot"]
        rows = [f for f in (self.hist, hist.select(*keys, "count")) if f is not None]
        self.hist = pl.concat(rows).group_by(keys).agg(pl.col("count").sum())
        for job in sums.get_column("job").unique().to_list():
            if job:
                self._since[job] = now

    def release(self, live_jobs: set[str], now: float) -> None:
        """Let go of finished jobs' series (none of their cgroups left, carried long enough)."""
        done = [job for job, since in self._since.items() if job not in live_jobs and now - since >= JOB_KEEP_S]
        if not done:
            return
        for job in done:
            del self._since[job]
        self.sums = self.sums.filter(~pl.col("job").is_in(done))
        self.hist = self.hist.filter(~pl.col("job").is_in(done))

    def with_sums(self, sums: pl.DataFrame) -> pl.DataFrame:
        """Live labelled call_sums plus the carried ones, per label set."""
        return by_labels(pl.concat([sums.select(*LABELS, *SUMS), *([self.sums] if self.sums is not None else [])]), SUMS)

    def with_hist(self, hist: pl.DataFrame) -> pl.DataFrame:
        """Live labelled hist rows plus the carried ones."""
        keys = [*LABELS, "out", "kind", "slot", "count"]
        return pl.concat([hist.select(keys), *([self.hist.select(keys)] if self.hist is not None else [])])
