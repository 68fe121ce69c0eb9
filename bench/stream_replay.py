"""The recorder's user side on a real job, replayed without the kernel, to the percent and
under perf.

`capture` records a command with `ioobserve record` in this process and keeps every message
of the capture stream (the events and the auxiliary records, as the kernel sent them) in a
file. On those messages, merged into batches as the worker merges them:
`stacks` runs the reader's decoding and the Python stacks' stages alone (CPU per distinct
chain); `worker` runs the real collector's worker (decoding, enrichment, stacks) into the
real sinks (`record`'s trace writer and summary): CPU per event of the whole process, every
thread (writer, format, Polars' pool) included, and by thread. `all` captures the bundled
loader (or, with --torch-python, the PyTorch job of workloads/torch_loader.py) into a
scratch file and runs both (what bench/run_all.py runs).

  sudo .venv/bin/python bench/stream_replay.py capture /var/tmp/torch.stream -- \
      /var/tmp/torchvenv/bin/python bench/workloads/torch_loader.py --dir /var/tmp/tsamples
  OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/stream_replay.py worker /var/tmp/torch.stream [--rounds 3]
  .venv/bin/python bench/stream_replay.py stacks /var/tmp/torch.stream [--rounds 3]
  sudo .venv/bin/python bench/stream_replay.py all [--torch-python /var/tmp/torchvenv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import polars as pl

from harness import BENCH, ROOT
from ioobserve.collect import capture
from ioobserve.collect.capture import ring_dtype
from ioobserve.collect.collector import Collector
from ioobserve.data import events as ev
from ioobserve.data.decode import decode_aux
from ioobserve.python.stacks import PythonStacks
from ioobserve.sinks.summary import SummarySink
from ioobserve.trace.write.writer import TraceWriter
from thread_cpu import task_cpu  # a sibling script


def capture_stream(stream: Path, command: list[str]) -> None:
    """Record `command` system-wide, keeping the capture stream's messages in `stream`."""
    from ioobserve.cli.app import app

    original = capture.CaptureProcess.batches
    kept: list[tuple[bytes, bytes]] = []

    def teed(self):
        for events, aux in original(self):
            kept.append((events.tobytes(), bytes(aux)))
            yield events, aux

    capture.CaptureProcess.batches = teed
    with tempfile.TemporaryDirectory() as out:
        try:
            app(["record", "-o", str(Path(out) / "t.pfw.gz"), "--", *command], standalone_mode=False)
        finally:
            with stream.open("wb") as file:
                pickle.dump(kept, file)
    print(json.dumps({"messages": len(kept), "aux_bytes": sum(len(aux) for _, aux in kept)}))


def merged(messages: list[tuple[bytes, bytes]], dtype) -> list[tuple[object, bytes]]:
    """The messages as the worker takes them: merged up to MERGED_EVENTS events or COALESCE_S
    seconds of their calls."""
    import numpy as np

    from ioobserve.collect.reader import COALESCE_S, MERGED_EVENTS

    batches: list[tuple[object, bytes]] = []
    events: list[np.ndarray] = []
    aux: list[bytes] = []
    first_ns = None
    for raw, records in messages:
        batch = np.frombuffer(raw, dtype=dtype)
        if batch.size and first_ns is None:
            first_ns = int(batch["ts_ns"].min())
        events.append(batch)
        aux.append(records)
        size = sum(part.size for part in events)
        if size >= MERGED_EVENTS or (batch.size and int(batch["ts_ns"].max()) - first_ns > COALESCE_S * 1e9):
            batches.append((np.concatenate(events), b"".join(aux)))
            events, aux, first_ns = [], [], None
    if events:
        batches.append((np.concatenate(events), b"".join(aux)))
    return batches


