"""`serve`'s settings: a TOML file whose keys are the command's long options (`listen`,
`record-dir`, ...), with the command line winning over the file. Unknown keys, wrong types
and unreadable files are errors naming the key or the file."""

from __future__ import annotations

import grp
import socket
from dataclasses import dataclass, field, fields
from pathlib import Path

import tomllib

from ioobserve.deadline import DEFAULT_STOP_TIMEOUT_S

DEFAULT_LISTEN = "127.0.0.1:9464"
DEFAULT_SOCKET = Path("/run/ioobserve/events.sock")
DEFAULT_RECORD_DIR = Path("/var/lib/ioobserve/traces")


class ConfigError(Exception):
    """A setting that cannot be used; the message names it."""


@dataclass
class ServeConfig:
    """Every setting of `serve` (the TOML key is the field name with - for _)."""

    listen: str = DEFAULT_LISTEN  # HOST:PORT of /metrics
    node: str = field(default_factory=socket.gethostname)  # the metrics' node label
    socket: Path = DEFAULT_SOCKET  # the live event stream and the job commands
    socket_group: str | None = None  # this group may read the stream too (root always may)
    record_dir: Path = DEFAULT_RECORD_DIR  # per-job traces go to <record-dir>/job-<id>/
    record_job: list[str] = field(default_factory=list)  # jobs recorded whenever they run ("*": every Slurm job)
    rotate_mb: float | None = None  # a job's trace starts a new part after this many MB
    rotate_s: float | None = None  # ... or after this many seconds
    comm: list[str] = field(default_factory=list)  # only these commands (as `record --comm`)
    stop_timeout: float = DEFAULT_STOP_TIMEOUT_S  # seconds a stop may spend writing out what is left

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
          "rotate_mb": (int, float), "rotate_s": (int, float), "comm": list, "stop_timeout": (int, float)}


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
            if not isinstance(value, _TYPES[name]) or isinstance(value, bool):
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
    config.address()
    config.group_id()
    return config
