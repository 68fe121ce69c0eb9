"""Issue 49 on a real job: the reference PyTorch DataLoader with its samples in object storage,
plain and under `record` with each network layer.

The job is bench/workloads/torch_s3_loader.py: 4 spawned workers importing torch and boto3,
2 epochs, 48 samples of 1 MiB, each fetched whole by get_object over HTTPS from moto's S3
server on 127.0.0.1 (its own process, outside the recorded command: its CPU is the same in
every configuration). It runs plain, under `record` with the default layers, with
`--layers net` and with `--layers tls`, and under `strace -f` (the peer that sees socket
calls: DFTracer and Darshan intercept none), interleaved round by round; medians of the job's own
"seconds" (from making its DataLoader to its last batch) and the ratio to plain in the same
run. Each traced run is checked against the job (check_trace), so a figure is never of a
recording that missed the fetches.

  sudo .venv/bin/python bench/s3_job.py --torch-python /var/tmp/torchvenv/bin/python --rounds 5

--torch-python is a scratch venv's python with `pip install torch==2.13.0 boto3`, never the
project's environment.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import boto3
import polars as pl
from harness import BENCH, IOOBSERVE, ROOT, against_plain  # first: this checkout's ioobserve
from overhead import measure

from ioobserve.data import schema as s
from ioobserve.trace.read.reader import load

LOADER = BENCH / "workloads" / "torch_s3_loader.py"
MOTO_SERVER = ROOT / ".venv" / "bin" / "moto_server"
BUCKET = "samples"
CONFIGS = {"plain": None, "record (default layers)": [], "record --layers net": ["--layers", "net"],
           "record --layers tls": ["--layers", "tls"], "strace -f": None}
STRACE = ["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=%network,%desc"]  # the peer that sees sockets


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(work: Path) -> tuple[subprocess.Popen, str, str]:
    """moto's S3 over HTTPS on 127.0.0.1 with a self-signed certificate: (process, endpoint, CA file)."""
    cert, key = work / "cert.pem", work / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-days", "1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    port = _free_port()
    server = subprocess.Popen([str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(port), "-c", str(cert), "-k", str(key)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and server.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server, f"https://127.0.0.1:{port}", str(cert)
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise RuntimeError(f"moto's server did not listen on {port}")


def upload(endpoint: str, ca_file: str, samples: int, size: int) -> None:
    """The samples, as the job's objects."""
    client = boto3.client("s3", endpoint_url=endpoint, verify=ca_file, aws_access_key_id="bench",
                          aws_secret_access_key="bench", region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    for index in range(samples):
        client.put_object(Bucket=BUCKET, Key=f"sample-{index:05d}.bin", Body=os.urandom(size))


def check_trace(trace_dir: Path, config: str, args) -> None:
    """That the recording saw the job's fetches: with the TLS layer every sample's GET is an
    HTTP event; with the NET layer alone (HTTPS: no request to read) the sockets received at
    least the samples' bytes."""
    events = load(sorted(trace_dir.glob("*.pfw.gz")))
    if "tls" in config:
        seen = events.filter((pl.col(s.LAYER) == s.LAYER_HTTP) & (pl.col(s.OP) == "GET")
                             & pl.col(s.PATH).cast(pl.String).str.contains(f"/{BUCKET}/sample-")).height
        if seen != args.samples * args.epochs:
            raise RuntimeError(f"{config}: {seen} GETs in the trace, the job made {args.samples * args.epochs}")
    elif "net" in config:
        received = events.filter((pl.col(s.LAYER) == s.LAYER_NET) & pl.col(s.OP).is_in(["read", "recvfrom", "recvmsg", "readv"]))
        got, fetched = int(received.get_column(s.BYTES).sum()), args.samples * args.epochs * args.size
        if got < fetched:
            raise RuntimeError(f"{config}: the sockets received {got} bytes, the job fetched {fetched}")


def run(args) -> dict[str, list[float]]:
    """{config: [seconds, ...]}, configurations interleaved round by round."""
    work = Path(tempfile.mkdtemp(prefix="ioobserve-s3-job-"))
    server = None
    try:
        server, endpoint, ca_file = start_server(work)
        upload(endpoint, ca_file, args.samples, args.size)
        job = [str(args.torch_python), str(LOADER), "--endpoint", endpoint, "--ca", ca_file, "--bucket", BUCKET,
               "--samples", str(args.samples), "--size", str(args.size), "--workers", str(args.workers),
               "--epochs", str(args.epochs)]
        measure(job, "seconds", "warm-up")  # torch's and boto3's files into the page cache
        results: dict[str, list[float]] = {config: [] for config in CONFIGS}
        for _ in range(args.rounds):
            for config, options in CONFIGS.items():
                if options is None:
                    argv = [*STRACE, *job] if config == "strace -f" else job
                    results[config].append(measure(argv, "seconds", config))
                    continue
                out = Path(tempfile.mkdtemp(dir=work, prefix="trace-"))
                results[config].append(measure([str(IOOBSERVE), "record", "-o", str(out), *options, "--", *job],
                                               "seconds", config))
                check_trace(out, config, args)
                shutil.rmtree(out, ignore_errors=True)
        return results
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=60)
        shutil.rmtree(work, ignore_errors=True)


def report(results: dict[str, list[float]]) -> str:
    """Medians, ranges, seconds added and ratios to plain."""
    lines = ["| config | job seconds (median) | min-max | added | ratio to plain |", "|---|---|---|---|---|"]
    for config, med, low, high, added, ratio in against_plain(results):
        shown = "" if added is None else f"{added:+.2f} s"
        lines.append(f"| {config} | {med:.2f} | {low:.2f}-{high:.2f} | {shown} | {ratio:.2f}x |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch-python", type=Path, required=True, help="a scratch venv's python with torch and boto3")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--samples", type=int, default=48)
    parser.add_argument("--size", type=int, default=1 << 20)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/s3_job.py: run as root (the traced configurations attach probes)")
    if not args.torch_python.exists():
        sys.exit(f"bench/s3_job.py: {args.torch_python} does not exist: make a scratch venv with "
                 "`pip install torch==2.13.0 boto3` and pass its python")
    print(report(run(args)))


if __name__ == "__main__":
    main()
