"""`ioobserve serve` as a site runs it: started on a free loopback port, a workload of known
I/O in a Slurm-like cgroup, /metrics scraped and parsed with prometheus_client's parser, two
clients on the event socket, the prolog/epilog scripts recording one job, SIGHUP and SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from ioobserve.context.mounts import read_mounts
from ioobserve.data import schema as s
from ioobserve.data.sockets import service_end
from ioobserve.trace.read.reader import load, own_records
from tests.conftest import ROOT
from tests.kernel import programs
from tests.kernel.recorder import json_line
from tests.kernel.scratch_cgroups import scratch_cgroups
from tests.kernel.serve_support import JOB, READ_SIZE, READS, STEP, WRITE_SIZE, WRITES, Service, metric_value, parsed, run_workload
from tests.waiting import wait_until, wait_until_async

# The syscall, io_uring, AIO, block (kernel 6.5+: block_io_start; block_rq_merge) and page cache layers'
# programs, by the kernel's 15-character names; the older kernels' bio_queue program may be
# loaded too.
SERVE_PROGRAMS = {name[:15] for name in (
    "on_sys_enter", "on_sys_exit", "on_fork", "on_exec", "on_exit", "on_cgroup_mkdir",
    "on_uring_complete", "on_uring_submit", "on_uring_create", "aio_submitted", "aio_reaped",
    "on_block_io_start", "on_block_rq_issue", "on_block_rq_complete", "on_block_rq_merge",
    "on_filemap_add", "on_readahead_sync", "on_readahead_async")}
MAYBE_LOADED = {"on_block_bio_queue"[:15]}


# Moves itself into the job's cgroup, evicts FILE from the page cache, and reads it whole.
COLD_READ = """
import ctypes, json, mmap, os, sys
cgroup, path = sys.argv[1], sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
# Every page the interpreter has mapped is read in and kept before the job begins: on a busy
# machine some were evicted, and their faults in the job's cgroup were block reads of "/" too.
if libc.mlockall(1) != 0:  # MCL_CURRENT
    sys.exit(f"mlockall: {os.strerror(ctypes.get_errno())}")
with open(os.path.join(cgroup, "cgroup.procs"), "w") as procs:
    procs.write(str(os.getpid()))
fd = os.open(path, os.O_RDONLY)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
size = os.fstat(fd).st_size
pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
view = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
resident = (ctypes.c_ubyte * pages)()
def cached():  # the file's pages in the page cache (mincore of a mapping nothing touches)
    libc.mincore(ctypes.c_void_p(view), ctypes.c_size_t(size), resident)
    return sum(byte & 1 for byte in resident)
# evicted before it is read: a page another CPU still holds in its LRU batch may survive a
# first DONTNEED (fadvise drains every CPU's batches only when it failed)
for _ in range(100):
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    if not cached():
        break
left = cached()
libc.munmap(ctypes.c_void_p(view), ctypes.c_size_t(size))
reads = total = 0
while chunk := os.read(fd, 1 << 20):
    reads += 1
    total += len(chunk)
