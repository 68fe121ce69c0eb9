"""`ioobserve diff` on two real recordings of the DataLoader-like workload, each in its own
directory, the second reading its samples in 4 KiB reads instead of whole: the deltas are the
ones the workload's own counts give, file by file and function by function. Each worker also
writes an output: the lineage shows the shards each worker used and the output it generated."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.kernel.kernel_side import ran
from tests.kernel.loader_counts import LOADER
from tests.kernel.recorder import IOOBSERVE, json_line, record_command

FILES, SIZE, WORKERS = 8, 256 * 1024, 2
CHUNKS = {"baseline": 1 << 20, "variant": 4096}  # whole samples (one read and the one at EOF), then 4 KiB reads
RUNS = tuple(CHUNKS)


def _record_two_runs(side) -> dict:
    """The workload recorded twice, one recorder each, with its samples in a directory of its own."""
    facts = {}
    for name, chunk in CHUNKS.items():
        work = side.scratch / name
        work.mkdir()
        command = [sys.executable, LOADER, "--dir", str(work), "--files", str(FILES), "--size", str(SIZE),
                   "--workers", str(WORKERS), "--threads", "0", "--chunk", str(chunk), "--outputs"]
        facts[name] = ran(record_command(side.out / name, command))
    return facts


def _sample_reads(report: dict) -> int:
    """The read calls the workload made on its samples (the main process reads none of them)."""
    return sum(entry["counts"]["read"] for entry in report["EXPECTED"].values())


def _rows(table: list[dict], key: str) -> dict:
    return {row[key]: row for row in table}


@pytest.mark.kernel
def test_diff_of_two_loader_runs_gives_the_workloads_deltas_and_the_lineage_its_outputs(root_required, kernel_side, tmp_path):
    recorded = kernel_side(_record_two_runs)
    reports = {}
    for name in RUNS:
        done = recorded.done(name)
        assert done.returncode == 0, done.stderr
        reports[name] = json_line(done.stdout, "EXPECTED")
    reads = {name: _sample_reads(reports[name]) for name in RUNS}
    per_file = {name: reads[name] / FILES for name in RUNS}
    assert per_file == {"baseline": 2, "variant": SIZE // 4096 + 1}  # the workload's own count, as the test expects it
    page = tmp_path / "change.html"
    prefixes = [arg for name in RUNS for arg in ("--path-prefix", os.path.join(reports[name]["dir"], "sample-"))]
    done = subprocess.run([IOOBSERVE, "diff", str(recorded.out / "baseline"), str(recorded.out / "variant"),
                           "--files-by", "name", *prefixes, "--json", "--html", str(page)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    figures = {row["figure"]: row for row in result["overview"]}
    assert (figures["read_calls"]["baseline"], figures["read_calls"]["variant"]) == (reads["baseline"], reads["variant"])
    assert figures["bytes_read"]["baseline"] == figures["bytes_read"]["variant"] == FILES * SIZE
    assert figures["bytes_read"]["delta"] == 0
    assert figures["read_calls_per_file_read"]["baseline"] == per_file["baseline"]
    assert figures["read_calls_per_file_read"]["variant"] == per_file["variant"]
    assert figures["read_calls_per_file_read"]["ratio"] == per_file["variant"] / per_file["baseline"]

    read = _rows(result["tables"]["ops"], "op")["read"]
    assert read["calls_delta"] == reads["variant"] - reads["baseline"]
    files = _rows(result["tables"]["files"], "file_key")
    samples = {f"sample-{i:04d}.bin" for i in range(FILES)}
    assert samples <= set(files), sorted(files)  # matched by name across the two directories
    for sample in samples:  # each sample: the same opens, stats and closes, 63 more reads, the same bytes
        row = files[sample]
        assert (row["calls_delta"], row["bytes_read_delta"]) == (per_file["variant"] - per_file["baseline"], 0), row
    latency = _rows([r for r in result["tables"]["latency"] if r["layer"] == "SYSCALL"], "op")["read"]
    assert (latency["calls_baseline"], latency["calls_variant"]) == (reads["baseline"], reads["variant"])
    _check_lineage(recorded)

    functions = [row for row in result["tables"]["functions"] if row["py_function"] == "read_file"]
    assert [(row["py_file"], row["calls_baseline"], row["calls_variant"]) for row in functions] == [
        ("loader.py", reads["baseline"] + 2 * FILES, reads["variant"] + 2 * FILES)]  # its reads, opens and closes

    said = [change["text"] for change in result["changes"]]
    assert f"read calls per file read went from 2 to {per_file['variant']:.0f} (×{per_file['variant'] / 2:.1f})" in said, said
    assert not any(change["name"] == "bytes_read" for change in result["changes"])
    assert os.stat(page).st_mode & 0o777 == 0o600
    html = page.read_text()
    assert "<h1>ioobserve diff</h1>" in html and html.count("<svg") >= 5 and "sample-0000.bin" in html


def _lineage_of(pid: int, rows: list[dict]) -> tuple[dict, dict]:
    """A process's data files read and written, with their bytes, from analyze's lineage rows."""
    mine = [row for row in rows if row["pid"] == pid]
    return ({row["path"]: row["bytes_read"] for row in mine if row["bytes_read"]},
            {row["path"]: row["bytes_written"] for row in mine if row["bytes_written"]})


def _check_lineage(recorded) -> None:
    """The baseline's lineage: each worker used its share of the samples and generated its output."""
    done = recorded.done("baseline")
    report = json_line(done.stdout, "EXPECTED")
    shown = subprocess.run([IOOBSERVE, "analyze", "--json", *map(str, recorded.traces("baseline"))], capture_output=True,
                           text=True, timeout=600)
    assert shown.returncode == 0, shown.stderr
    rows = json.loads(shown.stdout)["lineage"]
    workers = {int(pid): entry for pid, entry in report["EXPECTED"].items() if entry["counts"]["files"]}
    assert len(workers) == WORKERS
    data = report["dir"]  # the samples' directory
    for pid, entry in workers.items():
        used, generated = _lineage_of(pid, rows)
        assert used == entry["counts"]["files"], pid  # its share of the samples, every byte
        assert generated == {os.path.join(data, f"out-{pid}.bin"): 4096}, pid
    main = next(int(pid) for pid, entry in report["EXPECTED"].items() if not entry["counts"]["files"])
    assert _lineage_of(main, rows)[1] == {os.path.join(data, f"sample-{i:04d}.bin"): SIZE for i in range(FILES)}
