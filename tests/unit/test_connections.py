"""A socket's name from the net layer's record (events.SOCK_DESC), and back."""

from __future__ import annotations

import ipaddress

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from ioobserve.data import events as ev
from ioobserve.data.decode import _decode_path
from ioobserve.data.sockets import Connection, connection_name, endpoint_name, parse_connection, service_end


def _desc(family: int, kind: int, local: tuple[str, int], peer: tuple[str, int] | None) -> bytes:
    desc = np.zeros(1, dtype=ev.SOCK_DESC)
    desc["family"], desc["type"] = family, kind
    packed = (lambda host: ipaddress.ip_address(host).packed.ljust(16, b"\0"))
    desc["local_port"], desc["local_addr"] = local[1], np.frombuffer(packed(local[0]), dtype=np.uint8)
    if peer is not None:
        desc["peer_port"], desc["peer_addr"] = peer[1], np.frombuffer(packed(peer[0]), dtype=np.uint8)
    return desc.tobytes()


def test_ipv4_tcp_names_both_ends_and_parses_back():
    name = connection_name(_desc(ev.AF_INET, 1, ("10.0.0.5", 41234), ("52.216.8.1", 443)))
    assert name == "tcp:10.0.0.5:41234->52.216.8.1:443"
    assert parse_connection(name) == Connection("tcp", "10.0.0.5:41234", "52.216.8.1:443")
    assert parse_connection(name).peer_host == "52.216.8.1" and parse_connection(name).peer_port == 443


def test_ipv6_addresses_are_bracketed_and_compressed():
    name = connection_name(_desc(ev.AF_INET6, 1, ("::1", 5000), ("2001:db8::7", 9000)))
    assert name == "tcp:[::1]:5000->[2001:db8::7]:9000"
    assert parse_connection(name).peer_host == "2001:db8::7"


def test_an_unconnected_datagram_socket_has_its_own_end_only():
    name = connection_name(_desc(ev.AF_INET, 2, ("0.0.0.0", 5353), None))
    assert name == "udp:0.0.0.0:5353"
    assert parse_connection(name) == Connection("udp", "0.0.0.0:5353", None)
    assert parse_connection(name).peer_port is None


def test_odd_records_are_named_for_what_they_are():
    assert connection_name(b"\x02\x00") == "socket:?(2 bytes)"
    assert connection_name(_desc(1, 1, ("0.0.0.0", 0), None)).startswith("socket:family1")
    assert connection_name(_desc(ev.AF_INET, 5, ("127.0.0.1", 1), ("127.0.0.1", 2))).startswith("sock5:")


def test_a_path_is_not_a_connection():
    assert parse_connection("/data/shard-0001.tar") is None
    assert parse_connection("tcp-dump.pcap") is None


def test_a_socket_path_record_decodes_to_its_name():
    data = _desc(ev.AF_INET, 1, ("127.0.0.1", 40000), ("127.0.0.1", 9000))
    head = np.zeros(1, dtype=ev.PATH_RECORD)
    head["kind"], head["size"] = ev.AUX_PATH, ev.PATH_RECORD.itemsize + len(data)
    head["ino"], head["dev"], head["mode"], head["len"] = 77, 9, ev.S_IFSOCK | 0o777, len(data)
    record = _decode_path(head.tobytes() + data)
    assert (record.dev, record.ino, record.path) == (9, 77, "tcp:127.0.0.1:40000->127.0.0.1:9000")


@given(st.ip_addresses(), st.integers(0, 65535), st.ip_addresses(), st.integers(1, 65535))
def test_every_name_parses_back_to_its_ends(local_host, local_port, peer_host, peer_port):
    family = ev.AF_INET if local_host.version == 4 else ev.AF_INET6
    if peer_host.version != local_host.version:
        peer_host = local_host
    name = connection_name(_desc(family, 1, (str(local_host), local_port), (str(peer_host), peer_port)))
    parsed = parse_connection(name)
    assert parsed is not None and parsed.peer_port == peer_port
    assert ipaddress.ip_address(parsed.peer_host) == peer_host


def test_the_service_end_is_the_end_with_the_lower_port():
    assert service_end("tcp:10.0.0.5:41234->52.216.8.1:443") == "tcp:52.216.8.1:443"  # a client: its peer
    assert service_end("tcp:10.0.0.5:443->10.0.0.7:51000") == "tcp:10.0.0.5:443"  # an accepted socket: its own end
    assert service_end("udp:0.0.0.0:5353") == "udp:0.0.0.0:5353"  # not connected
    assert service_end("tcp:[::1]:9000->[::1]:9000") == "tcp:[::1]:9000"
    assert service_end("/data/x") is None


def test_an_endpoint_record_is_named_as_a_connection_names_its_end():
    end = np.zeros(1, dtype=ev.ENDPOINT)[0]
    end["family"], end["type"], end["port"] = ev.AF_INET6, 1, 443
    end["addr"][15] = 1
    assert endpoint_name(end) == "tcp:[::1]:443" == service_end("tcp:[::1]:50000->[::1]:443")
    end["family"] = 1
    assert endpoint_name(end) == "socket:family1"