os.close(fd)
print(json.dumps({"reads": reads + 1, "bytes": total, "cached_before": left}))
"""
COLD_SIZE = 4 << 20


def _mountpoint(path: Path) -> str:
    dev = os.stat(path).st_dev
    return next(m.mountpoint for m in read_mounts() if m.dev == dev)


@pytest.mark.kernel
def test_metrics_count_a_jobs_calls_bytes_and_histograms(job_cgroup, tmp_path):
    service = Service(tmp_path)
    try:
        names = programs.loaded()
        held = {names[i][:15] for i in service.programs}  # bpftool gives whole names where it finds them
        assert held - MAYBE_LOADED == SERVE_PROGRAMS, "the daemon's probes, held once it is ready"
        data = tmp_path / "data.bin"
        run_workload(job_cgroup, data)
        mine = {"job": JOB, "mountpoint": _mountpoint(tmp_path), "node": socket.gethostname(), "layer": "syscall"}
        metrics = service.metrics()
        assert metric_value(metrics, "ioobserve_calls_total", op="write", **mine) == WRITES
        assert metric_value(metrics, "ioobserve_write_bytes_total", op="write", **mine) == WRITES * WRITE_SIZE
        assert metric_value(metrics, "ioobserve_calls_total", op="read", **mine) == READS
        assert metric_value(metrics, "ioobserve_read_bytes_total", op="read", **mine) == READS * READ_SIZE
        # histograms: every call in the latency one; request sizes in their power-of-two buckets
        assert metric_value(metrics, "ioobserve_call_duration_seconds_count", op="write", **mine) == WRITES
        assert metric_value(metrics, "ioobserve_call_duration_seconds_bucket", op="read", le="+Inf", **mine) == READS
        assert metric_value(metrics, "ioobserve_request_size_bytes_bucket", op="write", le="2048.0", **mine) == 0
        assert metric_value(metrics, "ioobserve_request_size_bytes_bucket", op="write", le="4096.0", **mine) == WRITES
        assert metric_value(metrics, "ioobserve_request_size_bytes_bucket", op="read", le="256.0", **mine) == READS
        assert metric_value(metrics, "ioobserve_request_size_bytes_sum", op="read", **mine) == READS * READ_SIZE
        # the failed open has no file, so no mount point
        assert metric_value(metrics, "ioobserve_errors_total", op="openat", job=JOB, mountpoint="") == 1
        assert metric_value(metrics, "ioobserve_aggregation_dropped_total") == 0
        # the job ends and slurmd removes its cgroups: the kernel's entries go, the counters stay
        job_dir = job_cgroup.parents[2]
        for directory in (job_cgroup, job_cgroup.parent, job_cgroup.parents[1], job_dir):
            directory.rmdir()
        again = service.metrics()
        job_samples = {key: value for key, value in metrics.items() if ("job", JOB) in key[2]}
        assert job_samples and {key: again[key] for key in job_samples} == job_samples
    finally:
        out = service.stop()
    assert "stopped" in out and not service.socket.exists()  # SIGTERM: clean exit, socket removed
    # the kernel frees detached programs after an RCU grace period
    wait_until(lambda: not service.programs & programs.loaded().keys(), "the daemon's BPF programs unloaded after SIGTERM")


@pytest.mark.kernel
def test_metrics_give_the_observers_own_cost(job_cgroup, tmp_path):
    """With --probe-stats: each program's runs and time, counting the job's calls; the
    service's own CPU and memory. The kernel's switch is off again once it stops."""
    was_on = Path("/proc/sys/kernel/bpf_stats_enabled").read_text().strip() == "1"
    service = Service(tmp_path, "--probe-stats")
    try:
        run_workload(job_cgroup, tmp_path / "data.bin")
        metrics = service.metrics()
        assert metric_value(metrics, "ioobserve_probe_stats_enabled") == 1
        calls = metric_value(metrics, "ioobserve_calls_total", job=JOB, layer="syscall")
        assert calls >= WRITES + READS
        entries = [program for program in ("on_sys_enter", "syscall_fentry", "on_sys_enter_raw")
                   if metric_value(metrics, "ioobserve_probe_runs_total", program=program)]
        assert entries, "no syscall entry program counted"
        assert metric_value(metrics, "ioobserve_probe_runs_total", program=entries[0]) >= calls  # every process's syscalls run it
        assert 0 < metric_value(metrics, "ioobserve_probe_seconds_total", program=entries[0]) < 60
        assert metric_value(metrics, "ioobserve_agent_cpu_seconds_total", mode="user") > 0
        assert metric_value(metrics, "ioobserve_agent_resident_bytes") > 50 << 20
        later = service.metrics()
        assert metric_value(later, "ioobserve_probe_runs_total", program=entries[0]) >= metric_value(metrics, "ioobserve_probe_runs_total", program=entries[0])
    finally:
        service.stop()
    if not was_on:
        assert Path("/proc/sys/kernel/bpf_stats_enabled").read_text().strip() == "0"


@pytest.mark.kernel
def test_metrics_count_io_uring_and_aio_requests(job_cgroup, tmp_path):
    fio = shutil.which("fio")
    if fio is None:
        pytest.fail("fio is missing: make setup installs it")
    data = Path("/var/tmp") / f"ioobserve-serve-{os.getpid()}.bin"  # libaio's --direct=1 needs O_DIRECT
    data.write_bytes(os.urandom(1 << 20))
    service = Service(tmp_path)
    try:
        jobs = {}
        for layer, engine in (("io_uring", ["--ioengine=io_uring", "--fixedbufs=1"]), ("aio", ["--ioengine=libaio", "--direct=1"])):
            report = tmp_path / f"{layer}.json"
            command = [fio, "--name=job", f"--filename={data}", "--size=1M", "--bs=4k", *engine, "--rw=randread",
                       "--iodepth=8", "--io_size=128k", "--output-format=json", f"--output={report}"]
            subprocess.run(["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(job_cgroup), *command],
                           check=True, timeout=120)
            jobs[layer] = json.loads(report.read_text())["jobs"][0]["read"]
        metrics = service.metrics()
        for layer, op in (("io_uring", "read_fixed"), ("aio", "pread")):
            mine = {"job": JOB, "mountpoint": _mountpoint(data), "layer": layer, "op": op}
            assert metric_value(metrics, "ioobserve_calls_total", **mine) == jobs[layer]["total_ios"] == 32
            assert metric_value(metrics, "ioobserve_read_bytes_total", **mine) == jobs[layer]["io_bytes"]
            assert metric_value(metrics, "ioobserve_call_duration_seconds_count", **mine) == 32
    finally:
        data.unlink()
        service.stop()


@pytest.mark.kernel
@pytest.mark.matrix  # serve's own programs (IOO_AGGREGATE) with the net layer, on every kernel
def test_with_the_net_layer_metrics_count_a_jobs_socket_calls_and_bytes(root_required, kernel_side):
    """--layers net: the job's calls on its Internet sockets, per endpoint (each connection's
    service end) and op, and their bytes, as the workload made them."""
    recorded = kernel_side(_serve_a_jobs_sockets)
    calls, metrics = recorded["calls"], parsed(recorded["metrics"])
    for (endpoint, op), count in Counter((service_end(name), op) for name, op, _ in calls).items():
        assert metric_value(metrics, "ioobserve_calls_total", job=JOB, layer="net", op=op, endpoint=endpoint) == count, (endpoint, op)
    # the 30 short-lived sockets of one peer are one endpoint: the labels stay bounded
    assert len({service_end(name) for name, _, _ in calls}) < len({name for name, _, _ in calls}) - 25
    received, sent = Counter(), Counter()
    for name, op, result in calls:
        if op in ("recvfrom", "recvmsg", "read", "readv"):
            received[service_end(name)] += result
        elif op in ("sendto", "sendmsg", "write", "writev"):
            sent[service_end(name)] += result
    for endpoint in received | sent:
        mine = {"job": JOB, "layer": "net", "endpoint": endpoint, "mountpoint": ""}
        assert metric_value(metrics, "ioobserve_read_bytes_total", **mine) == received[endpoint], endpoint
        assert metric_value(metrics, "ioobserve_write_bytes_total", **mine) == sent[endpoint], endpoint
    assert metric_value(metrics, "ioobserve_calls_total", job=JOB, layer="net", endpoint="") == 0  # every call named


def _in_job(base: Path, workload: str) -> subprocess.CompletedProcess:
    """A workload of tests/workloads run to its end in the job's cgroup under `base`."""
    return subprocess.run(["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(base / STEP),
                           sys.executable, str(ROOT / "tests" / "workloads" / workload)],
                          capture_output=True, text=True, timeout=120, check=True)


