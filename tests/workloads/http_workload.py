"""Sends HTTP/1.1 requests to a server of its own on loopback and says what each one got.

The server (a thread of this process: its reads begin requests and its writes begin answers,
which the net layer copies neither of) keeps objects in a dict. The client sends, over two
keep-alive connections, requests signed as S3's are (GetObject, PutObject, HeadObject, and a
GetObject of a key that is missing: 404) and one plain GET that is no S3 request. Prints one
JSON object: {"pid", "requests": [[operation, status], ...]}, the operation as the observer
must name it (S3's, else the method), the status as http.client read it.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SIGNED = {"Authorization": "AWS4-HMAC-SHA256 Credential=testing/20261207/us-east-1/s3/aws4_request, "
                           "SignedHeaders=host, Signature=0", "x-amz-content-sha256": "UNSIGNED-PAYLOAD"}
objects: dict[str, bytes] = {}


class Store(BaseHTTPRequestHandler):
    """A bucket in memory: GET, HEAD and PUT of keys."""

    protocol_version = "HTTP/1.1"  # keep-alive: several requests on one connection

    def _answer(self, status: int, body: bytes = b"", length: int | None = None) -> None:
        self.send_response(status)
        self.send_header("x-amz-request-id", os.urandom(8).hex().upper())
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        body = objects.get(self.path)
        self._answer(200, body) if body is not None else self._answer(404, b"<Error>NoSuchKey</Error>")

    def do_HEAD(self) -> None:  # noqa: N802
        body = objects.get(self.path)
        self._answer(200 if body is not None else 404, length=len(body or b""))

    def do_PUT(self) -> None:  # noqa: N802
        objects[self.path] = self.rfile.read(int(self.headers["Content-Length"]))
        self._answer(200)

    def log_message(self, *_) -> None:
        """Quiet."""


def ask(conn: http.client.HTTPConnection, method: str, path: str, operation: str, body: bytes | None = None,
        signed: bool = True) -> list:
    """One request on `conn`: [operation, status]."""
    conn.request(method, path, body=body, headers=SIGNED if signed else {})
    answer = conn.getresponse()
    answer.read()
    return [operation, answer.status]


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Store)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    requests = []
    first = http.client.HTTPConnection("127.0.0.1", port)
    for index in range(2):
        requests.append(ask(first, "PUT", f"/bucket/shard-{index}.tar", "PutObject", os.urandom(50_000)))
    for index in (0, 1, 0):
        requests.append(ask(first, "GET", f"/bucket/shard-{index}.tar", "GetObject"))
    second = http.client.HTTPConnection("127.0.0.1", port)
    requests.append(ask(second, "GET", "/bucket/missing.tar", "GetObject"))
    requests.append(ask(second, "HEAD", "/bucket/shard-1.tar", "HeadObject"))
    requests.append(ask(second, "GET", "/health", "GET", signed=False))
    for conn in (first, second):
        conn.close()
    server.shutdown()
    print(json.dumps({"pid": os.getpid(), "requests": requests}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
