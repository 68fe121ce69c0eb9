"""The Python layer's user-side cost on a real job, replayed: what the reader and the worker
spend on the auxiliary records (decoding them) and on the Python stacks (numbering frames,
reading line tables, keying stacks), per record and per chain, with nothing else running.

`capture` records a command with `ioobserve record` in this process and keeps every message
of the capture stream (the events and the auxiliary records, as the kernel sent them) in a
file; `replay` runs the reader's and the worker's stack stages on those messages, batch by
batch as the recording did, and prints CPU per record and per distinct chain.

  sudo .venv/bin/python bench/stack_replay.py capture /var/tmp/torch.stream -- \
      /var/tmp/torchvenv/bin/python bench/workloads/torch_loader.py --dir /var/tmp/tsamples
  .venv/bin/python bench/stack_replay.py replay /var/tmp/torch.stream [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ioobserve import _core  # noqa: E402  (run as a script from the checkout)
from ioobserve.collect import capture  # noqa: E402
from ioobserve.decode import decode_aux  # noqa: E402
from ioobserve.python.stacks import PythonStacks  # noqa: E402


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

    from ioobserve.collect.collector import COALESCE_S, MERGED_EVENTS

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


def replay(stream: Path, rounds: int) -> None:
    """CPU of decoding the auxiliary records and of the stacks' stages, best of `rounds`."""
    import numpy as np

    from ioobserve import events as ev
    from ioobserve.collect.ringbuf import ring_dtype

    with stream.open("rb") as file:
        messages = merged(pickle.load(file), ring_dtype(ev.EVENT))
    chains_per_message = [pl.Series("py_chain", events["py_chain"]) for events, _ in messages]
    best: dict[str, float] = {}
    for _ in range(rounds):
        started = time.process_time()
        decoded = [decode_aux(aux) for _, aux in messages]
        decode_s = time.process_time() - started
        stacks = PythonStacks()
        started = time.process_time()
        distinct = 0
        for records, chains in zip(decoded, chains_per_message, strict=True):
            stacks.add(records.python)
            if chains.max():
                resolved = stacks.frame(chains)
                distinct += resolved.height
                stacks.levels(resolved.get_column("py_stack"))
                stacks.take_new()
        stacks_s = time.process_time() - started
        for name, value in (("decode_s", decode_s), ("stacks_s", stacks_s)):
            best[name] = min(best.get(name, value), value)
    records = sum(len(_core.aux_split(aux)[0]) for _, aux in messages)
    python = sum(len(d.python) for d in decoded)
    print(json.dumps({
        "batches": len(messages), "aux_records_but_stacks": records, "python_blobs": python,
        "distinct_chains_asked": distinct, "unknown_chains": stacks.unknown_chains,

        "stacks_us_per_chain_asked": round(best["stacks_s"] / max(distinct, 1) * 1e6, 3),
        "decode_s": round(best["decode_s"], 3), "stacks_s": round(best["stacks_s"], 3),
    }))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="what", required=True)
    taking = commands.add_parser("capture")
    taking.add_argument("stream", type=Path)
    taking.add_argument("command", nargs=argparse.REMAINDER)
    playing = commands.add_parser("replay")
    playing.add_argument("stream", type=Path)
    playing.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.what == "capture":
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        capture_stream(args.stream, command)
    else:
        replay(args.stream, args.rounds)


if __name__ == "__main__":
    main()