def _serve_a_jobs_sockets(side) -> dict:
    """serve --layers net while socket_workload.py runs in the job's cgroup: its calls and a scrape."""
    with scratch_cgroups(STEP) as base:
        service = Service(side.scratch, "--layers", "net")
        try:
            done = _in_job(base, "socket_workload.py")
            return {"calls": json_line(done.stdout, "calls")["calls"], "metrics": service.scrape()}
        finally:
            service.stop()


@pytest.mark.kernel
@pytest.mark.matrix  # serve's programs copy the heads of requests and answers, on every kernel
def test_with_the_net_layer_metrics_count_a_jobs_http_requests_by_operation_and_status(root_required, kernel_side):
    """--layers net: each HTTP request of the job, by the S3 operation (else the method) and the
    status its answer had, as the client itself saw them; keep-alive connections, a 404."""
    recorded = kernel_side(_serve_a_jobs_http_requests)
    counted = _http_requests(recorded["metrics"])
    assert counted == {(operation, str(status)): count
                       for (operation, status), count in Counter(map(tuple, recorded["requests"])).items()}, counted
    assert ("GetObject", "404") in counted and ("GET", "404") in counted  # /health is no object here


def _serve_a_jobs_http_requests(side) -> dict:
    """serve --layers net while http_workload.py runs in the job's cgroup: its requests and a scrape."""
    with scratch_cgroups(STEP) as base:
        service = Service(side.scratch, "--layers", "net")
        try:
            done = _in_job(base, "http_workload.py")
            requests = json_line(done.stdout, "requests")["requests"]
            # the heads reach the tally through the collector's worker: scraped once all are counted

            def all_counted() -> str | None:
                text = service.scrape()
                return text if sum(_http_requests(text).values()) == len(requests) else None

            scrape = wait_until(all_counted, lambda: f"every request counted: {_http_requests(service.scrape())}", timeout=60)
            return {"requests": requests, "metrics": scrape}
        finally:
            service.stop()


