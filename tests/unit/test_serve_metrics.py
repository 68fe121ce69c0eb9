"""`serve`'s metrics from kernel aggregate rows built by hand (no kernel): sums per label set,
a two-file call counted once, cumulative histogram buckets, and the Grafana dashboard asking
only for series the collector exposes."""

from __future__ import annotations

import json
import re
import time

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ioobserve.data import events as ev
from ioobserve.serve import kernel_aggregates as agg
from ioobserve.serve.metrics import KernelCollector
from tests.conftest import ROOT

JOB_CG, OTHER_CG, DEV = 70, 80, 1 << 20 | 3


def _entries(calls=(), hist=(), dev: int = DEV) -> np.ndarray:
    """AGG_ENTRY rows as the kernel keeps them: calls (cgroup, op, out, calls, errors, ret_sum,
    req_sum, time_ns) and histogram counts (cgroup, op, out, kind, slot, count) by key."""
    keys = list(dict.fromkeys([row[:3] for row in calls] + [row[:3] for row in hist]))
    out = np.zeros(len(keys), dtype=ev.AGG_ENTRY)
    for i, (cgroup, op, out_side) in enumerate(keys):
        out[i]["key"] = (cgroup, 0, dev, ev.OP_CODES[op], out_side, 0)
    for cgroup, op, out_side, *sums in calls:
        value = out[keys.index((cgroup, op, out_side))]["value"]
        for name, number in zip(ev.AGG_SUMS, sums):
            value[name] = number
    for cgroup, op, out_side, kind, slot, count in hist:
        out[keys.index((cgroup, op, out_side))]["value"]["latency" if kind == ev.AGG_LATENCY else "size"][slot] = count
    return out


class _Probes:
    """The calls KernelCollector makes of the probes."""

    def __init__(self, entries, endpoints=None):
        self.tables = self  # the probes' maps (probes.tables), which this stand-in keeps itself
        self.entries = entries
        self.endpoints = endpoints or {}
        self.endpoint_reads = 0
        self.flood_limit = 0
        self.floods = np.zeros(0, dtype=[("cgroup_id", "<u8"), *ev.FLOOD_STATE.descr])

    def endpoint_names(self):
        self.endpoint_reads += 1
        return self.endpoints

    def aggregates(self):
        return self.entries, 2

    def forget_aggregates(self, cgroup_ids):
        self.entries = self.entries[~np.isin(self.entries["key"]["cgroup_id"], list(cgroup_ids))]

    def lost_counts(self):
        lost = np.zeros(ev.LOST_SLOTS, dtype=np.uint64)
        lost[:2] = 3, 4
        lost[ev.LOST_THROTTLED] = 90  # held back by flood control: a count of its own, not lost
        return lost

    def flood_states(self):
        return self.floods

    def run_stats(self):  # the probes' (run ns, runs) per program, as the kernel's BPF stats give them
        return {"on_sys_enter": (9_000, 100), "on_sys_exit": (12_000, 100), "on_block_rq_merge": (0, 0)}


class _Cgroups:
    def __init__(self):
        self.removed, self.forgotten = set(), set()

    def gone(self, ids):
        return {i for i in ids if i in self.removed}

    def forget(self, ids):
        self.forgotten |= set(ids)

    def lookup(self, ids):
        from ioobserve.data.model import CgroupContext

        return {i: CgroupContext(path=f"/x/{i}", job="77" if i == JOB_CG else None) for i in ids}


def _collector(probes, cgroups=None) -> KernelCollector:
    collector = KernelCollector(probes, "n1", cgroups=cgroups or _Cgroups())
    collector.maps.mountpoints[DEV] = "/data"
    collector._mounts_read = float("inf")  # no mountinfo in a unit test
    return collector


def _scrape(probes, collector=None) -> dict:
    registry = CollectorRegistry()
    registry.register(collector or _collector(probes))
    text = generate_latest(registry).decode()
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def _io(metrics: dict) -> dict:
    """The I/O series, without the observer's own CPU and memory (which change at each scrape)."""
    return {key: value for key, value in metrics.items() if not key[0].startswith("ioobserve_agent_")}


