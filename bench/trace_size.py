"""Bytes per event on disk: ioobserve against DFTracer on the same job.

--job loader (tests/workloads/loader.py, DataLoader-like): both see the workload's own files
only, DFTracer through DFTRACER_DATA_DIR, ioobserve through --path-prefix. --job torch (the
reference job, bench/workloads/torch_loader.py: a real PyTorch DataLoader, 4 spawned workers
importing torch, 2 epochs): both see every file the job touches (DFTRACER_DATA_DIR=all, no
--path-prefix), and `record`'s tail after the job's end is measured too.
Events are I/O records and spans (ph=1, not DFTracer's or our own bookkeeping); bytes are
everything written (DFTracer: all its per-process files; ioobserve: the trace, and separately
its .ioidx index).

Usage (root): python bench/trace_size.py --dftracer-venv .venv-peers [--files 2000 --workers 4 --epochs 2]
              python bench/trace_size.py --dftracer-venv .venv-peers --job torch --torch-python VENV/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

from harness import BENCH, IOOBSERVE, ROOT, dftracer_preload

LOADER = ROOT / "tests" / "workloads" / "loader.py"
TORCH_LOADER = BENCH / "workloads" / "torch_loader.py"


def events_in(path: Path) -> int:
    """I/O event lines in a gzip file, reading every intact member (DFTracer's can be truncated)."""
    data, count = path.read_bytes(), 0
    while data:
        member = zlib.decompressobj(31)
        try:
            text = member.decompress(data)
        except zlib.error:
            break
        for line in text.splitlines():
            if b'"ph":1' in line and b'"cat":"dftracer"' not in line:
                count += 1
        if not member.eof:
            break
        data = member.unused_data
    return count


def workload(work: Path, args) -> list[str]:
    if args.job == "torch":
        return [str(args.torch_python), str(TORCH_LOADER), "--dir", str(work / "samples"), "--workers", str(args.workers),
                "--epochs", str(args.epochs)]
    return ["/usr/bin/python3", str(LOADER), "--dir", str(work), "--files", str(args.files), "--size", str(args.size),
            "--workers", str(args.workers), "--epochs", str(args.epochs), "--threads", "2", "--outputs", "--report", "json"]


def _exit_lag(stdout: str, returned: float) -> float | None:
    """Seconds from the job's last line (its "ended_at") to `returned`."""
    ended = [json.loads(line)["ended_at"] for line in stdout.splitlines() if '"ended_at"' in line]
    return returned - ended[0] if ended else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dftracer-venv", type=Path, required=True)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--size", type=int, default=65536)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--job", choices=["loader", "torch"], default="loader")
    parser.add_argument("--torch-python", type=Path, help="a Python with torch (--job torch)")
    args = parser.parse_args()
    if args.job == "torch" and (args.torch_python is None or not args.torch_python.exists()):
        sys.exit("--job torch needs --torch-python: a venv's python with `pip install torch==2.13.0`")
    if os.geteuid() != 0:
        sys.exit("bench/trace_size.py: run as root (ioobserve record attaches probes)")
    preload = dftracer_preload(args.dftracer_venv)
    if preload is None:
        sys.exit(f"no libdftracer_preload.so in {args.dftracer_venv}")
    base = Path(tempfile.mkdtemp(prefix="ioobserve-size-"))
    try:
        dft_work, dft_out = base / "dft-work", base / "dft-out"
        dft_work.mkdir()
        dft_out.mkdir()
        env = dict(os.environ, DFTRACER_ENABLE="1", DFTRACER_INIT="PRELOAD", DFTRACER_INC_METADATA="1",
                   DFTRACER_DATA_DIR="all" if args.job == "torch" else str(dft_work), DFTRACER_LOG_FILE=str(dft_out / "trace"), LD_PRELOAD=str(preload))
        subprocess.run(workload(dft_work, args), env=env, check=True, capture_output=True)
        dft_files = sorted(dft_out.glob("*.pfw.gz"))
        dft_bytes = sum(f.stat().st_size for f in dft_files)
        dft_events = sum(events_in(f) for f in dft_files)

        # The job alone: how long its process takes to exit after its last line (torch's own
        # teardown), which record's tail below includes.
        plain_work = base / "plain-work"
        plain_work.mkdir()
        plain = subprocess.run(workload(plain_work, args), check=True, capture_output=True, text=True)
        plain_exit_lag = _exit_lag(plain.stdout, time.time())

        io_work, io_out = base / "io-work", base / "io-out"
        io_work.mkdir()
        io_out.mkdir(mode=0o700)
        scope = [] if args.job == "torch" else ["--path-prefix", str(io_work)]
        done = subprocess.run([str(IOOBSERVE), "record", "-o", str(io_out), *scope, "--", *workload(io_work, args)],
                              check=True, capture_output=True, text=True)
        tail = _exit_lag(done.stdout, time.time())
        traces = sorted(io_out.glob("*.pfw.gz"))
        written_bytes = sum(f.stat().st_size for f in traces)  # as the recorder wrote them (its finisher starts now)
        deadline = time.monotonic() + 600
        while list(io_out.glob("*.finishing")) and time.monotonic() < deadline:  # recompressed and copied in the background
            time.sleep(0.1)
        io_bytes = sum(f.stat().st_size for f in traces)
        index_bytes = sum(f.stat().st_size for f in io_out.glob("*.ioidx"))
        copy_bytes = sum(f.stat().st_size for f in io_out.glob("*.parquet"))
        io_events = sum(events_in(f) for f in traces)

        dft_per, io_per = dft_bytes / dft_events, io_bytes / io_events
        print(f"DFTracer : {dft_events:8,} events {dft_bytes:10,} B in {len(dft_files)} files = {dft_per:5.2f} B/event")
        print(f"ioobserve: {io_events:8,} events {io_bytes:10,} B (+{index_bytes:,} B index) = {io_per:5.2f} B/event"
              f" ({(io_bytes + index_bytes) / io_events:5.2f} with the index)")
        print(f"ratio ioobserve/DFTracer: {io_per / dft_per:.2f}x")
        print(f"  as written before the background recompression: {written_bytes / io_events:5.2f} B/event"
              f" ({written_bytes / io_events / dft_per:.2f}x); the Parquet copy: {copy_bytes / io_events:5.2f} B/event")
        result = {"job": args.job, "dftracer_b_per_event": dft_per, "ioobserve_b_per_event": io_per,
                  "written_b_per_event": written_bytes / io_events, "copy_b_per_event": copy_bytes / io_events}
        if tail is not None and plain_exit_lag is not None:
            result["record_tail_s"], result["plain_exit_lag_s"] = round(tail, 2), round(plain_exit_lag, 2)
            print(f"record returned {tail:.2f} s after the job's last line; the job alone exits "
                  f"{plain_exit_lag:.2f} s after it: {tail - plain_exit_lag:.2f} s after the command's own end")
        print(json.dumps(result))
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
