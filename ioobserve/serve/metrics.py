"""`/metrics`: the kernel's aggregates as OpenMetrics families (prometheus_client), read at
each scrape. Ids become labels here: cgroup -> job, uid -> user, dev -> mount point (or, for
the net layer's socket calls, the endpoint)."""

from __future__ import annotations

import threading
import time

import polars as pl
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from ioobserve.context.cgroups import CgroupTable
from ioobserve.context.mounts import node_mounts
from ioobserve.context.users import UserNames
from ioobserve.data import events as ev
from ioobserve.data.sockets import endpoint_name
from ioobserve.serve import kernel_aggregates as agg
from ioobserve.serve.own_cost import own_usage, probe_stats_on
from ioobserve.serve.request_tally import RequestCounts

MOUNTS_REFRESH_S = 10.0  # mounts are re-read at most this often when a device is not known yet
FORGET_AFTER_S = 60.0  # a gone cgroup stays named this long, for the recording's last events of it

# Every family has a `layer` label: syscall (file I/O system calls), block (block device
# requests, issue to completion), cache (page cache changes: misses, pages added, readahead)
# or net (calls on Internet sockets, with `serve --layers net`, labelled by endpoint).
COUNTERS = (  # (family, help, column, divisor to the family's unit)
    ("ioobserve_calls", "File I/O calls, block requests and page cache changes, by layer.", "calls", 1),
    ("ioobserve_errors", "File I/O calls and block requests that returned an error.", "errors", 1),
    ("ioobserve_read_bytes", "Bytes read by file I/O calls and block read requests.", "read_bytes", 1),
    ("ioobserve_write_bytes", "Bytes written by file I/O calls and block write requests.", "write_bytes", 1),
    ("ioobserve_page_cache_bytes", "Bytes of pages entering the page cache: read misses (cache_miss), pages "
     "writes added (cache_add), readahead (readahead, readahead_async).", "cache_bytes", 1),
    ("ioobserve_call_seconds", "Time spent in file I/O calls and block requests.", "time_ns", 1e9),
)