def _get(metrics: dict, name: str, **labels) -> float:
    return sum(v for (n, found), v in metrics.items() if n == name and labels.items() <= dict(found).items())


def test_sums_per_label_set_and_a_copy_counted_once():
    entries = _entries(calls=[
        (JOB_CG, "read", 0, 10, 1, 40960, 40960, 5000),
        (JOB_CG, "write", 0, 4, 0, 1000, 1000, 800),
        (JOB_CG, "sendfile", 0, 2, 0, 300, 300, 100),   # its input side: a read
        (JOB_CG, "sendfile", 2, 2, 0, 300, 300, 100),   # its output side, the same calls: a write
        (OTHER_CG, "openat", 0, 3, 2, 12, 0, 900),
    ])
    m = _scrape(_Probes(entries))
    job = {"job": "77", "node": "n1", "mountpoint": "/data", "layer": "syscall", "user": "root"}
    assert _get(m, "ioobserve_calls_total", op="read", **job) == 10
    assert _get(m, "ioobserve_errors_total", op="read", **job) == 1
    assert _get(m, "ioobserve_read_bytes_total", op="read", **job) == 40960
    assert _get(m, "ioobserve_write_bytes_total", op="read", **job) == 0
    assert _get(m, "ioobserve_call_seconds_total", op="write", **job) == 800e-9
    assert _get(m, "ioobserve_calls_total", op="sendfile", **job) == 2  # not 4
    assert (_get(m, "ioobserve_read_bytes_total", op="sendfile"), _get(m, "ioobserve_write_bytes_total", op="sendfile")) == (300, 300)
    assert _get(m, "ioobserve_calls_total", op="openat", job="") == 3  # outside any job
    assert _get(m, "ioobserve_read_bytes_total", op="openat") == 0  # an fd is not bytes
    assert _get(m, "ioobserve_aggregation_dropped_total") == 2 and _get(m, "ioobserve_lost_events_total") == 7


def _endpoint(family: int, kind: int, address: bytes, port: int) -> np.void:
    end = np.zeros(1, dtype=ev.ENDPOINT)[0]
    end["family"], end["type"], end["port"] = family, kind, port
    end["addr"][:len(address)] = np.frombuffer(address, dtype=np.uint8)
    return end


def test_socket_calls_are_labelled_by_their_endpoint_and_no_mount_point():
    v4, v6 = 0x9E3779B9, DEV  # hashes; one equal to a device number, which must not name a mount
    entries = np.concatenate([
        _entries(calls=[(JOB_CG, "recvfrom", 0, 5, 0, 5000, 5000, 10)], dev=v4),
        _entries(calls=[(JOB_CG, "sendto", 0, 2, 0, 300, 300, 10)], dev=v6),
        _entries(calls=[(JOB_CG, "net_read", 0, 1, 0, 7, 7, 1)], dev=0xDEAD),  # a hash the kernel no longer names
    ])
    probes = _Probes(entries, {v4: _endpoint(ev.AF_INET, 1, bytes([10, 0, 0, 9]), 443),
                               v6: _endpoint(ev.AF_INET6, 2, bytes(15) + b"\x01", 53)})
    collector = _collector(probes)
    m = _scrape(probes, collector)
    net = {"job": "77", "layer": "net", "mountpoint": ""}
    assert _get(m, "ioobserve_read_bytes_total", endpoint="tcp:10.0.0.9:443", op="recvfrom", **net) == 5000
    assert _get(m, "ioobserve_write_bytes_total", endpoint="udp:[::1]:53", op="sendto", **net) == 300
    assert _get(m, "ioobserve_calls_total", endpoint="", op="read", **net) == 1
    assert _get(m, "ioobserve_calls_total", mountpoint="/data") == 0
    reads = probes.endpoint_reads
    _scrape(probes, collector)
    assert probes.endpoint_reads == reads + 1  # read again only while a hash is unnamed
    probes.entries = probes.entries[:2]
    _scrape(probes, collector)
    assert probes.endpoint_reads == reads + 1


