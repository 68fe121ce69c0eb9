"""`ioobserve serve`: the node service (OpenMetrics, per-job traces, live event socket)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ioobserve.cli.errors import UserError, fail_probes
from ioobserve.cli.filters import CommOption, build_filters
from ioobserve.cli.prepare import ProbeChoice
from ioobserve.probes.load.loader import ProbeSizes

if TYPE_CHECKING:
    from ioobserve.serve.daemon import Daemon

EPILOG = """Examples:

  sudo ioobserve serve                                   # /metrics on 127.0.0.1:9464, socket /run/ioobserve/events.sock
  sudo ioobserve serve --config /etc/ioobserve/serve.toml
  sudo ioobserve serve --listen 0.0.0.0:9464 --record-job '*' --record-dir /scratch/io-traces

Config keys are the long options (listen, socket, socket-group, record-dir, record-job, rotate-mb,
rotate-s, comm, node, stop-timeout); the command line wins. SIGHUP starts new trace files;
SIGTERM stops (a second one at once). A job trace's full or failing disk is said in the log and
its recording resumes in a new file once the disk takes writes again.
Scheduler hooks: deploy/slurm/prolog.sh and epilog.sh (`ioobserve job start|stop ID`).
"""


def serve(
    config: Annotated[Path | None, typer.Option("--config", help="TOML file whose keys are these options.")] = None,
    listen: Annotated[str | None, typer.Option("--listen", help="HOST:PORT of /metrics (default 127.0.0.1:9464).")] = None,
    socket_path: Annotated[Path | None, typer.Option("--socket", help="Event stream and job commands (default /run/ioobserve/events.sock).")] = None,
    socket_group: Annotated[str | None, typer.Option("--socket-group", help="This group may read the stream too.")] = None,
    record_dir: Annotated[Path | None, typer.Option("--record-dir", help="Per-job traces (default /var/lib/ioobserve/traces).")] = None,
    record_job: Annotated[list[str] | None, typer.Option("--record-job", help="Record this job whenever it runs ('*': every job; repeatable).")] = None,
    rotate_mb: Annotated[float | None, typer.Option("--rotate-mb", help="A job's trace starts a new file after this many MB.")] = None,
    rotate_s: Annotated[float | None, typer.Option("--rotate-s", help="... or after this many seconds.")] = None,
    comm: CommOption = None,
    node: Annotated[str | None, typer.Option("--node", help="The metrics' node label (default: the host name).")] = None,
    stop_timeout: Annotated[float | None, typer.Option("--stop-timeout", help="Seconds a stop may spend writing out what is queued (default 30; a second SIGTERM: at once).")] = None,
    layers: Annotated[str | None, typer.Option("--layers", help="Layers aggregated (syscall, io_uring, aio, block, cache: all by default; net: Internet sockets' calls, opt-in), as record's --layers: no-NAME leaves one out, e.g. no-cache.")] = None,
    retain_days: Annotated[float | None, typer.Option("--retain-days", help="Remove job traces older than this many days.")] = None,
    retain_gb: Annotated[float | None, typer.Option("--retain-gb", help="Remove the oldest job traces while the record dir holds more than this many GB.")] = None,
    flood_limit: Annotated[int | None, typer.Option("--flood-limit", help="Events a second one cgroup may stream or send to a job trace (default 200000; 0: no limit); past it they are counted in the kernel, and the job trace marks the throttle. The aggregates count every event.")] = None,
    probe_stats: Annotated[bool | None, typer.Option("--probe-stats/--no-probe-stats", help="Have the kernel count the probes' run time (its BPF stats, a few tens of ns per probe run) while serving: /metrics then gives each program's runs and seconds.")] = None,
) -> None:
    """Run as the node's I/O service: per job, user, operation and mount point, counters and
    latency/size histograms aggregated in the kernel on /metrics; chosen jobs' full traces;
    a live event stream on a Unix socket (`ioobserve top --attach`)."""
    from ioobserve.cli.prepare import prepare_recording
    from ioobserve.probes.load.loader import ProbeError
    from ioobserve.serve.config import ConfigError, load_config
    from ioobserve.serve.daemon import Daemon, ServeError
    from ioobserve.serve.jobs import JobError, check_job_id
    from ioobserve.serve.stream import SocketError

    overrides = {"listen": listen, "socket": socket_path, "socket_group": socket_group, "record_dir": record_dir,
                 "record_job": record_job, "rotate_mb": rotate_mb, "rotate_s": rotate_s, "comm": comm, "node": node,
                 "stop_timeout": stop_timeout, "layers": layers, "retain_days": retain_days, "retain_gb": retain_gb,
                 "probe_stats": probe_stats, "flood_limit": flood_limit}

    def choose() -> ServeChoice:
        try:
            settings = load_config(config, overrides)
            layers_chosen = settings.serve_layers()
            settings.retention()  # checked before anything starts
            for job in settings.record_job:
                if job != "*":
                    check_job_id(job)
            filters = build_filters(None, None, settings.comm, None)
            filters.flood_limit = settings.flood_limit
            daemon = Daemon(settings)
            daemon.listen()
        except (ConfigError, JobError, ServeError, SocketError) as exc:
            raise UserError(str(exc)) from None
        return ServeChoice(filters, layers_chosen, sizes=ProbeSizes(aggregate_entries=AGGREGATE_ENTRIES),
                           daemon=daemon)

    choice, probes = prepare_recording("serve", choose)
    daemon, settings = choice.daemon, choice.daemon.config
    daemon.install_signals()
    host, port = settings.address()

    def ready() -> None:
        print(f"ioobserve serve: metrics on http://{host}:{port}/metrics, events on {settings.socket}", flush=True)

    try:
        daemon.run(probes, choice.filters, on_ready=ready)
    except ProbeError as exc:
        fail_probes(exc)
    print("ioobserve serve: stopped", flush=True)


AGGREGATE_ENTRIES = 16384  # (cgroup, user, op, device) keys the kernel keeps; histograms get 8x


@dataclass
class ServeChoice(ProbeChoice):
    """What `serve` was asked for: the probes' choice and the daemon, its listeners bound."""

    daemon: Daemon | None = None

    def abandon(self) -> None:
        """The probes did not compile: the listeners go."""
        if self.daemon is not None:
            self.daemon.close_listeners()
