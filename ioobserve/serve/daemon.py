"""The node service: one capture with kernel aggregation, `/metrics` over HTTP, the event
socket, and per-job traces, until SIGTERM; SIGHUP starts new trace files (logrotate)."""

from __future__ import annotations

import os
import signal
import threading
import time

from ioobserve.collect.options import RecordingOptions
from ioobserve.collect.recording import Recording
from ioobserve.probes.load.loader import Probes
from ioobserve.probes.maps.filters import KernelFilters
from ioobserve.serve.config import ServeConfig
from ioobserve.serve.jobs import JobRecorder
from ioobserve.serve.metrics import KernelCollector
from ioobserve.serve.request_tally import RequestCounts, RequestTally
from ioobserve.serve.retention import sweep
from ioobserve.serve.stream import EventStream, bind_socket
from ioobserve.sinks.base import Sinks
from ioobserve.trace.output import OutputError, check_output_dir

DISCOVER_S = 1.0  # how often recorded jobs' new cgroups are looked for
RETENTION_S = 60.0  # how often job traces are swept (retain-days, retain-gb)


class ServeError(Exception):
    """The service cannot start; the message says why."""


class Daemon:
    """Everything `serve` runs: listen() binds its listeners, run() serves until stop() (or a
    signal)."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self.stopped = threading.Event()
        self.http = None
        self.registry = None
        self.server = None  # the event socket, listening
        self.stream: EventStream | None = None
        self.recording: Recording | None = None
        self.jobs: JobRecorder | None = None

    def listen(self) -> None:
        """Check the record dir and bind the listeners (a port in use or a socket taken is told
        before the probes compile); ServeError or SocketError says what is wrong."""
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
        self.registry = CollectorRegistry(auto_describe=True)
        self.server = bind_socket(self.config.socket, self.config.group_id())
        try:
            self.http, _ = start_http_server(port, host, self.registry)
        except OSError as exc:
            self.close_listeners()
            raise ServeError(f"listen {self.config.listen}: {exc.strerror or exc}") from None

    def close_listeners(self) -> None:
        """Give back what listen() bound (serving never started)."""
        if self.http is not None:
            self.http.shutdown()
        if self.server is not None:
            _close_socket(self.server)

    def run(self, probes: Probes, filters: KernelFilters, on_ready=None) -> None:
        """Attach the probes and serve until stop(); returns after the probes are detached and
        every trace is closed."""
        jobs = JobRecorder(probes, self.config.record_dir, self.config.record_job,
                           rotate_bytes=int(self.config.rotate_mb * 1e6) if self.config.rotate_mb else None,
                           rotate_seconds=self.config.rotate_s, stop_timeout=self.config.stop_timeout)
        self.jobs = jobs
        self.stream = EventStream(self.server, self._command, lambda on: probes.tables.emit_some(not on))
        tally = RequestTally()
        recording = Recording(probes, filters, Sinks([jobs, self.stream, tally]), RecordingOptions(
            stop_timeout=self.config.stop_timeout, probe_stats=self.config.probe_stats))
        self.recording = recording
        self.registry.register(KernelCollector(probes, self.config.node, cgroups=recording.cgroups,
                                               probe_stats=self.config.probe_stats, requests=RequestCounts(tally)))
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
