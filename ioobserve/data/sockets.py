"""A socket's name in a trace: its protocol and two ends, as the net layer's path record gives
them (events.SOCK_DESC), e.g. `tcp:127.0.0.1:41234->127.0.0.1:9000`; `[...]` around an IPv6
address; a socket not connected has its own end only (`udp:0.0.0.0:5353`). The name is what
the trace's FH record says in place of a path, so every per-file view works on connections too;
`parse_connection` takes it apart again for the views per endpoint."""

from __future__ import annotations

import ipaddress
import re
from typing import NamedTuple

import numpy as np

from ioobserve.data import events as ev

PROTOCOLS = {1: "tcp", 2: "udp"}  # SOCK_STREAM, SOCK_DGRAM on Internet sockets
_NAME = re.compile(r"^(?P<protocol>[a-z0-9]+):(?P<local>\[[0-9a-f:.]+\]:\d+|[0-9.]+:\d+)"
                   r"(?:->(?P<peer>\[[0-9a-f:.]+\]:\d+|[0-9.]+:\d+))?$")


class Connection(NamedTuple):
    """A socket's protocol and ends; `peer` is None for a socket that is not connected."""

    protocol: str
    local: str
    peer: str | None

    @property
    def peer_host(self) -> str | None:
        """The peer's address without its port (no brackets)."""
        return None if self.peer is None else self.peer.rsplit(":", 1)[0].strip("[]")

    @property
    def peer_port(self) -> int | None:
        """The peer's port."""
        return None if self.peer is None else int(self.peer.rsplit(":", 1)[1])


def _end(family: int, raw: np.ndarray, port: int) -> str:
    if family == ev.AF_INET:
        return f"{ipaddress.IPv4Address(bytes(raw[:4]))}:{port}"
    return f"[{ipaddress.IPv6Address(bytes(raw))}]:{port}"


def connection_name(data: bytes) -> str:
    """The name of the socket a path record's data (events.SOCK_DESC) describes; data that is
    too short is named for what it is, not guessed."""
    if len(data) < ev.SOCK_DESC.itemsize:
        return f"socket:?({len(data)} bytes)"
    desc = np.frombuffer(data, dtype=ev.SOCK_DESC, count=1)[0]
    family, kind = int(desc["family"]), int(desc["type"])
    if family not in (ev.AF_INET, ev.AF_INET6):
        return f"socket:family{family}"
    protocol = PROTOCOLS.get(kind, f"sock{kind}")
    local = _end(family, desc["local_addr"], int(desc["local_port"]))
    if not desc["peer_port"]:
        return f"{protocol}:{local}"
    return f"{protocol}:{local}->{_end(family, desc['peer_addr'], int(desc['peer_port']))}"


def endpoint_name(end: np.void) -> str:
    """serve's name for a service end (an ev.ENDPOINT): protocol, address and port, as a
    connection's name writes them (`tcp:10.0.0.9:443`)."""
    family, kind = int(end["family"]), int(end["type"])
    if family not in (ev.AF_INET, ev.AF_INET6):
        return f"socket:family{family}"
    return f"{PROTOCOLS.get(kind, f'sock{kind}')}:{_end(family, end['addr'], int(end['port']))}"


def service_end(name: str) -> str | None:
    """The end of a connection that serve names it by: the one with the lower port (the peer of
    a socket that connected, the own end of an accepted one or of one not connected), with the
    protocol; None for a name that is not a connection's."""
    connection = parse_connection(name)
    if connection is None:
        return None
    chosen = connection.local
    if connection.peer and connection.peer_port <= int(connection.local.rsplit(":", 1)[1]):
        chosen = connection.peer
    return f"{connection.protocol}:{chosen}"


def parse_connection(name: str) -> Connection | None:
    """The protocol and ends a connection's name gives; None for a name that is not one (a path)."""
    match = _NAME.match(name)
    if match is None:
        return None
    return Connection(match["protocol"], match["local"], match["peer"])
