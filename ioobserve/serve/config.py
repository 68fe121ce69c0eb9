"""`serve`'s settings: a TOML file whose keys are the command's long options (`listen`,
`record-dir`, ...), with the command line winning over the file. Unknown keys, wrong types
and unreadable files are errors naming the key or the file."""

from __future__ import annotations

import grp
from dataclasses import dataclass, field, fields
from pathlib import Path

import tomllib

from ioobserve.plumbing.deadline import DEFAULT_STOP_TIMEOUT_S
from ioobserve.plumbing.host import node_name
from ioobserve.probes import layers as ly
from ioobserve.probes.maps.filters import DEFAULT_FLOOD_LIMIT

DEFAULT_LISTEN = "127.0.0.1:9464"
DEFAULT_SOCKET = Path("/run/ioobserve/events.sock")
DEFAULT_RECORD_DIR = Path("/var/lib/ioobserve/traces")
SERVE_LAYERS = frozenset({ly.SYSCALL, ly.IO_URING, ly.AIO, ly.BLOCK, ly.CACHE, ly.NET})  # aggregated in the kernel


class ConfigError(Exception):
    """A setting that cannot be used; the message names it."""


@dataclass
class ServeConfig:
    """Every setting of `serve` (the TOML key is the field name with - for _)."""

    listen: str = DEFAULT_LISTEN  # HOST:PORT of /metrics
    node: str = field(default_factory=node_name)  # the metrics' node label
    socket: Path = DEFAULT_SOCKET  # the live event stream and the job commands
    socket_group: str | None = None  # this group may read the stream too (root always may)
    record_dir: Path = DEFAULT_RECORD_DIR  # per-job traces go to <record-dir>/job-<id>/
    record_job: list[str] = field(default_factory=list)  # jobs recorded whenever they run ("*": every Slurm job)
    rotate_mb: float | None = None  # a job's trace starts a new part after this many MB
    rotate_s: float | None = None  # ... or after this many seconds
    comm: list[str] = field(default_factory=list)  # only these commands (as `record --comm`)
    stop_timeout: float = DEFAULT_STOP_TIMEOUT_S  # seconds a stop may spend writing out what is left
    layers: str | None = None  # the layers aggregated, as record's --layers (of SERVE_LAYERS; default all)
    retain_days: float | None = None  # job traces older than this are removed
    retain_gb: float | None = None  # ... and the oldest while record-dir holds more than this
    probe_stats: bool = False  # the kernel counts the probes' run time (BPF stats) while serving, for /metrics
    flood_limit: int = DEFAULT_FLOOD_LIMIT  # events a second one cgroup may stream or trace (0: no limit)

    def serve_layers(self) -> frozenset[str]:
        """The layers to aggregate: `layers` as record's --layers reads it, within SERVE_LAYERS."""
        try:
            chosen = ly.parse_layers(self.layers) - {ly.PYTHON}  # Python stacks are record's
        except ly.LayerError as exc:
            raise ConfigError(str(exc).replace("--layers", "layers", 1)) from None
        others = chosen - SERVE_LAYERS
        if others:
            raise ConfigError(f"layers {self.layers!r}: serve aggregates only {', '.join(sorted(SERVE_LAYERS))} "
                              f"({', '.join(sorted(others))}: probes in every process, for record)")
        return chosen

    def retention(self) -> tuple[float | None, int | None]:
        """retain-days and retain-gb as (days, bytes); None: no limit."""
        for key, value in (("retain-days", self.retain_days), ("retain-gb", self.retain_gb)):
            if value is not None and value <= 0:
                raise ConfigError(f"{key} {value:g}: must be more than 0")
        return self.retain_days, int(self.retain_gb * 1e9) if self.retain_gb is not None else None

    def address(self) -> tuple[str, int]:
        """listen as (host, port)."""
        host, sep, port = self.listen.rpartition(":")
        if not sep or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"listen {self.listen!r}: expected HOST:PORT, e.g. 127.0.0.1:9464")
        return host.strip("[]") or "127.0.0.1", int(port)

    def group_id(self) -> int | None:
        """socket-group as a gid (None: root only)."""
        if self.socket_group is None:
            return None
        try:
            return grp.getgrnam(self.socket_group).gr_gid
        except KeyError:
            raise ConfigError(f"socket-group {self.socket_group!r}: no such group") from None


_TYPES = {"listen": str, "node": str, "socket": str, "socket_group": str, "record_dir": str, "record_job": list,
          "rotate_mb": (int, float), "rotate_s": (int, float), "comm": list, "stop_timeout": (int, float),
          "layers": str, "retain_days": (int, float), "retain_gb": (int, float), "probe_stats": bool,
          "flood_limit": int}


def load_config(path: Path | None, overrides: dict) -> ServeConfig:
    """The file's settings (if any) with the command line's non-None values on top."""
    values: dict = {}
    if path is not None:
        try:
            with open(path, "rb") as handle:
                raw = tomllib.load(handle)
        except OSError as exc:
            raise ConfigError(f"config {path}: cannot read it ({exc.strerror})") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config {path}: not valid TOML ({exc})") from None
        known = {f.name for f in fields(ServeConfig)}
        for key, value in raw.items():
            name = key.replace("-", "_")
            if name not in known:
                raise ConfigError(f"config {path}: unknown key {key!r} (known: {', '.join(sorted(k.replace('_', '-') for k in known))})")
            if not isinstance(value, _TYPES[name]) or (isinstance(value, bool) and _TYPES[name] is not bool):
                raise ConfigError(f"config {path}: {key} has the wrong type ({type(value).__name__})")
            if isinstance(value, list) and not all(isinstance(item, str | int) for item in value):
                raise ConfigError(f"config {path}: {key} must be a list of names or numbers")
            values[name] = [str(item) for item in value] if isinstance(value, list) else value
    values.update({name: value for name, value in overrides.items() if value not in (None, [])})
    for name in ("socket", "record_dir"):
        if name in values:
            values[name] = Path(values[name])
    config = ServeConfig(**values)
    if config.stop_timeout < 0:
        raise ConfigError(f"stop-timeout {config.stop_timeout:g}: must be 0 or more seconds")
    if config.flood_limit < 0:
        raise ConfigError(f"flood-limit {config.flood_limit}: must be 0 (no limit) or more events a second")
    config.address()
    config.group_id()
    return config
