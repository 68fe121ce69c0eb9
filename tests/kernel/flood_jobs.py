"""Two jobs for flood control's tests: one flooding the observer with preadv calls as fast as
Python makes them, one making an exact count of reads meanwhile, and the scratch cgroups of
the command that runs both, each in its Slurm step's cgroup."""

from __future__ import annotations

import os
from pathlib import Path

FLOOD_JOB, EXACT_JOB = "9001", "9002"
STEP = "system.slice/node1_slurmstepd.scope/job_{job}/step_0/user/task_0"
LIMIT = 20_000  # events a second
FLOOD_CALLS = 200_000
# preadv calls as fast as Python makes them, once it has said it starts through a FIFO.
FLOOD = f"""
import os, sys
path, ready = sys.argv[1], sys.argv[2]
with open(path, "wb") as out:
    out.write(b"x" * 4096)
fd = os.open(path, os.O_RDONLY)
buf = bytearray(64)
with open(ready, "w") as fifo:
    fifo.write("go")
for _ in range({FLOOD_CALLS}):
    os.preadv(fd, [buf], 0)
"""
# Waits for the flood to be under way, then makes EXACT_READS reads of its own.
EXACT_READS = 3000
EXACT = f"""
import json, os, sys
ready, path = sys.argv[1], sys.argv[2]
with open(ready) as fifo:
    fifo.read()
with open(path, "wb") as out:
    out.write(b"y" * 4096)
fd = os.open(path, os.O_RDONLY)
for _ in range({EXACT_READS}):
    os.pread(fd, 64, 0)
os.close(fd)
print(json.dumps({{"exact_pid": os.getpid(), "reads": {EXACT_READS}}}), flush=True)
"""


def steps() -> dict[str, str]:
    """Each job's Slurm step cgroup, relative to the scratch cgroups' base."""
    return {job: STEP.format(job=job) for job in (FLOOD_JOB, EXACT_JOB)}


def both_jobs(base: Path, scratch: Path) -> tuple[list[str], Path, Path]:
    """The command running the flood and the exact job side by side (each moved into its
    step's cgroup under `base`), the flood's file and the exact job's file (in `scratch`)."""
    flood_file, exact_file, ready = scratch / "flood.dat", scratch / "exact.dat", scratch / "ready"
    os.mkfifo(ready)
    cgroup = {job: base / step for job, step in steps().items()}
    # Each workload's shell moves itself into its job's cgroup, then execs Python.
    flood = f"echo $$ > {cgroup[FLOOD_JOB]}/cgroup.procs && exec python3 -c \"$0\" {flood_file} {ready}"
    exact = f"echo $$ > {cgroup[EXACT_JOB]}/cgroup.procs && exec python3 -c \"$0\" {ready} {exact_file}"
    script = f"sh -c '{flood}' \"$1\" & sh -c '{exact}' \"$2\"; wait"
    return ["sh", "-c", script, "sh", FLOOD, EXACT], flood_file, exact_file