def _http_requests(text: str) -> dict:
    """ioobserve_http_requests_total of the job, by (operation, status), from a scrape's text."""
    return {(labels["operation"], labels["status"]): value for (_, name, found), value in parsed(text).items()
            if name == "ioobserve_http_requests_total" and (labels := dict(found))["job"] == JOB}


@pytest.mark.kernel
def test_metrics_count_a_cold_reads_block_requests_and_page_cache_misses(job_cgroup, tmp_path):
    data = Path("/var/tmp") / f"ioobserve-serve-{os.getpid()}-{tmp_path.name}.bin"  # on a disk (/tmp may be tmpfs)
    data.write_bytes(os.urandom(COLD_SIZE))
    os.sync()  # written out, so the pages the workload evicts are clean
    service = Service(tmp_path)
    try:
        done = subprocess.run([sys.executable, "-c", COLD_READ, str(job_cgroup), str(data)], capture_output=True,
                              text=True, timeout=60, check=True)
        report = json.loads(done.stdout)
        assert report["bytes"] == COLD_SIZE and report["cached_before"] == 0, report
        mine = {"job": JOB, "mountpoint": _mountpoint(data), "node": socket.gethostname()}
        metrics = service.metrics()
    finally:
        service.stop()
        data.unlink()
    assert metric_value(metrics, "ioobserve_calls_total", layer="syscall", op="read", **mine) == report["reads"]
    assert metric_value(metrics, "ioobserve_read_bytes_total", layer="syscall", op="read", **mine) == COLD_SIZE
    # every byte of the file came from the disk once, in block read requests of the job, and
    # entered the page cache as the reads' misses (readahead included)
    requests = metric_value(metrics, "ioobserve_calls_total", layer="block", op="block_read", **mine)
    assert requests >= 1
    assert metric_value(metrics, "ioobserve_read_bytes_total", layer="block", op="block_read", **mine) == COLD_SIZE
    assert metric_value(metrics, "ioobserve_request_size_bytes_sum", layer="block", op="block_read", **mine) == COLD_SIZE
    assert metric_value(metrics, "ioobserve_call_duration_seconds_count", layer="block", op="block_read", **mine) == requests
    assert metric_value(metrics, "ioobserve_call_seconds_total", layer="block", op="block_read", **mine) > 0
    assert metric_value(metrics, "ioobserve_page_cache_bytes_total", layer="cache", op="cache_miss", **mine) == COLD_SIZE
    assert metric_value(metrics, "ioobserve_read_bytes_total", layer="cache", **mine) == 0  # not counted twice


