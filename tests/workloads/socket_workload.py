"""Talks over loopback with every call the net layer traces and says what it did, call by call.

A TCP exchange over IPv4 and one over IPv6 (connect, accept4; sendto, recvfrom; sendmsg,
recvmsg; write, read; writev, readv, on the socket's descriptor), a UDP datagram each way,
UDP sockets made and closed one after another, and, as what the layer must leave out, a Unix
socket pair and a pipe. Prints one JSON object:
{"pid", "calls": [[connection name, op, return value], ...], "unix_bytes", "pipe_bytes"},
where the name is the one the trace must give the socket (ioobserve.data.sockets), from
the client's side or the server's, and every call that moves bytes made in exchange(),
receive(), datagrams() or short_lived() (the Python frames the trace must show).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading

SIZES = (1000, 4096, 65536, 3)  # a send of each size, by each way
calls: list[list] = []


def _name(sock: socket.socket, peer: bool = True) -> str:
    """The trace's name for a socket: protocol, its own end, its peer."""
    protocol = "tcp" if sock.type == socket.SOCK_STREAM else "udp"

    def end(address) -> str:
        host, port = address[0], address[1]
        return f"[{host}]:{port}" if sock.family == socket.AF_INET6 else f"{host}:{port}"

    name = f"{protocol}:{end(sock.getsockname())}"
    return f"{name}->{end(sock.getpeername())}" if peer else name


def _note(sock: socket.socket, op: str, result: int) -> int:
    calls.append([_name(sock), op, result])
    return result


def receive(conn: socket.socket, want: int, way: str) -> None:
    """Read `want` bytes from conn by one way (recvfrom, recvmsg, read, readv)."""
    buffer = bytearray(65536)
    got = 0
    while got < want:
        size = min(len(buffer), want - got)
        if way == "recvfrom":
            n = conn.recv_into(buffer, size)
        elif way == "recvmsg":
            n = conn.recvmsg_into([memoryview(buffer)[:size]])[0]
        elif way == "read":
            n = len(os.read(conn.fileno(), size))
        else:
            half = size // 2
            n = os.readv(conn.fileno(), [memoryview(buffer)[:half], memoryview(buffer)[half:size]])
        got += _note(conn, {"recvfrom": "recvfrom", "recvmsg": "recvmsg", "read": "read", "readv": "readv"}[way], n)


def send(sock: socket.socket, data: bytes, way: str) -> None:
    """Send all of `data` by one way (sendto, sendmsg, write, writev)."""
    view = memoryview(data)
    while view:
        if way == "sendto":
            n = sock.send(view)
        elif way == "sendmsg":
            n = sock.sendmsg([view])
        elif way == "write":
            n = os.write(sock.fileno(), view)
        else:
            half = len(view) // 2
            n = os.writev(sock.fileno(), [view[:half], view[half:]])
        _note(sock, way, n)
        view = view[n:]


WAYS = (("sendto", "recvfrom"), ("sendmsg", "recvmsg"), ("write", "read"), ("writev", "readv"))


def exchange(family: int, host: str) -> None:
    """One connection: the client sends each size by each way, the server reads it by the
    matching way, then answers the same way round."""
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.bind((host, 0))
    listener.listen()
    accepted: list[socket.socket] = []
    ready = threading.Event()

    def serve() -> None:
        conn, _ = listener.accept()
        accepted.append(conn)
        ready.set()
        for send_way, receive_way in WAYS:
            for size in SIZES:
                receive(conn, size, receive_way)
                send(conn, b"r" * size, send_way)

    server = threading.Thread(target=serve)
    server.start()
    client = socket.socket(family, socket.SOCK_STREAM)
    client.connect(listener.getsockname()[:2])
    ready.wait()
    calls.append([_name(client), "connect", 0])
    calls.append([_name(accepted[0]), "accept4", accepted[0].fileno()])
    for send_way, receive_way in WAYS:
        for size in SIZES:
            send(client, b"q" * size, send_way)
            receive(client, size, receive_way)
    server.join()
    client.close()
    accepted[0].close()
    listener.close()


def datagrams() -> None:
    """A UDP datagram each way between two unconnected sockets (no peer: named by their own end)."""
    a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    a.bind(("127.0.0.1", 0))
    b.bind(("127.0.0.1", 0))
    calls.append([_name(a, peer=False), "sendto", a.sendto(b"d" * 700, b.getsockname())])
    calls.append([_name(b, peer=False), "recvfrom", len(b.recvfrom(2048)[0])])
    calls.append([_name(b, peer=False), "sendto", b.sendto(b"e" * 900, a.getsockname())])
    calls.append([_name(a, peer=False), "recvfrom", len(a.recvfrom(2048)[0])])
    a.close()
    b.close()


def short_lived(rounds: int = 30) -> None:
    """UDP sockets made and closed one after another: each is a new connection with its own
    name, though the kernel may give it a closed one's struct file and inode addresses."""
    for _ in range(rounds):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.connect(("127.0.0.1", 9))  # the discard port: nothing need listen for a send
            calls.append([_name(sock), "connect", 0])
            calls.append([_name(sock), "sendto", sock.send(b"s" * 100)])


def not_network() -> tuple[int, int]:
    """A Unix socket pair and a pipe: bytes moved that the net layer must not show."""
    left, right = socket.socketpair()
    unix = left.send(b"u" * 5000) + len(right.recv(8192))
    left.close()
    right.close()
    reader, writer = os.pipe()
    pipe = os.write(writer, b"p" * 3000) + len(os.read(reader, 8192))
    os.close(reader)
    os.close(writer)
    return unix, pipe


def main() -> None:
    exchange(socket.AF_INET, "127.0.0.1")
    exchange(socket.AF_INET6, "::1")
    datagrams()
    short_lived()
    unix, pipe = not_network()
    print(json.dumps({"pid": os.getpid(), "calls": calls, "unix_bytes": unix, "pipe_bytes": pipe}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
