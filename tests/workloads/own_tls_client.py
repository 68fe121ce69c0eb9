"""A client that brings its own TLS: helm (Go's crypto/tls, statically linked: no libssl)
fetching a chart from an HTTPS server this script runs on loopback through Python's ssl
(the system's libssl). Prints {"pid", "client_pid", "client_status"} once helm has ended
(it fails on the server's 404, after its TLS handshake)."""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import threading


def serve(listener: socket.socket, context: ssl.SSLContext) -> None:
    """Answer one connection's requests with 404 until the client closes it."""
    raw, _ = listener.accept()
    try:
        conn = context.wrap_socket(raw, server_side=True)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(4096)
            if not chunk:
                return
            data += chunk
        conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        conn.close()
    except (ssl.SSLError, OSError):
        raw.close()


def main() -> None:
    helm, cert, key = sys.argv[1:4]
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    server = threading.Thread(target=serve, args=(listener, context))
    server.start()
    with tempfile.TemporaryDirectory() as home:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "HELM_CACHE_HOME": f"{home}/cache",
               "HELM_CONFIG_HOME": f"{home}/config", "HELM_DATA_HOME": f"{home}/data"}
        url = f"https://127.0.0.1:{listener.getsockname()[1]}/charts/demo-0.1.0.tgz"
        client = subprocess.Popen([helm, "show", "chart", url, "--insecure-skip-tls-verify"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        status = client.wait(timeout=120)
    server.join(timeout=60)
    listener.close()
    print(json.dumps({"pid": os.getpid(), "client_pid": client.pid, "client_status": status}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