class _StreamClient(threading.Thread):
    """A reader of the daemon's event stream: its first line, then every event it is sent (until the daemon stops)."""

    def __init__(self, path: Path):
        super().__init__(daemon=True)
        self.path, self.first, self.events = path, None, []

    def run(self) -> None:
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(str(self.path))
            client.sendall(b"stream\n")
            lines = client.makefile("rb")
            self.first = lines.readline()
            for line in lines:
                self.events.extend(json.loads(line)["events"])

    def calls(self, pid: int, directory: Path) -> list[dict]:
        """The reads and writes of this process on files under directory, received so far."""
        return [e for e in list(self.events) if e["pid"] == pid and e["op"] in ("read", "write")
                and (e["path"] or "").startswith(str(directory))]


@pytest.mark.kernel
def test_two_socket_clients_receive_the_same_events(job_cgroup, tmp_path):
    service = Service(tmp_path)
    clients = [_StreamClient(service.socket) for _ in range(2)]
    try:
        for client in clients:
            client.start()
        # the answer comes once both are registered and the kernel lets every event out
        wait_until(lambda: all(c.first for c in clients), "both stream clients were answered")
        assert [c.first for c in clients] == [b"ok streaming\n"] * 2
        pid = run_workload(job_cgroup, tmp_path / "data.bin")
        wait_until(lambda: all(len(c.calls(pid, tmp_path)) >= WRITES + READS for c in clients),
                   lambda: f"both clients received the workload's {WRITES + READS} calls "
                           f"(got {[len(c.calls(pid, tmp_path)) for c in clients]})")
        mine = [c.calls(pid, tmp_path) for c in clients]
        assert [len(m) for m in mine] == [WRITES + READS] * 2
        assert mine[0] == mine[1]
        assert sum(e["bytes"] for e in mine[0]) == WRITES * WRITE_SIZE + READS * READ_SIZE
    finally:
        service.stop()


@pytest.mark.kernel
def test_prolog_and_epilog_record_a_job_and_sighup_starts_a_new_file(job_cgroup, tmp_path):
    service = Service(tmp_path)
    try:
        before = run_workload(job_cgroup, tmp_path / "before.bin")  # not recorded yet: aggregated only
        service.job("start")
        first = run_workload(job_cgroup, tmp_path / "one.bin")
        _wait_traced(service, first, tmp_path)  # in the first file before SIGHUP begins the next
        service.proc.send_signal(signal.SIGHUP)
        service.logged("SIGHUP: 1 job trace(s) start a new file")  # before the next workload's events
        second = run_workload(job_cgroup, tmp_path / "two.bin")
        _wait_traced(service, second, tmp_path)  # written before the epilog closes the trace
        service.job("stop")
        after = run_workload(job_cgroup, tmp_path / "after.bin")  # the job's trace is closed by now
    finally:
        service.stop()
    parts = sorted((service.traces / f"job-{JOB}").glob("*.pfw.gz"), key=lambda p: own_records(p, "start")[0]["args"]["part"])
    assert len(parts) == 2, parts  # SIGHUP: the next batch went to a new part file
    for part in parts:
        assert len(own_records(part, "end")) == 1, part  # each part closed properly
    calls = load(parts).filter((pl.col(s.LAYER) == s.LAYER_SYSCALL) & pl.col(s.OP).is_in(["read", "write"])
                               & pl.col(s.PATH).cat.starts_with(str(tmp_path)))
    per_pid = dict(calls.group_by(s.PID).len().iter_rows())
    assert per_pid == {first: WRITES + READS, second: WRITES + READS}, (before, after)
    assert set(calls.get_column(s.JOB).unique()) == {JOB}
    first_part = load([parts[0]]).filter(pl.col(s.PATH).cat.starts_with(str(tmp_path)))
    assert set(first_part.get_column(s.PID).unique()) == {first}


