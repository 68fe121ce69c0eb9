"""HTTPS over loopback through the system's libssl, and what it did, call by call.

A server thread (certificate and key: argv[1], argv[2]) answers HTTP/1.1 requests on one
kept-alive connection: ranged GETs get the bytes of their range, a PUT of a large body gets
a short answer, and a garbled request line a 400. The client sends each request's head in a
write of its own (the head the TLS layer copies) and a PUT's body in writes after it.

Prints one JSON object: {"pid", "calls": [[connection name, "write" or "read", bytes, what],
...]}, one per successful SSL write or read of either side (what: "head" for a client's
request head, "body", "answer" or "garbled"), and "body_bytes", the PUT's size.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import sys
import threading

RANGES = ((0, 999), (1000, 70999), (5, 7), (0, 262143))
BODY_BYTES = 100 << 20  # the large upload: its head is copied, not a byte of it
GARBLED = b"GET \x00\xff\xfe not a request\r\n\r\n"
calls: list[list] = []


def _name(sock: socket.socket) -> str:
    local, peer = sock.getsockname(), sock.getpeername()
    return f"tcp:{local[0]}:{local[1]}->{peer[0]}:{peer[1]}"


def write(sock: ssl.SSLSocket, data: bytes, what: str) -> None:
    """All of `data`, one SSL write per send, each noted."""
    view = memoryview(data)
    while view:
        n = sock.send(view)
        calls.append([_name(sock), "write", n, what])
        view = view[n:]


def read_until(sock: ssl.SSLSocket, buffered: bytearray, end: bytes) -> bytes:
    """Bytes up to and with `end` (from `buffered`, then the socket); the rest stays buffered."""
    chunk = bytearray(65536)
    while end not in buffered:
        n = sock.recv_into(chunk)
        if n == 0:
            raise EOFError("the peer closed the connection")
        calls.append([_name(sock), "read", n, "answer"])
        buffered += chunk[:n]
    at = buffered.index(end) + len(end)
    taken = bytes(buffered[:at])
    del buffered[:at]
    return taken


def read_exactly(sock: ssl.SSLSocket, buffered: bytearray, size: int) -> None:
    """Consume `size` bytes (from `buffered`, then the socket)."""
    chunk = bytearray(65536)
    while len(buffered) < size:
        n = sock.recv_into(chunk)
        if n == 0:
            raise EOFError("the peer closed the connection")
        calls.append([_name(sock), "read", n, "answer"])
        buffered += chunk[:n]
    del buffered[:size]


def serve(listener: socket.socket, context: ssl.SSLContext) -> None:
    """Answer requests until the client closes: each GET with its range's bytes."""
    raw, _ = listener.accept()
    conn = context.wrap_socket(raw, server_side=True)
    buffered = bytearray()
    while True:
        try:
            head = read_until(conn, buffered, b"\r\n\r\n")
        except (EOFError, ssl.SSLEOFError, ConnectionResetError):
            break
        lines = head.split(b"\r\n")
        fields = dict(line.split(b": ", 1) for line in lines[1:] if b": " in line)
        if lines[0].startswith(b"PUT "):
            read_exactly(conn, buffered, int(fields[b"Content-Length"]))
            write(conn, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", "answer")
        elif b"Range" in fields:
            first, last = (int(x) for x in fields[b"Range"].removeprefix(b"bytes=").split(b"-"))
            body = b"o" * (last - first + 1)
            write(conn, b"HTTP/1.1 206 Partial Content\r\nContent-Length: %d\r\n\r\n" % len(body) + body, "answer")
        else:
            write(conn, b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", "answer")
    conn.close()


def request(client: ssl.SSLSocket, buffered: bytearray, head: bytes, body: bytes = b"", what: str = "head") -> None:
    """Send one request (its head alone in a write), then read its answer whole."""
    write(client, head, what)
    if body:
        write(client, body, "body")
    answer = read_until(client, buffered, b"\r\n\r\n")
    length = int(answer.split(b"Content-Length: ", 1)[1].split(b"\r\n", 1)[0])
    read_exactly(client, buffered, length)


def main() -> None:
    cert, key = sys.argv[1], sys.argv[2]
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert, key)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    server = threading.Thread(target=serve, args=(listener, server_context))
    server.start()
    client_context = ssl.create_default_context(cafile=cert)
    client = client_context.wrap_socket(socket.create_connection(listener.getsockname()), server_hostname="127.0.0.1")
    buffered = bytearray()
    for first, last in RANGES:
        request(client, buffered, b"GET /bucket/shard-%d.tar HTTP/1.1\r\nHost: 127.0.0.1\r\nRange: bytes=%d-%d\r\n\r\n"
                % (first, first, last))
    request(client, buffered, b"PUT /bucket/checkpoint.pt HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n"
            % BODY_BYTES, b"b" * BODY_BYTES)
    request(client, buffered, GARBLED, what="garbled")
    client.close()
    server.join()
    listener.close()
    print(json.dumps({"pid": os.getpid(), "calls": calls, "body_bytes": BODY_BYTES}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
