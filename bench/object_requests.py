"""Cost of the network layers on object-storage reads: a loop of small ranged GETs (4 KiB)
over loopback to a local server, over HTTP and over HTTPS, run plain, under `ioobserve record`
with the default layers, with `--layers net` and (HTTPS) `--layers tls`, and under `strace -f`
(the peer that sees socket calls: DFTracer and Darshan intercept none). Interleaved round by
round; medians of the loop's own µs per request, what each configuration adds per request,
and its ratio to the plain loop. The server (a thread of this script, answering from memory)
is not the recorded command: only the client's calls are traced.

  sudo .venv/bin/python bench/object_requests.py --rounds 5 [--requests 2000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from harness import BENCH, IOOBSERVE, PYTHON, against_plain
from overhead import measure

OBJECT = os.urandom(1 << 20)
CONFIGS = {"plain": None, "default layers": [], "--layers net": ["--layers", "net"], "--layers tls": ["--layers", "tls"],
           "strace -f": None}
STRACE = ["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=%network,%desc"]


class RangeHandler(BaseHTTPRequestHandler):
    """Answers GET with the Range asked of OBJECT, on kept-alive connections."""

    protocol_version = "HTTP/1.1"
    wbufsize = 1 << 16  # headers and body in one write (else Nagle and delayed ACKs add 40 ms a request)

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        first, last = (int(x) for x in self.headers["Range"].removeprefix("bytes=").split("-"))
        body = OBJECT[first:last + 1]
        self.send_response(206)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_) -> None:
        """Quiet."""


def serve(work: Path, tls: bool) -> tuple[ThreadingHTTPServer, str, str]:
    """A server on 127.0.0.1 in a thread: (server, its URL, its CA file or "")."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), RangeHandler)
    ca_file = ""
    if tls:
        cert, key = work / "cert.pem", work / "key.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1", "-days", "1", "-keyout", str(key), "-out", str(cert)],
                       check=True, capture_output=True)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        ca_file = str(cert)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    scheme = "https" if tls else "http"
    return server, f"{scheme}://127.0.0.1:{server.server_address[1]}/bucket/object", ca_file


def run(rounds: int, requests: int, size: int) -> dict:
    """{scheme: {config: [µs per request, ...]}}, configurations interleaved round by round."""
    work = Path(tempfile.mkdtemp(prefix="ioobserve-requests-"))
    results: dict = {}
    try:
        for tls in (False, True):
            server, url, ca_file = serve(work, tls)
            command = [str(PYTHON), str(BENCH / "workloads" / "ranged_gets.py"), url, str(requests), str(size), ca_file]
            configs = [c for c in CONFIGS if tls or c != "--layers tls"]
            scheme = "HTTPS" if tls else "HTTP"
            results[scheme] = {config: [] for config in configs}
            for _ in range(rounds):
                for config in configs:
                    options = CONFIGS[config]
                    if config == "strace -f":
                        argv = [*STRACE, *command]
                    elif options is None:
                        argv = command
                    else:
                        argv = [str(IOOBSERVE), "record", "-o", tempfile.mkdtemp(dir=work, prefix="trace-"), *options, "--", *command]
                    results[scheme][config].append(measure(argv, "us_per_request", f"{config} / {scheme}"))
            server.shutdown()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results


def report(results: dict) -> str:
    """Medians, µs added per request, and the ratio of the loop's time to the plain loop's."""
    lines = ["| loop | config | µs/request (median) | min-max | added µs/request | ratio |", "|---|---|---|---|---|---|"]
    for scheme, by_config in results.items():
        for config, med, low, high, added, ratio in against_plain(by_config):
            shown = "" if added is None else f"{added:+.1f}"
            lines.append(f"| {scheme} | {config} | {med:.1f} | {low:.1f}-{high:.1f} | {shown} | {ratio:.2f}x |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--size", type=int, default=4096)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/object_requests.py: run as root (the traced configurations attach probes)")
    print(report(run(args.rounds, args.requests, args.size)))


if __name__ == "__main__":
    main()
