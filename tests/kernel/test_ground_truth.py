"""Every call and every byte of a DataLoader-like workload, per process, as the workload
itself counted them and as `strace -f` saw them: spawned and forked workers, a thread pool,
children that live under 10 ms."""

from __future__ import annotations

import collections
import json
import re
import shutil
import subprocess
import sys

import polars as pl
import pytest

from ioobserve.data import schema as s
from ioobserve.trace.read.reader import load, own_records
from tests.kernel.kernel_side import ran
from tests.kernel.loader_counts import ARGS, LOADER, OPS, expected_counts, trace_counts
from tests.kernel.recorder import json_line, record_command


def _directory_listings(frame: pl.DataFrame, pid: int, directory: str) -> int:
    """os.listdir calls: each opens the directory, reads it with getdents64, closes it."""
    opened = frame.filter((pl.col(s.PID) == pid) & (pl.col(s.OP) == "openat") & (pl.col(s.PATH) == directory))
    listed = frame.filter((pl.col(s.PID) == pid) & (pl.col(s.OP) == "getdents64") & (pl.col(s.PATH) == directory))
    # each listing of this small directory: one getdents64 returning every entry, one returning 0
    assert listed.height == 2 * opened.height, (listed.height, opened.height)
    return opened.height


def _record_loader(side, start: str) -> dict:
    """The loader recorded system-wide, its dataset in the scratch directory."""
    work = side.scratch / "work"
    work.mkdir()
    return ran(record_command(side.out / "trace", [sys.executable, LOADER, "--dir", str(work), "--start", start, *ARGS]))


@pytest.mark.matrix  # also run in each guest of the kernel matrix
@pytest.mark.kernel
@pytest.mark.parametrize("start", ["spawn", "fork"])
def test_every_process_call_and_byte_matches_the_workload(root_required, kernel_side, start):
    recorded = kernel_side(_record_loader, start, share=True)
    result, traces = recorded.done(), recorded.traces()
    assert result.returncode == 0, result.stderr
    report = json_line(result.stdout, "EXPECTED")
    frame = load(traces)
    expected = report["EXPECTED"]
    assert len(expected) == 1 + 4 + 3  # main, workers, short-lived children
    for pid, entry in expected.items():
        got = trace_counts(frame, int(pid))
        assert got == expected_counts(entry), f"pid {pid} ({start})"
        assert _directory_listings(frame, int(pid), report["dir"]) == entry["counts"]["getdents64_dirs"]
        ppids = frame.filter(pl.col(s.PID) == int(pid)).get_column(s.PPID).unique().to_list()
        assert ppids == [entry["ppid"]], f"pid {pid} attributed to {ppids}, not its parent"
    main = int(next(pid for pid, e in expected.items() if e["counts"]["write"]))
    tids = frame.filter((pl.col(s.PID) == main) & (pl.col(s.OP) == "read") & pl.col(s.PATH).cast(pl.String).str.contains("/sample-"))
    thread_ids = set(tids.get_column(s.TID).to_list())
    assert len(thread_ids) == 2 and main not in thread_ids, "reader threads carry their own thread ids"
    (end,) = own_records(traces[0], "end")
    assert end["args"]["lost_total"] == 0


def _strace_counts(log: str, data_dir: str) -> list[dict]:
    """Per-thread counts of calls on the data files in an `strace -f -y` log."""
    counts: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    for line in log.splitlines():
        match = re.match(r"^(\d+)\s+(\w+)\((.*)", line)
        if not match:
            continue  # "<... resumed>" halves: the call was counted where it started
        tid, op, args = int(match.group(1)), match.group(2), match.group(3)
        target = args.split(", ")[1 if op in ("openat", "newfstatat") else 0]  # dirfd first for *at
        if f"{data_dir}/sample-" in target:
            counts[tid][op] += 1
    return sorted((dict(c) for c in counts.values()), key=lambda d: sorted(d.items()))


@pytest.mark.kernel
@pytest.mark.parametrize("start", ["spawn", "fork"])
def test_counts_agree_with_strace(root_required, kernel_side, tmp_path, start):
    if shutil.which("strace") is None:
        pytest.fail("strace is missing: make setup installs it")
    recorded = kernel_side(_record_loader, start, share=True)  # the recording the test above checked
    result, traces = recorded.done(), recorded.traces()
    report = json_line(result.stdout, "EXPECTED")
    frame = load(traces)
    # strace -f labels lines by thread, so compare per thread.
    ours = []
    for pid in report["EXPECTED"]:
        mine = frame.filter((pl.col(s.PID) == int(pid)) & pl.col(s.PATH).cast(pl.String).str.contains("/sample-"))
        for tid in mine.get_column(s.TID).unique().to_list():
            per_thread = mine.filter(pl.col(s.TID) == tid)
            ours.append({op: n for op in OPS if op != "unlink" and (n := per_thread.filter(pl.col(s.OP) == op).height)})
    work = tmp_path / "work"
    work.mkdir()
    log = tmp_path / "strace.log"
    traced = subprocess.run(
        ["strace", "-f", "-qq", "-y", "-s", "256", "-o", str(log), "-e", "trace=" + ",".join(OPS),
         sys.executable, LOADER, "--dir", str(work), "--start", start, *ARGS],
        capture_output=True, text=True, timeout=600,
    )
    assert traced.returncode == 0, traced.stderr
    theirs = _strace_counts(log.read_text(), str(work / "data"))
    theirs = [{op: n for op, n in c.items() if op != "unlink"} for c in theirs]
    ours = sorted(ours, key=lambda d: sorted(d.items()))
    assert ours == theirs, json.dumps([ours, theirs])
