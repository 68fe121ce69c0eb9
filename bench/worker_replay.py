"""The recorder's user side on a real job, replayed without the kernel: the messages a
recording's capture stream carried (`bench/stack_replay.py capture`) go through the real
collector's worker (decoding, enrichment, Python stacks) into the real sinks (`record`'s
trace writer and summary), merged into batches as the worker merges them. CPU per event of
the whole process (every thread: worker, writer, format, disk, Polars' pool) and by thread,
best of `--rounds`: what the job's recording costs beside the drain, repeatable to the
percent, to profile with perf.

  .venv/bin/python bench/worker_replay.py /var/tmp/torch.stream [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from stack_replay import merged  # noqa: E402  (run as a script from the checkout)

from ioobserve import events as ev  # noqa: E402
from ioobserve.collect.collector import Collector  # noqa: E402
from ioobserve.collect.ringbuf import ring_dtype  # noqa: E402
from ioobserve.decode import decode_aux  # noqa: E402
from ioobserve.summary import SummarySink  # noqa: E402
from ioobserve.trace.writer import TraceWriter  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


class _NoRings:
    """What the collector asks of the probes before it starts draining: nothing is drained here."""

    class tables:  # noqa: N801 - the probes' attribute
        @staticmethod
        def ring(name: str) -> tuple[int, int]:
            return -1, 0


def _threads() -> dict[str, float]:
    """CPU seconds of each of this process's threads, by name."""
    found: dict[str, float] = defaultdict(float)
    for task in os.listdir("/proc/self/task"):
        try:
            stat = Path(f"/proc/self/task/{task}/stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()
        found["polars pool" if name.startswith("polars") else name] += (int(fields[11]) + int(fields[12])) / TICK
    return found


def replay_once(batches: list, out: Path) -> tuple[float, int, dict[str, float]]:
    """One replay into a new trace under `out`: process CPU seconds, events, CPU by thread."""
    writer = TraceWriter(out, f"replay-{time.monotonic_ns()}", {"host": "replay"})
    collector = Collector(_NoRings(), [writer, SummarySink()])
    before, threads_before = time.process_time(), _threads()
    for events, aux in batches:
        collector._process(events, decode_aux(aux))  # noqa: SLF001 - the worker's own step
    collector.enricher.end_spans()
    for sink in collector.sinks:
        sink.close()
    spent = time.process_time() - before
    threads = {name: cpu - threads_before.get(name, 0.0) for name, cpu in _threads().items()}
    return spent, sum(len(events) for events, _ in batches), threads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stream", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with args.stream.open("rb") as file:
        batches = merged(pickle.load(file), ring_dtype(ev.EVENT))
    best = None
    with tempfile.TemporaryDirectory() as out:
        for _ in range(args.rounds):
            result = replay_once(batches, Path(out))
            if best is None or result[0] < best[0]:
                best = result
    spent, events, threads = best
    print(json.dumps({"batches": len(batches), "events": events, "cpu_s": round(spent, 3),
                      "us_per_event": round(spent / events * 1e6, 3), "active_threads": threading.active_count(),
                      "by_thread_s": {name: round(cpu, 3) for name, cpu in sorted(threads.items(), key=lambda i: -i[1]) if cpu > 0.004}}))


if __name__ == "__main__":
    main()
