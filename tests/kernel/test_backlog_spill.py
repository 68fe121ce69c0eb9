"""A burst the recorder is behind on waits in the capture process's spill file beyond
--backlog-memory-mb, and reaches the trace whole and in order: the workload stops the
recorder's own process (SIGSTOP) while it issues its calls, so the capture process must hold
them all, then lets it go on once the spill file holds them."""

from __future__ import annotations

import sys

import polars as pl
import pytest

from ioobserve.collect.backlog import spill_directory
from ioobserve.data import schema as s
from ioobserve.trace.read.reader import load, own_records
from tests.kernel.recorder import record_command

CALLS = 100_000  # 12.8 MB of ring records: far beyond a 1 MB memory part and the 1 MB pipe
# Stops the recorder (its parent), issues N preads, waits until the capture process's
# unlinked spill file holds bytes, lets the recorder go on, and prints N.
WORKLOAD = """
import os, signal, sys, time
n, path = int(sys.argv[1]), sys.argv[2]
recorder = os.getppid()
capture = next(int(child) for task in os.listdir(f"/proc/{recorder}/task")
               for child in open(f"/proc/{recorder}/task/{task}/children").read().split()
               if open(f"/proc/{child}/comm").read().strip() == "ioo-capture")

def spilled():
    sizes = [0]
    for fd in os.listdir(f"/proc/{capture}/fd"):
        link = f"/proc/{capture}/fd/{fd}"
        try:
            if os.readlink(link).endswith("(deleted)"):
                sizes.append(os.stat(link).st_size)
        except OSError:
            pass
    return max(sizes)

with open(path, "wb") as out:
    out.write(b"x" * 4096)
fd = os.open(path, os.O_RDONLY)
os.kill(recorder, signal.SIGSTOP)
try:
    for i in range(n):
        os.pread(fd, 64, (i * 64) % 4096)
    deadline = time.monotonic() + 120
    while not spilled():
        assert time.monotonic() < deadline, "the capture process never spilled"
        time.sleep(0.05)
finally:
    os.kill(recorder, signal.SIGCONT)
os.close(fd)
print(n, flush=True)
"""


@pytest.mark.kernel
def test_a_burst_beyond_the_memory_part_is_spilled_and_recorded_whole(root_required, tmp_path):
    out = tmp_path / "traces"
    out.mkdir()
    assert spill_directory([str(out), "/var/tmp"]), "a local disk for the spill file"
    data = tmp_path / "data.bin"
    done = record_command(out, [sys.executable, "-c", WORKLOAD, str(CALLS), str(data)], "--backlog-memory-mb", "1")
    assert done.returncode == 0 and done.stdout.splitlines()[0] == str(CALLS), done.stderr
    traces = sorted(out.glob("*.pfw.gz"))
    preads = load(traces).filter((pl.col(s.OP) == "pread64") & (pl.col(s.PATH) == str(data)))
    (end,) = own_records(traces[-1], "end")
    assert preads.height == CALLS and end["args"]["lost_total"] == 0
    assert preads.get_column(s.TS).is_sorted()
    spilled = end["args"]["counters"]["capture_spilled_peak_bytes"]
    assert spilled > 4 << 20, f"the spill file held {spilled} bytes at most"
    assert "a burst waited in the spill file" in " ".join(done.stdout.split()), done.stdout  # the summary says so (wrapped)