@pytest.mark.kernel
def test_a_job_started_or_stopped_while_another_is_recorded_flips_at_once(root_required, tmp_path):
    # The kernel caches per cgroup whether its events leave; with another job recorded the
    # cache is in use, and each start or stop must make the cached answer stale.
    other = "5252"
    with scratch_cgroups(STEP, STEP.replace(JOB, other)) as base:
        service = Service(tmp_path)
        try:
            service.job("start", other)
            before = run_workload(base / STEP, tmp_path / "before.bin")  # "no" cached for this cgroup
            service.job("start")
            during = run_workload(base / STEP, tmp_path / "during.bin")
            _wait_traced(service, during, tmp_path)  # fails without the cache's generation bump
            service.job("stop")
            after = run_workload(base / STEP, tmp_path / "after.bin")  # "yes" cached, now stale
        finally:
            service.stop()
    # only these three workloads ever ran in the scratch cgroups, and the other job's has none
    assert _traced_pids(service.traces / f"job-{JOB}") == {during}, (before, during, after)
    assert _traced_pids(service.traces / f"job-{other}") == set()


def _traced_calls(service: Service, pid: int, directory: Path, job: str = JOB) -> pl.DataFrame:
    """A process's syscall-layer reads and writes on files under directory in a job's traces,
    as far as they are on disk (the members flushed so far of files still being written)."""
    parts = sorted((service.traces / f"job-{job}").glob("*.pfw.gz"))
    if not parts:
        return pl.DataFrame(schema=s.EVENT_SCHEMA)
    return load(parts, damage=[]).filter((pl.col(s.PID) == pid) & (pl.col(s.LAYER) == s.LAYER_SYSCALL)
                                         & pl.col(s.OP).is_in(["read", "write"])
                                         & pl.col(s.PATH).cat.starts_with(str(directory)))


def _wait_traced(service: Service, pid: int, directory: Path) -> None:
    """Wait until every read and write of a workload run is in the job's trace files."""
    wait_until(lambda: _traced_calls(service, pid, directory).height == WRITES + READS,
               lambda: f"the {WRITES + READS} calls of workload {pid} in the job's trace files "
                       f"(found {_traced_calls(service, pid, directory).height})")


def _traced_pids(job_dir: Path) -> set[int]:
    """The processes in a job's trace files (none if it wrote none)."""
    parts = sorted(job_dir.glob("*.pfw.gz"))
    return set(load(parts).get_column(s.PID).unique()) if parts else set()


@pytest.mark.kernel
def test_top_attached_to_the_daemon_shows_a_workload(job_cgroup, tmp_path):
    from ioobserve.live.attach import AttachedSource
    from ioobserve.tui.app import make_app

    service = Service(tmp_path)
    try:
        source = AttachedSource(service.socket)
        app = make_app(source)

        async def drive() -> tuple[int, list]:
            async with app.run_test(size=(120, 32)) as pilot:
                # AttachedSource returned after the daemon's "ok streaming": events flow already
                pid = await asyncio.to_thread(run_workload, job_cgroup, tmp_path / "data.bin")

                def mine() -> list:
                    table = app.query_one("#processes-table")
                    return [row for row in (table.get_row_at(i) for i in range(table.row_count)) if row[0] == str(pid)]

                # 7 x 3000 B written (the column counts since the start, so it only grows to this)
                await wait_until_async(lambda: mine() and mine()[0][9] == "20.5 KiB",
                                       lambda: f"the workload's row shows 20.5 KiB written (its row: {mine()})",
                                       pause=pilot.pause)
                rows = mine()
                await pilot.press("q")
                return pid, rows

        _, mine = asyncio.run(drive())
        assert len(mine) == 1 and mine[0][2] == JOB, mine  # one row, its job shown
    finally:
        service.stop()


