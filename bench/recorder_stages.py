"""The recorder's user-side stages one by one, in this process, on one event batch: CPU per
event of each (all threads of the process, Polars' pool included), at a large and a small batch,
so that each stage's fixed cost per batch shows too.

The batch is a flood's (bench/flood.c: pread of one file by two processes, no paths named,
no Python stacks) made as the kernel would write it; `--events` sets the large size. The
stages are the real code: the capture process's message (encode) and the reader's (decode),
the columns out of the ring's records, the enrichment (the id batch: file ids, spans, the
tables naming the ids), the summary (names in its groups), the writer's metadata and id columns (describe), the JSON lines, deflate.

  .venv/bin/python bench/recorder_stages.py [--events 65536] [--small 8192]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import polars as pl

import harness  # noqa: F401  (first: it puts this checkout's ioobserve on sys.path)
from ioobserve.collect.capture import decode, encode, ring_dtype
from ioobserve.collect.context_tables import ContextTables
from ioobserve.collect.enrich import _RAW_COLUMNS, Enricher
from ioobserve.context.files import FileTable
from ioobserve.context.processes import ProcessTable
from ioobserve.data import events as ev
from ioobserve.data import schema as s
from ioobserve.data.decode import columns_of
from ioobserve.data.model import Process
from ioobserve.sinks.summary import SummarySink
from ioobserve.trace.lines import event_lines
from ioobserve.trace.members import GZIP_LEVEL, HURRIED_LEVEL, gzip_member
from ioobserve.trace.write.format_thread import PartDescriptions

DEV, INO, PIDS = (8 << 20) | 1, 1234, (1000, 1001)


def flood_batch(events: int) -> np.ndarray:
    """Events as the kernel writes them for two processes' pread(64 B) loops."""
    batch = np.zeros(events, dtype=ev.EVENT)
    rng = np.random.default_rng(1)
    batch["ts_ns"] = time.monotonic_ns() + np.arange(events) * 1000 + rng.integers(0, 999, events)
    batch["dur_ns"] = 600 + rng.integers(0, 500, events)
    batch["ret"] = batch["bytes_req"] = 64
    batch["ino"], batch["dev"], batch["cgroup_id"], batch["fd"] = INO, DEV, 5, 3
    batch["pid"] = batch["tid"] = np.array(PIDS)[np.arange(events) % 2]
    batch["op"], batch["flags"], batch["comm"] = ev.OP_CODES["pread64"], ev.F_FILE, b"flood"
    return batch


def cpu_ns_per_event(work, events: int, seconds: float = 1.0) -> float:
    """Process CPU per event of `work`, repeated for about `seconds` after a warm-up run."""
    work()
    runs, started, cpu = 0, time.monotonic(), time.process_time()
    while time.monotonic() - started < seconds or runs < 3:
        work()
        runs += 1
    return (time.process_time() - cpu) / runs / events * 1e9


def stages(events: int) -> dict[str, float]:
    """Each stage's CPU ns per event at this batch size."""
    batch = flood_batch(events)
    files, processes = FileTable(), ProcessTable()
    files.by_id[(DEV, INO)] = "/var/tmp/flood.dat"
    files._pending.append((DEV, INO, "/var/tmp/flood.dat"))
    for pid in PIDS:
        processes.by_pid[pid] = Process(pid, 1, "flood")
    enricher = Enricher(ContextTables(files=files, processes=processes), 0)
    frame, tables = enricher.frame(batch)
    ids = frame.select(list(s.ID_SCHEMA))
    descriptions = PartDescriptions(1, "0" * 16)
    for pid in PIDS:
        descriptions.process_line(pid, 0, 0)  # as writer.processes would: the PR line's uid and cgroup
    described, _ = descriptions.describe(ids, tables)
    prefix = descriptions.file_prefix
    text = b"".join(group.text for group in event_lines(described, "us", prefix).values())
    in_ring = np.zeros(len(batch), ring_dtype(ev.EVENT))  # the records as the ring holds them
    for name in ev.EVENT.names:
        in_ring[name] = batch[name]
    raw = in_ring.tobytes()
    result = {
        "capture message (encode + decode)": lambda: decode(*encode(raw, b"")[1:]),
        "columns from the ring's records": lambda: columns_of(batch, _RAW_COLUMNS),
        "enrichment (ids, file ids, spans, tables)": lambda: enricher.frame(batch),
        "summary": lambda: SummarySink().events(frame, tables),
        "writer: metadata and id columns": lambda: descriptions.describe(ids, tables),
        "JSON lines": lambda: event_lines(described, "us", prefix),
        f"deflate, libdeflate level {GZIP_LEVEL}": lambda: gzip_member(text),
        f"deflate hurried, ISA-L level {HURRIED_LEVEL}": lambda: gzip_member(text, hurried=True),
    }
    out = {name: cpu_ns_per_event(work, events) for name, work in result.items()}
    out["line bytes"] = len(text) / events
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1 << 16)
    parser.add_argument("--small", type=int, default=1 << 13)
    args = parser.parse_args()
    large, small = stages(args.events), stages(args.small)
    print(f"| stage | CPU ns/event, batch of {args.events:,} | batch of {args.small:,} |")
    print("|---|---|---|")
    for name in large:
        if name != "line bytes":
            print(f"| {name} | {large[name]:.0f} | {small[name]:.0f} |")
    print(f"\nline: {large['line bytes']:.0f} bytes; Polars threads: {pl.thread_pool_size()}")


if __name__ == "__main__":
    main()
