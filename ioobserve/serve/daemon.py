"""The node service: one capture with kernel aggregation, `/metrics` over HTTP, the event
socket, and per-job traces, until SIGTERM; SIGHUP starts new trace files (logrotate)."""

from __future__ import annotations

import os
import signal
import threading
import time

from ioobserve.collect.recording import Recording
from ioobserve.probes.maps.filters import KernelFilters
from ioobserve.probes.load.loader import ProbeSizes
from ioobserve.serve.config import ServeConfig
from ioobserve.serve.jobs import JobRecorder
from ioobserve.serve.metrics import KernelCollector
from ioobserve.serve.retention import sweep
from ioobserve.serve.stream import EventStream, bind_socket
from ioobserve.trace.output import OutputError, check_output_dir

AGGREGATE_ENTRIES = 16384  # (cgroup, user, op, device) keys the kernel keeps; histograms get 8x
DISCOVER_S = 1.0  # how often recorded jobs' new cgroups are looked for
RETENTION_S = 60.0  # how often job traces are swept (retain-days, retain-gb)


class ServeError(Exception):
    """The service cannot start; the message says why."""


class Daemon:
    """Everything `serve` runs, started by run() and stopped by stop() (or a signal)."""

    def __init__(self, config: ServeConfig, filters: KernelFilters) -> None:
        self.config = config
        self.filters = filters
        self.stopped = threading.Event()
        self.http = None
        self.stream: EventStream | None = None
        self.recording: Recording | None = None
        self.jobs: JobRecorder | None = None

    def run(self, on_ready=None) -> None:
        """Bind the listeners, attach the probes and serve until stop(); returns after the probes
        are detached and every trace is closed."""
        from prometheus_client import CollectorRegistry
        from prometheus_client.exposition import start_http_server

        host, port = self.config.address()
        try:
            self.config.record_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            check_output_dir(self.config.record_dir)
        except OSError as exc:
            raise ServeError(f"record-dir {self.config.record_dir}: {exc.strerror}") from None
        except OutputError as exc:
            raise ServeError(f"record-dir: {exc}") from None
        # the listeners first: a port in use or a socket taken is told before the probes compile
        registry = CollectorRegistry(auto_describe=True)
        server = bind_socket(self.config.socket, self.config.group_id())
        try:
            self.http, _ = start_http_server(port, host, registry)
        except OSError as exc:
            _close_socket(server)
            raise ServeError(f"listen {self.config.listen}: {exc.strerror or exc}") from None
        try:
            recording = Recording(self.filters, [], sizes=ProbeSizes(aggregate_entries=AGGREGATE_ENTRIES),
                                  layers=self.config.serve_layers(),
                                  stop_timeout=self.config.stop_timeout, probe_stats=self.config.probe_stats)
        except BaseException:
            self.http.shutdown()
            _close_socket(server)
            raise
        probes = recording.probes
        self.recording = recording
        jobs = JobRecorder(probes, self.config.record_dir, self.config.record_job,
                           rotate_bytes=int(self.config.rotate_mb * 1e6) if self.config.rotate_mb else None,
                           rotate_seconds=self.config.rotate_s, stop_timeout=self.config.stop_timeout)
        self.jobs = jobs
        self.stream = EventStream(server, self._command, lambda on: probes.tables.emit_some(not on))
        registry.register(KernelCollector(probes, self.config.node, cgroups=recording.cgroups,
                                          probe_stats=self.config.probe_stats))
        recording.sinks = [jobs, self.stream]
        self.stream.start()
        started = threading.Event()
        discover = threading.Thread(target=self._discover, args=(started,), name="ioobserve-jobs", daemon=True)
        discover.start()

        def ready() -> None:
            jobs.discover()  # jobs running already are recorded from the first event on
            started.set()
            if on_ready:
                on_ready()

        try:
            recording.run(on_start=ready)
        finally:
            self.stopped.set()
            self.http.shutdown()
            self.stream.stop()

    def _discover(self, started: threading.Event) -> None:
        started.wait()
        swept = 0.0
        while not self.stopped.wait(DISCOVER_S):
            try:
                self.jobs.discover()
            except Exception as exc:  # e.g. the kernel's set full: said, and tried again next second
                print(f"ioobserve serve: looking for recorded jobs' cgroups: {exc}", flush=True)
            if time.monotonic() - swept >= RETENTION_S:
                swept = time.monotonic()
                self._sweep()

    def _sweep(self) -> None:
        """Remove the job traces the retention settings leave out, and say which."""
        days, most = self.config.retention()
        if days is None and most is None:
            return
        for path in sweep(self.config.record_dir, days, most, self.jobs.writing(), time.time()):
            print(f"ioobserve serve: retention: removed {path}", flush=True)

    def _command(self, verb: str, job: str) -> str:
        """A scheduler hook's command: start or stop a job's trace."""
        if verb == "start":
            self.jobs.start(job)
            return f"recording job {job}"
        path = self.jobs.stop(job)
        return f"stopped job {job}" + (f": {path}" if path else "")

    def stop(self, reason: str = "stop") -> None:
        """End the service (from a signal handler or another thread); asked again while
        stopping, end the stop at once (what is not written yet is counted as lost)."""
        if self.recording is None:
            return
        if self.recording.stopping:
            self.recording.hurry()
        else:
            self.recording.request_stop(reason)

    def install_signals(self) -> None:
        """SIGTERM and SIGINT stop (a second one at once); SIGHUP reopens the trace files."""
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda num, _frame: self.stop(signal.Signals(num).name))
        signal.signal(signal.SIGHUP, lambda _num, _frame: self.jobs and self.jobs.reopen())


def _close_socket(server) -> None:
    """Close a listening Unix socket and remove its file."""
    path = server.getsockname()
    server.close()
    try:
        os.unlink(path)
    except OSError:
        pass
