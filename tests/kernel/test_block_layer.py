"""The block and page-cache layers: a read served from the page cache misses nothing and
reaches no disk; the same read after dropping the caches shows cache misses and block
requests, each linked to the read syscall that caused it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from ioobserve.data import events as ev
from ioobserve.data import schema as s
from ioobserve.probes.kernel.features import first_tracepoint
from ioobserve.trace.read.reader import load
from tests.conftest import ROOT
from tests.kernel.kernel_side import ran
from tests.kernel.recorder import record_command

pytestmark = pytest.mark.matrix  # also run in each guest of the kernel matrix

WORKLOAD = ROOT / "tests" / "workloads" / "cold_read.py"
HOLDER = ROOT / "tests" / "workloads" / "hold_in_cache.py"
SIZE = 4 << 20


def _record_reads(side) -> dict:
    """A file on a block-device file system (/tmp may be tmpfs here), its blocks written out,
    read three times: to warm the caches, warm, and cold after dropping them."""
    data = Path("/var/tmp") / f"ioobserve-block-{os.getpid()}-{side.scratch.name}.bin"
    data.write_bytes(os.urandom(SIZE))
    os.sync()
    facts = {"data": str(data), "readahead_tracepoints": bool(first_tracepoint("readahead/page_cache_sync_ra"))}
    try:
        # the file and the interpreter's own into the cache first (no recorder needed for that)
        facts["warm-up"] = ran(subprocess.run([sys.executable, str(WORKLOAD), str(data)], capture_output=True, text=True))
        # locked in the cache while the warm pass runs: on a busy machine memory pressure
        # evicted half the file between the warm-up and that pass once
        with subprocess.Popen([sys.executable, str(HOLDER), str(data)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as holder:
            assert holder.stdout.readline() == "held\n", "the file could not be locked in the page cache"
            facts["warm"] = ran(record_command(side.out / "warm", [sys.executable, str(WORKLOAD), str(data)]))
            holder.stdin.close()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        facts["cold"] = ran(record_command(side.out / "cold", [sys.executable, str(WORKLOAD), str(data)]))
    finally:
        data.unlink()
    return facts


def _read(recorded, name: str) -> tuple[dict, pl.DataFrame]:
    done = recorded.done(name)
    assert done.returncode == 0, done.stderr
    report = json.loads(next(line for line in done.stdout.splitlines() if line.startswith('{"pid"')))
    return report, load(recorded.traces(name)).filter(pl.col(s.PID) == report["pid"])


def _file_reads_and_their_requests(frame: pl.DataFrame, data: Path) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """The workload's read syscalls on `data`, and the block requests and cache misses inside them."""
    reads = frame.filter((pl.col(s.LAYER) == s.LAYER_SYSCALL) & (pl.col(s.OP) == "read") & (pl.col(s.PATH) == str(data)))
    parents = reads.select(s.TID, pl.col(s.TS).alias(s.PARENT_TS))
    block = frame.filter(pl.col(s.LAYER) == s.LAYER_BLOCK).join(parents, on=[s.TID, s.PARENT_TS], how="semi")
    misses = frame.filter((pl.col(s.LAYER) == s.LAYER_CACHE) & (pl.col(s.OP) == "cache_miss"))
    return reads, block, misses.join(parents, on=[s.TID, s.PARENT_TS], how="semi")


@pytest.mark.kernel
def test_cold_reads_reach_the_disk_linked_to_their_syscalls(root_required, kernel_side):
    recorded = kernel_side(_record_reads)
    data_on_disk = Path(recorded["data"])
    warm_up = recorded.done("warm-up")
    assert warm_up.returncode == 0, warm_up.stderr
    report, warm = _read(recorded, "warm")
    reads, inside, misses = _file_reads_and_their_requests(warm, data_on_disk)
    assert report["bytes"] == SIZE and reads.height == report["reads"]
    assert inside.height == 0, f"a cached read reached the disk: {inside.select(s.OP, s.BYTES).rows()}"
    assert misses.height == 0, f"a cached read missed the cache: {misses.select(s.OFFSET, s.BYTES).rows()}"
    assert warm.filter((pl.col(s.LAYER) == s.LAYER_CACHE) & (pl.col(s.PATH) == str(data_on_disk))).height == 0

    report, cold = _read(recorded, "cold")
    reads, inside, misses = _file_reads_and_their_requests(cold, data_on_disk)
    assert reads.height == report["reads"]
    # The page cache: the missed pages of the file, named by it, inside its reads, with readahead.
    # Each page of the file enters the cache once (in folios and readahead windows whose sizes
    # the kernel picks: how many events, and how many readaheads, it alone knows).
    assert set(misses.get_column(s.PATH).to_list()) == {str(data_on_disk)}
    assert misses.get_column(s.BYTES).sum() == SIZE
    readaheads = cold.filter((pl.col(s.OP) == "readahead") & (pl.col(s.PATH) == str(data_on_disk))).height
    # the readahead tracepoints are newer than the page cache's (Debian's 6.1 has none)
    assert readaheads >= 1 if recorded["readahead_tracepoints"] else readaheads == 0
    assert set(inside.get_column(s.OP).unique().to_list()) == {"block_read"}
    # Every byte of the file came from the disk inside one of the workload's read calls, each
    # request issued while its read was in flight, and none marked asynchronous (a file written
    # at once needs no extent block read: its extents fit in the inode).
    assert inside.get_column(s.BYTES).sum() == SIZE
    assert inside.filter((pl.col(s.FLAGS) & ev.F_ASYNC) != 0).height == 0
    for row in inside.iter_rows(named=True):
        parent = reads.filter((pl.col(s.TID) == row[s.TID]) & (pl.col(s.TS) == row[s.PARENT_TS])).row(0, named=True)
        assert parent[s.TS] <= row[s.TS] <= parent[s.TS] + parent[s.DUR]