def replay_stacks(stream: Path, rounds: int) -> None:
    """CPU of decoding the auxiliary records and of the stacks' stages, best of `rounds`."""
    with stream.open("rb") as file:
        batches = merged(pickle.load(file), ring_dtype(ev.EVENT))
    # The enrichment's py_chain: the chain's id, its shared levels above PY_SAME_SHIFT left out.
    chains_per_batch = [pl.Series("py_chain", events["py_chain"] & ev.PY_CHAIN_MASK) for events, _ in batches]
    best: dict[str, float] = {}
    for _ in range(rounds):
        started = time.process_time()
        decoded = [decode_aux(aux) for _, aux in batches]
        decode_s = time.process_time() - started
        stacks = PythonStacks()
        started = time.process_time()
        distinct = 0
        for records, chains in zip(decoded, chains_per_batch, strict=True):
            stacks.add(records.python)
            if chains.max():
                ids = stacks.ids(chains)
                distinct += chains.filter(chains != 0).n_unique()
                stacks.levels(ids)
                stacks.take_new()
        stacks_s = time.process_time() - started
        for name, value in (("decode_s", decode_s), ("stacks_s", stacks_s)):
            best[name] = min(best.get(name, value), value)
    print(json.dumps({
        "batches": len(batches), "path_arguments": sum(len(names[-1]) for d in decoded for names in d.names),
        "distinct_chains_asked": distinct, "unknown_chains": stacks.unknown_chains,
        "stacks_us_per_chain_asked": round(best["stacks_s"] / max(distinct, 1) * 1e6, 3),
        "decode_s": round(best["decode_s"], 3), "stacks_s": round(best["stacks_s"], 3),
    }))


class _NoRings:
    """What the collector asks of the probes before it starts draining: nothing is drained here."""

    class tables:  # noqa: N801 - the probes' attribute
        @staticmethod
        def ring(name: str) -> tuple[int, int]:
            return -1, 0


def _threads() -> dict[str, float]:
    """CPU seconds of each of this process's threads, by name (Polars' pool as one)."""
    found: dict[str, float] = defaultdict(float)
    for name, cpu in task_cpu("self").values():
        found["polars pool" if name.startswith("polars") else name] += cpu
    return found


def _worker_once(batches: list, out: Path) -> tuple[float, int, dict[str, float]]:
    """One replay into a new trace under `out`: process CPU seconds, events, CPU by thread."""
    writer = TraceWriter(out, f"replay-{time.monotonic_ns()}", {"host": "replay"})
    collector = Collector(_NoRings(), [writer, SummarySink()])
    before, threads_before = time.process_time(), _threads()
    for events, aux in batches:
        collector.worker.process(events, decode_aux(aux))
    collector.enricher.end_spans()
    collector.sinks.close()
    spent = time.process_time() - before
    threads = {name: cpu - threads_before.get(name, 0.0) for name, cpu in _threads().items()}
    return spent, sum(len(events) for events, _ in batches), threads


def replay_worker(stream: Path, rounds: int) -> None:
    """CPU per event of the worker and its sinks on the stream's batches, best of `rounds`."""
    with stream.open("rb") as file:
        batches = merged(pickle.load(file), ring_dtype(ev.EVENT))
    best = None
    with tempfile.TemporaryDirectory() as out:
        for _ in range(rounds):
            result = _worker_once(batches, Path(out))
            if best is None or result[0] < best[0]:
                best = result
    spent, events, threads = best
    print(json.dumps({"batches": len(batches), "events": events, "cpu_s": round(spent, 3),
                      "us_per_event": round(spent / events * 1e6, 3),
                      "by_thread_s": {name: round(cpu, 3) for name, cpu in sorted(threads.items(), key=lambda i: -i[1]) if cpu > 0.004}}))


def run_all(torch_python: Path | None, rounds: int) -> None:
    """Capture the bundled loader (or the PyTorch job) and replay it both ways."""
    with tempfile.TemporaryDirectory() as scratch:
        stream = Path(scratch) / "job.stream"
        if torch_python:
            job = [str(torch_python), str(BENCH / "workloads" / "torch_loader.py"), "--dir", scratch]
        else:
            job = [sys.executable, str(ROOT / "tests" / "workloads" / "loader.py"), "--dir", scratch, "--files", "32",
                   "--workers", "4", "--start", "spawn"]
        capture_stream(stream, job)
        replay_stacks(stream, rounds)
        replay_worker(stream, rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="what", required=True)
    taking = commands.add_parser("capture")
    taking.add_argument("stream", type=Path)
    taking.add_argument("command", nargs=argparse.REMAINDER)
    for name in ("stacks", "worker"):
        playing = commands.add_parser(name)
        playing.add_argument("stream", type=Path)
        playing.add_argument("--rounds", type=int, default=3)
    both = commands.add_parser("all")
    both.add_argument("--torch-python", type=Path)
    both.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.what == "capture":
        capture_stream(args.stream, args.command[1:] if args.command[:1] == ["--"] else args.command)
    elif args.what == "stacks":
        replay_stacks(args.stream, args.rounds)
    elif args.what == "worker":
        replay_worker(args.stream, args.rounds)
    else:
        run_all(args.torch_python, args.rounds)


if __name__ == "__main__":
    main()