def test_histogram_buckets_are_cumulative_with_inclusive_bounds():
    hist = [
        (JOB_CG, "read", 0, ev.AGG_SIZE, 12, 5),      # 4 KiB requests: slot 12 is "<= 4096"
        (JOB_CG, "read", 0, ev.AGG_SIZE, 20, 1),      # one 1 MiB request
        (JOB_CG, "read", 0, ev.AGG_LATENCY, 9, 2),    # <= 512 ns: below the first bound (1 µs), counted there
        (JOB_CG, "read", 0, ev.AGG_LATENCY, 14, 4),   # <= 16 µs
        (JOB_CG, "read", 0, ev.AGG_LATENCY, 39, 1),   # beyond the last bound (34 s): +Inf only
        (JOB_CG, "openat", 0, ev.AGG_SIZE, 3, 9),     # not a data op: no size histogram
    ]
    calls = [(JOB_CG, "read", 0, 7, 0, 0, 5 * 4096 + (1 << 20), 0)]
    m = _scrape(_Probes(_entries(calls, hist)))
    size = "ioobserve_request_size_bytes_bucket"
    assert [_get(m, size, op="read", le=le) for le in ("2048.0", "4096.0", "524288.0", "1048576.0", "+Inf")] == [0, 5, 5, 6, 6]
    assert _get(m, "ioobserve_request_size_bytes_sum", op="read") == 5 * 4096 + (1 << 20)
    assert _get(m, size, op="openat") == 0
    latency = "ioobserve_call_duration_seconds_bucket"
    first, last = repr(2 ** 10 / 1e9), repr(2 ** 35 / 1e9)
    assert [_get(m, latency, op="read", le=le) for le in (first, repr(2 ** 14 / 1e9), last, "+Inf")] == [2, 6, 6, 7]
    assert _get(m, "ioobserve_call_duration_seconds_count", op="read") == 7


def test_cumulative_buckets_against_a_direct_count():
    rng = np.random.default_rng(3)
    slots = rng.integers(0, ev.AGG_SLOTS, 200)
    hist = agg.hist_frame(_entries(hist=[(JOB_CG, "read", 0, ev.AGG_SIZE, int(s), int((slots == s).sum()))
                                         for s in np.unique(slots)]))
    assert hist.get_column("count").sum() == len(slots)
    labelled = agg.LabelMaps("n").label(hist)
    buckets = agg.cumulative_buckets(labelled, ev.AGG_SIZE, agg.SIZE_SLOTS)
    for bound, count in buckets.select("bound", "count").iter_rows():
        assert count == int((slots <= bound).sum())


def test_histograms_come_out_of_the_kernel_value_by_kind_and_slot():
    entries = _entries(calls=[(JOB_CG, "read", 0, 3, 0, 0, 0, 0), (OTHER_CG, "stat", 0, 1, 0, 0, 0, 0)],
                       hist=[(JOB_CG, "read", 0, ev.AGG_LATENCY, 11, 2), (JOB_CG, "read", 0, ev.AGG_SIZE, 12, 3),
                             (OTHER_CG, "stat", 0, ev.AGG_LATENCY, ev.AGG_SLOTS - 1, 1)])
    hist = agg.hist_frame(entries).sort("cgroup_id", "kind")
    assert hist.select("cgroup_id", "op", "kind", "slot", "count").rows() == [
        (JOB_CG, "read", ev.AGG_LATENCY, 11, 2), (JOB_CG, "read", ev.AGG_SIZE, 12, 3),
        (OTHER_CG, "stat", ev.AGG_LATENCY, ev.AGG_SLOTS - 1, 1)]
    assert agg.hist_frame(entries[:0]).height == 0