class KernelCollector(Collector):
    """Reads the probes' aggregate tables at each scrape (no per-event work anywhere)."""

    def __init__(self, probes, node: str, cgroups: CgroupTable | None = None, probe_stats: bool = False,
                 requests: RequestCounts | None = None) -> None:
        self.probes = probes
        self.requests = requests  # HTTP requests by job, operation and status (the net and TLS layers' heads)
        self.probe_stats = probe_stats  # the service holds the kernel's BPF stats on
        self.maps = agg.LabelMaps(node)
        self.cgroups = cgroups if cgroups is not None else CgroupTable()
        self.users = UserNames()
        self.carry = agg.Carry()
        self._mounts_read = 0.0
        self._lock = threading.Lock()
        self.clock = time.monotonic  # when sums were carried (tests move it)
        self._forget_at: dict[int, float] = {}  # gone cgroups' ids: when the table lets go of them
        self._throttled_seen: dict[int, int] = {}  # cgroup -> events flood control held back (cgroups it ever held)
        self._throttled_jobs: dict[int, str] = {}  # ... and its job, named once

    def _learn(self, calls: pl.DataFrame) -> None:
        """Names for ids not seen before (a cgroup walk, a passwd lookup, mountinfo)."""
        new_cgroups = set(calls.get_column("cgroup_id").unique().to_list()) - self.maps.jobs.keys()
        for cgroup_id, ctx in self.cgroups.lookup(new_cgroups).items():
            self.maps.jobs[cgroup_id] = ctx.job or ctx.pod or ""
            self.maps.namespaces[cgroup_id] = ctx.namespace or ""
            self.maps.pods[cgroup_id] = ctx.pod_name or ""
        for uid in set(calls.get_column("uid").unique().to_list()) - self.maps.users.keys():
            self.maps.users[uid] = self.users.name(uid)
        net = pl.col("layer") == agg.NET
        ends = set(calls.filter(net).get_column("dev").unique().to_list()) - self.maps.endpoints.keys() - {0}
        if ends:  # the kernel names each socket's service end as it first describes the socket
            # the kernel's table, as it stands, replaces the names: bounded as it is
            self.maps.endpoints = {key: endpoint_name(end) for key, end in self.probes.tables.endpoint_names().items()}
        unknown = set(calls.filter(~net).get_column("dev").unique().to_list()) - self.maps.mountpoints.keys() - {0}
        if unknown and time.monotonic() - self._mounts_read >= MOUNTS_REFRESH_S:
            self._mounts_read = time.monotonic()
            # the host's view (PID 1's), not the service's own private mounts; a device's first mount
            # wins (bind mounts come later)
            for mount in reversed(node_mounts()):
                self.maps.mountpoints[(mount.major << 20) | mount.minor] = mount.mountpoint

    def _tables(self) -> tuple[pl.DataFrame, pl.DataFrame, int]:
        """The labelled sums and histogram rows, live and carried; the calls not aggregated.
        Entries of cgroups that are gone move from the kernel into the carry."""
        entries, dropped = self.probes.tables.aggregates()
        calls, hist = agg.call_frame(entries), agg.hist_frame(entries)
        self._learn(calls)
        now = self.clock()
        gone = self.cgroups.gone(calls.get_column("cgroup_id").unique().to_list())
        if gone:
            dead = pl.col("cgroup_id").is_in(sorted(gone))
            self.carry.add(self.maps.label(agg.call_sums(calls.filter(dead))), self.maps.label(hist.filter(dead)), now)
            self.probes.tables.forget_aggregates(gone)
            for cgroup_id in gone:
                self._forget_at.setdefault(cgroup_id, now + FORGET_AFTER_S)
                for names in (self.maps.jobs, self.maps.namespaces, self.maps.pods):
                    names.pop(cgroup_id, None)
            calls, hist = calls.filter(~dead), hist.filter(~dead)
        # Ids and names of gone cgroups would pile up for months; the recording names its last
        # events with the same table, so they go a while after.
        due = [cgroup_id for cgroup_id, at in self._forget_at.items() if at <= now]
        self.cgroups.forget(due)
        for cgroup_id in due:
            del self._forget_at[cgroup_id]
        live = self.maps.label(agg.call_sums(calls))
        self.carry.release(set(live.get_column("job").unique().to_list()), now)
        return self.carry.with_sums(live), self.carry.with_hist(self.maps.label(hist)), dropped

    def collect(self):
        """The metric families, from the tables as they stand now."""
        with self._lock:  # scrapes run on threads of their own
            sums, hist, dropped = self._tables()
            throttled = self._throttled()
            requests = self.requests.family(self.maps.node, self._jobs_of) if self.requests else None
        for name, text, column, divisor in COUNTERS:
            family = CounterMetricFamily(name, text, labels=agg.LABELS)
            for row in sums.iter_rows(named=True):
                family.add_metric([row[label] for label in agg.LABELS], row[column] / divisor)
            yield family
        yield self._histogram("ioobserve_call_duration_seconds", "Latency of file I/O calls and block requests.",
                              agg.cumulative_buckets(hist, ev.AGG_LATENCY, agg.LATENCY_SLOTS), sums, "time_ns", 1e9)
        yield self._histogram("ioobserve_request_size_bytes", "Bytes asked for by read and write calls and block requests.",
                              agg.cumulative_buckets(hist, ev.AGG_SIZE, agg.SIZE_SLOTS), sums, "req_bytes", 1)
        family = CounterMetricFamily("ioobserve_aggregation_dropped", "Calls not aggregated: a kernel table was full.",
                                     labels=["node"])
        family.add_metric([self.maps.node], dropped)
        yield family
        lost_counts = self.probes.tables.lost_counts()
        lost = CounterMetricFamily("ioobserve_lost_events", "Events the kernel could not hand over (ring buffer full).",
                                   labels=["node"])
        lost.add_metric([self.maps.node], int(lost_counts.sum() - lost_counts[ev.LOST_THROTTLED]))
        yield lost
        yield throttled
        if requests is not None:
            yield requests
        yield from self._own_cost()

    def _jobs_of(self, cgroup_ids: set[int]) -> dict[int, str]:
        """The job (else the pod) of each cgroup id the table knows or finds."""
        return {cgroup_id: ctx.job or ctx.pod or "" for cgroup_id, ctx in self.cgroups.lookup(cgroup_ids).items()}

    def _throttled(self) -> CounterMetricFamily:
        """Per job, the events flood control kept in the kernel (the kernel's count per cgroup,
        kept here past its table letting go of a cgroup)."""
        if self.probes.tables.flood_limit:
            states = self.probes.tables.flood_states()
            held = states[states["dropped"] > 0]
            for cgroup_id, dropped in zip(held["cgroup_id"].tolist(), held["dropped"].tolist()):
                self._throttled_seen[cgroup_id] = max(self._throttled_seen.get(cgroup_id, 0), dropped)
        unnamed = self._throttled_seen.keys() - self._throttled_jobs.keys()
        for cgroup_id, ctx in self.cgroups.lookup(unnamed).items():
            self._throttled_jobs[cgroup_id] = ctx.job or ctx.pod or ""
        per_job: dict[str, int] = {}
        for cgroup_id, dropped in self._throttled_seen.items():
            job = self._throttled_jobs.get(cgroup_id, "")
            per_job[job] = per_job.get(job, 0) + dropped
        family = CounterMetricFamily("ioobserve_throttled_events", "Events flood control kept in the kernel: a "
                                     "streamed or recorded job's cgroup past flood-limit events a second (the "
                                     "aggregates count them all the same).", labels=["node", "job"])
        for job, dropped in sorted(per_job.items()):
            family.add_metric([self.maps.node, job], dropped)
        return family

    def _own_cost(self):
        """What the observer costs the node: each of its BPF programs' runs and run time (in
        the observed processes' own context, counted by the kernel while its BPF stats are on),
        and its own processes' CPU time and memory."""
        node = self.maps.node
        on = GaugeMetricFamily("ioobserve_probe_stats_enabled", "1 while the kernel counts BPF programs' run time "
                               "(serve --probe-stats, or sysctl kernel.bpf_stats_enabled=1); the probe families "
                               "count only then.", labels=["node"])
        on.add_metric([node], int(self.probe_stats or probe_stats_on()))
        yield on
        runs = CounterMetricFamily("ioobserve_probe_runs", "Runs of each of the observer's BPF programs.", labels=["node", "program"])
        seconds = CounterMetricFamily("ioobserve_probe_seconds", "Time spent in each of the observer's BPF programs, "
                                      "taken from the processes whose calls ran them.", labels=["node", "program"])
        for program, (run_ns, count) in sorted(self.probes.run_stats().items()):
            if count:
                runs.add_metric([node, program], count)
                seconds.add_metric([node, program], run_ns / 1e9)
        yield runs
        yield seconds
        usage = own_usage()
        cpu = CounterMetricFamily("ioobserve_agent_cpu_seconds", "CPU time of the observer's own processes "
                                  "(the service and its capture process), by mode.", labels=["node", "mode"])
        cpu.add_metric([node, "user"], usage.user_s)
        cpu.add_metric([node, "system"], usage.system_s)
        yield cpu
        memory = GaugeMetricFamily("ioobserve_agent_resident_bytes", "Resident memory of the observer's own processes.",
                                   labels=["node"])
        memory.add_metric([node], usage.resident_bytes)
        yield memory

    @staticmethod
    def _histogram(name: str, text: str, buckets: pl.DataFrame, sums: pl.DataFrame, sum_column: str, divisor: float):
        family = HistogramMetricFamily(name, text, labels=agg.LABELS)
        totals = {tuple(row[:len(agg.LABELS)]): row[-1] for row in sums.select(*agg.LABELS, sum_column).iter_rows()}
        for labels, rows in buckets.group_by(agg.LABELS, maintain_order=True):
            bounds = [(_bound(bound, divisor), count) for bound, count in rows.select("bound", "count").iter_rows()]
            total = rows.get_column("total")[0]
            family.add_metric(list(labels), [*bounds, ("+Inf", total)], sum_value=totals.get(tuple(labels), 0) / divisor)
        return family


def _bound(slot: int, divisor: float) -> str:
    """A bucket's `le` value: 2^slot in the family's unit."""
    return repr(2 ** slot / divisor)
