"""A training job's data in and out: a preparing process writes SHARDS dataset shards, a
trainer reads two shards a step (in load_shard), writes a checkpoint after each step (in
save_checkpoint) and, at the end, creates an empty marker beside them (in mark_done: opened
for writing, nothing written), and a resuming process reads the last checkpoint back (in
load_checkpoint).
Each process runs this file with its role. The parent prints one JSON line with what each
did: {"LINEAGE": {"prepare": {...}, "train": {...}, "resume": {...}}}, each {"pid", "read":
{path: bytes}, "written": {path: bytes}, "before": {checkpoint: [shards read before it]}}.

Usage: checkpoint_workload.py DIR
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

SHARDS, STEPS, SHARD_BYTES, CHECKPOINT_BYTES = 6, 3, 96 * 1024, 40 * 1024


def _report(read: dict, written: dict, before: dict | None = None) -> None:
    print(json.dumps({"pid": os.getpid(), "read": read, "written": written, "before": before or {}}), flush=True)


def _write(path: str, size: int) -> None:
    with open(path, "wb") as handle:
        handle.write(os.urandom(size))


def load_shard(path: str) -> int:
    """A shard read whole."""
    with open(path, "rb") as handle:
        return len(handle.read())


def save_checkpoint(path: str) -> None:
    """A checkpoint written whole (here: the innermost function of its write)."""
    with open(path, "wb") as handle:
        handle.write(os.urandom(CHECKPOINT_BYTES))


def mark_done(path: str) -> None:
    """An empty file made (truncated for writing): generated, with no byte written."""
    with open(path, "wb"):
        pass


def load_checkpoint(path: str) -> int:
    """A checkpoint read back whole."""
    with open(path, "rb") as handle:
        return len(handle.read())


def main() -> None:
    directory, role = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "parent"
    shards = [os.path.join(directory, "data", f"shard-{i}.bin") for i in range(SHARDS)]
    checkpoints = [os.path.join(directory, "ckpt", f"step-{step}.pt") for step in range(1, STEPS + 1)]
    if role == "prepare":
        os.makedirs(os.path.dirname(shards[0]), exist_ok=True)
        for path in shards:
            _write(path, SHARD_BYTES)
        _report({}, dict.fromkeys(shards, SHARD_BYTES))
    elif role == "train":
        os.makedirs(os.path.dirname(checkpoints[0]), exist_ok=True)
        read, before = {}, {}
        for step, checkpoint in enumerate(checkpoints):
            for path in shards[2 * step: 2 * step + 2]:
                read[path] = load_shard(path)
            save_checkpoint(checkpoint)
            before[checkpoint] = sorted(read)
        marker = os.path.join(directory, "ckpt", "DONE")
        mark_done(marker)
        before[marker] = sorted(read)
        _report(read, {**dict.fromkeys(checkpoints, CHECKPOINT_BYTES), marker: 0}, before)
    elif role == "resume":
        _report({checkpoints[-1]: load_checkpoint(checkpoints[-1])}, {})
    else:
        reports = {}
        for each in ("prepare", "train", "resume"):
            done = subprocess.run([sys.executable, __file__, directory, each], capture_output=True, text=True, check=True)
            reports[each] = json.loads(done.stdout)
        print(json.dumps({"LINEAGE": reports}), flush=True)


if __name__ == "__main__":
    main()