def test_the_dashboard_asks_only_for_exposed_series():
    entries = _entries([(JOB_CG, "read", 0, 1, 0, 1, 1, 1)],
                       [(JOB_CG, "read", 0, ev.AGG_SIZE, 1, 1), (JOB_CG, "read", 0, ev.AGG_LATENCY, 11, 1)])
    probes = _Probes(entries)
    probes.flood_limit, probes.floods = 1000, np.array([(JOB_CG, 5, 1, 60, 9, 9)], dtype=probes.floods.dtype)
    exposed = {name for name, _ in _scrape(probes)}
    dashboard = json.loads((ROOT / "deploy" / "grafana" / "ioobserve-dashboard.json").read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    exprs += [var["query"]["query"] for var in dashboard["templating"]["list"] if isinstance(var.get("query"), dict)]
    asked = {name for expr in exprs for name in re.findall(r"ioobserve_[a-z_]+", expr)}
    assert asked and asked <= exposed, asked - exposed
    for expr in exprs:  # labels the panels group or filter by are ours
        for label in re.findall(r"by \(([^)]*)\)", expr):
            assert {part.strip() for part in label.split(",")} <= {*agg.LABELS, "le", "program", "mode"}, expr
        # a read's bytes and time are in the syscall and block layers both: a sum picks its layers
        for selector in re.findall(r"ioobserve_(?:read_bytes|write_bytes|call_seconds)_total\{([^}]*)\}", expr):
            assert "layer=" in selector, expr


def test_a_removed_cgroup_is_carried_so_counters_never_go_down():
    entries = _entries([(JOB_CG, "read", 0, 10, 0, 4096, 4096, 50), (OTHER_CG, "read", 0, 3, 0, 30, 30, 5)],
                       [(JOB_CG, "read", 0, ev.AGG_SIZE, 12, 10), (OTHER_CG, "read", 0, ev.AGG_SIZE, 4, 3)])
    probes, cgroups = _Probes(entries), _Cgroups()
    collector = _collector(probes, cgroups)
    before = _scrape(probes, collector)
    cgroups.removed = {JOB_CG, OTHER_CG}  # both cgroups removed: their kernel entries go
    after = _scrape(probes, collector)
    assert len(probes.entries) == 0
    assert _io(after) == _io(before)  # the same series with the same values, from the carry
    assert not collector.maps.jobs.keys() & {JOB_CG, OTHER_CG}
    assert not cgroups.forgotten  # the shared table keeps naming them a while: the recording's last events
    # later the job's series are let go (it has no cgroup left); those of no job stay
    collector.clock = lambda: time.monotonic() + agg.JOB_KEEP_S
    later = _scrape(probes, collector)
    assert cgroups.forgotten == {JOB_CG, OTHER_CG}  # bounded
    assert _get(later, "ioobserve_calls_total", job="77") == 0 and _get(later, "ioobserve_calls_total", job="") == 3
    assert _get(later, "ioobserve_request_size_bytes_bucket", job="", le="16.0") == 3


def test_the_observers_own_cost():
    """Each program that ran: its runs and seconds (none for a program that never ran); the
    observer's processes' CPU by mode, their memory, and whether the stats are counting."""
    metrics = _scrape(_Probes(_entries([], [])))
    assert _get(metrics, "ioobserve_probe_runs_total", program="on_sys_enter") == 100
    assert _get(metrics, "ioobserve_probe_seconds_total", program="on_sys_exit") == pytest.approx(12e-6)
    assert not any(dict(labels).get("program") == "on_block_rq_merge" for _, labels in metrics)
    assert _get(metrics, "ioobserve_agent_cpu_seconds_total", mode="user") > 0  # this test's own process
    assert _get(metrics, "ioobserve_agent_resident_bytes") > 10 << 20
    assert ("ioobserve_probe_stats_enabled", (("node", "n1"),)) in metrics


def test_events_flood_control_held_back_are_counted_per_job_and_never_go_down():
    probes = _Probes(_entries([], []))
    probes.flood_limit = 1000
    probes.floods = np.array([(JOB_CG, 5, 1, 60, 9, 9), (OTHER_CG, 5, 1, 0, 0, 0)], dtype=probes.floods.dtype)
    collector = _collector(probes)
    metrics = _scrape(probes, collector)
    assert _get(metrics, "ioobserve_throttled_events_total", job="77") == 60
    assert _get(metrics, "ioobserve_throttled_events_total") == 60  # a cgroup never held back has no series
    assert _get(metrics, "ioobserve_lost_events_total") == 7  # the held back are not among the lost
    probes.floods = probes.floods[:0]  # the kernel's table let go of the cgroup
    assert _get(_scrape(probes, collector), "ioobserve_throttled_events_total", job="77") == 60