def _as_user(uid: int, gid: int, path: Path, line: bytes) -> str:
    """What the daemon answers a client of this uid and gid (or the error connecting)."""
    def drop() -> None:
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)

    code = ("import socket, sys\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect(sys.argv[1])\n"
            "except OSError as e:\n    print(type(e).__name__); sys.exit()\ns.sendall(sys.argv[2].encode())\n"
            "print(s.makefile().readline().strip())")
    done = subprocess.run([sys.executable, "-c", code, str(path), line.decode()], preexec_fn=drop, capture_output=True,
                          text=True, timeout=60, check=True)
    return done.stdout.strip()


@pytest.mark.kernel
def test_a_config_rule_records_a_job_and_only_root_commands(job_cgroup, tmp_path):
    import grp
    import pwd
    import tempfile

    nobody, nogroup = pwd.getpwnam("nobody").pw_uid, grp.getgrnam("nogroup").gr_gid
    run_dir = Path(tempfile.mkdtemp(prefix="ioobserve-serve-"))
    run_dir.chmod(0o711)  # others may reach the socket; the socket's own mode decides
    config = tmp_path / "serve.toml"
    config.write_text(f'record-job = ["{JOB}"]\nsocket-group = "nogroup"\n')
    service = Service(tmp_path, "--config", str(config), socket_path=run_dir / "events.sock")
    try:
        pid = run_workload(job_cgroup, tmp_path / "data.bin")  # recorded by the rule: no prolog ran
        mode = service.socket.stat()
        assert (mode.st_mode & 0o777, mode.st_gid) == (0o660, nogroup)
        assert _as_user(nobody, nogroup, service.socket, b"start 42\n") == "error: only root may start or stop a job's recording"
        other = grp.getgrnam("daemon").gr_gid
        assert _as_user(nobody, other, service.socket, b"stream\n") == "PermissionError"  # not in the group
        assert _as_user(nobody, nogroup, service.socket, b"stream\n") == "ok streaming"  # in the group: streamed to
        _wait_traced(service, pid, tmp_path)
    finally:
        service.stop()
        run_dir.rmdir()
    calls = load(sorted((service.traces / f"job-{JOB}").glob("*.pfw.gz"))).filter(
        (pl.col(s.PID) == pid) & pl.col(s.OP).is_in(["read", "write"]) & pl.col(s.PATH).cat.starts_with(str(tmp_path)))
    assert calls.height == WRITES + READS


@pytest.mark.kernel
def test_layers_left_out_load_no_programs_and_old_job_traces_are_removed(root_required, tmp_path):
    old = tmp_path / "traces" / "job-9" / "old.pfw.gz"
    old.parent.mkdir(parents=True, mode=0o700)
    (tmp_path / "traces").chmod(0o700)
    for path in (old, old.with_name(old.name + ".ioidx")):
        path.write_bytes(b"x")
        os.utime(path, (1, 1))  # 1970: past any retention
    young = old.with_name("young.pfw.gz")
    young.write_bytes(b"x")
    service = Service(tmp_path, "--layers", "no-cache,no-block", "--retain-days", "1")
    try:
        names = programs.loaded()
        held = {names[i][:15] for i in service.programs}
        cache_and_block = {n[:15] for n in ("on_filemap_add", "on_readahead_sync", "on_readahead_async",
                                             "on_block_io_start", "on_block_rq_issue", "on_block_rq_complete",
                                             "on_block_rq_merge")}
        assert not held & (cache_and_block | MAYBE_LOADED) and {"on_sys_enter", "on_uring_submit"} <= held
        service.logged(f"retention: removed {old}")
        assert not old.exists() and not old.with_name(old.name + ".ioidx").exists() and young.exists()
    finally:
        out = service.stop()
    assert "stopped" in out
