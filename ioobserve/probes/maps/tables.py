"""The probes' maps as user space fills and reads them: the config every program reads first,
the filters, the syscall/io_uring/AIO tables, the helpers never traced, the cgroups whose
events leave the kernel (`serve`), the kernel's aggregates, the rings and the loss counters."""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Iterable

import numpy as np

from ioobserve.data import events as ev
from ioobserve.probes.kernel.syscall_table import spec_array
from ioobserve.probes.maps.async_table import aio_op_array, uring_spec_array
from ioobserve.probes.maps.call_table import CallSpec, call_spec_array
from ioobserve.probes.maps.filters import KernelFilters

BUMP = object()  # update(): add one to this counter


class ProbeTables:
    """The maps of one compiled probe object (a bcc BPF or CachedBPF)."""

    def __init__(self, bpf, events_pages: int, aux_pages: int, aggregating: bool):
        self.bpf = bpf
        self.pages = {"events": events_pages, "aux": aux_pages}
        self.aggregating = aggregating
        self.flood_limit = 0  # configure() sets it
        self.closed = False  # the probes were closed: nothing is written any more
        self._config: np.ndarray | None = None  # ev.CONFIG as last written, once configure() ran
        self._lock = threading.Lock()  # threads change the config (helpers, serve's stream and jobs)

    def configure(self, filters: KernelFilters, self_tgid: int | None, call_specs: tuple[CallSpec, ...],
                  layer_bits: int) -> None:
        """Fill the op tables, the filter maps and the config (before anything attaches)."""
        syscall_rows = spec_array(net=bool(layer_bits & ev.LAYER_NET))
        for name, rows in (("syscall_specs", syscall_rows), ("uring_specs", uring_spec_array()), ("aio_ops", aio_op_array())):
            table = self.bpf[name]
            for index, row in enumerate(rows):
                if row["op"]:
                    table[ctypes.c_int(index)] = table.Leaf.from_buffer_copy(row.tobytes())
        self._fill_set("traced_tgids", (ctypes.c_uint32(p) for p in filters.pids))
        self._fill_set("cgroups", (ctypes.c_uint64(c) for c in filters.cgroup_ids))
        comms = self.bpf["comms"]
        for comm in filters.comms:
            comms[comms.Key.from_buffer_copy(comm.encode()[:15].ljust(16, b"\0"))] = ctypes.c_uint8(1)
        dirs = self.bpf["prefix_dirs"]
        for dev, ino in filters.prefix_dirs:
            key = np.array([(ino, dev, 0)], dtype=ev.FILE_KEY)
            dirs[dirs.Key.from_buffer_copy(key.tobytes())] = ctypes.c_uint8(1)
        strings, lengths = self.bpf["prefix_strings"], self.bpf["prefix_lens"]
        for prefix in filters.prefixes:
            strings[strings.Key.from_buffer_copy(prefix.encode().ljust(ev.PREFIX_LEN, b"\0"))] = ctypes.c_uint8(1)
        for index, length in enumerate(sorted({len(p.encode()) for p in filters.prefixes})):
            lengths[ctypes.c_int(index)] = ctypes.c_uint32(length)
        self._fill_set("excluded_devs", (ctypes.c_uint32(d) for d in filters.excluded_devs))
        if call_specs:
            calls = self.bpf["call_specs"]
            for op, row in enumerate(call_spec_array(call_specs)):
                if row["library"]:
                    calls[ctypes.c_int(op)] = calls.Leaf.from_buffer_copy(row.tobytes())
        cfg = np.zeros(1, dtype=ev.CONFIG)
        cfg["self_tgid"] = os.getpid() if self_tgid is None else self_tgid
        cfg["filter_pid"] = filters.filter_pid
        cfg["filter_cgroup"] = bool(filters.cgroup_ids)
        cfg["filter_comm"] = bool(filters.comms)
        cfg["filter_path"] = bool(filters.prefix_dirs or filters.prefixes)
        cfg["emit_some"] = self.aggregating  # aggregating: no events until asked for
        cfg["select_gen"] = 1  # threads' kept verdicts (0: none yet) are of these filters
        cfg["flood_limit"] = self.flood_limit = min(filters.flood_limit, 0xFFFFFFFF)
        cfg["layers"] = layer_bits | (ev.LAYER_LIBS if call_specs else 0)
        with self._lock:
            self._config = cfg
            self._write_config()

    def update(self, **changes) -> None:
        """Change fields of the config (a value of BUMP adds one: emit_gen, select_gen) and write it."""
        with self._lock:
            if self._config is None:
                return  # configure() writes the whole config later
            for name, value in changes.items():
                self._config[name] = self._config[name] + 1 if value is BUMP else value
            self._write_config()

    def _write_config(self) -> None:
        config = self.bpf["config"]
        config[ctypes.c_int(0)] = config.Leaf.from_buffer_copy(self._config.tobytes())

    def _fill_set(self, name: str, keys: Iterable) -> None:
        table = self.bpf[name]
        for key in keys:
            table[key] = ctypes.c_uint8(1)

    def exclude_helper(self, pid: int) -> None:
        """Never trace this helper process of ours (capture, a trace's disk process); the kernel
        forgets it when it exits. Any thread, before or after attach(); after close() nothing traces it."""
        if not self.closed:
            self.bpf["own_tgids"][ctypes.c_uint32(pid)] = ctypes.c_uint8(1)
            self.update(select_gen=BUMP)  # after the table: its threads decide again

    def trace_pid(self, pid: int) -> None:
        """Add a process (and, through fork, its future descendants) to the pid filter."""
        self.bpf["traced_tgids"][ctypes.c_uint32(pid)] = ctypes.c_uint8(1)
        self.update(select_gen=BUMP)

    def emit_some(self, on: bool) -> None:
        """With kernel aggregation: events leave the kernel only for the cgroups of emit_cgroup
        (on) or for every traced task (off); every call is aggregated either way."""
        self.update(emit_some=on)

    def emit_cgroup(self, cgroup_id: int, on: bool) -> None:
        """Let a cgroup's events (and its descendants') leave the kernel, or stop them."""
        table = self.bpf["emit_cgroups"]
        if on:
            table[ctypes.c_uint64(cgroup_id)] = ctypes.c_uint8(1)
        else:
            table.pop(ctypes.c_uint64(cgroup_id), None)
        # After the table: a verdict the kernel caches under the new generation saw the new set.
        self.update(emit_count=len(table), emit_gen=BUMP)

    def aggregates(self) -> tuple[np.ndarray, int]:
        """The kernel's aggregates as they stand: ev.AGG_ENTRY rows (a key, its sums and
        histograms) and the calls dropped because the table was full."""
        entries = b"".join(bytes(key) + bytes(value) for key, value in self.bpf["agg_calls"].items())
        return np.frombuffer(entries, dtype=ev.AGG_ENTRY), int(self.bpf["agg_dropped"][ctypes.c_int(0)].value)

    def endpoint_names(self) -> dict[int, np.void]:
        """The service ends the socket calls' aggregates are keyed by: hash -> an ev.ENDPOINT."""
        return {int(key.value): np.frombuffer(bytes(value), dtype=ev.ENDPOINT, count=1)[0]
                for key, value in self.bpf["endpoint_names"].items()}

    def forget_aggregates(self, cgroup_ids: set[int]) -> None:
        """Remove the aggregate entries of these cgroups (gone: their sums are carried in user space)."""
        table = self.bpf["agg_calls"]
        for key in [key for key in table if key.cgroup_id in cgroup_ids]:
            table.pop(key, None)

    def ring(self, name: str) -> tuple[int, int]:
        """(map fd, data size in bytes) of the ring buffer `name` ("events" or "aux")."""
        return self.bpf[name].map_fd, self.pages[name] * os.sysconf("SC_PAGE_SIZE")

    def flood_states(self) -> np.ndarray:
        """Each cgroup's flood control as the kernel keeps it: ("cgroup_id", u8) and the
        fields of events.FLOOD_STATE, one row per cgroup seen since the limit was set."""
        table = self.bpf["flood_states"]
        rows = [(key.value, *np.frombuffer(bytes(leaf), dtype=ev.FLOOD_STATE)[0].tolist()) for key, leaf in table.items()]
        return np.array(rows, dtype=[("cgroup_id", "<u8"), *ev.FLOOD_STATE.descr])

    def lost_counts(self) -> np.ndarray:
        """Failed reserves so far, summed over CPUs: index = op code, or LOST_AUX_BASE + kind."""
        table = self.bpf["lost"]
        return np.array([sum(table.getvalue(ctypes.c_int(i))) for i in range(ev.LOST_SLOTS)], dtype=np.uint64)
