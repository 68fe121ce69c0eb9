"""`ioobserve diff` as a user runs it, on two small traces whose changes are known: a dataset
read in whole files, then in 4 KiB reads from another directory, with a new fsync and a
slower metadata call. The real recordings' deltas are checked in tests/kernel/test_diff_runs.py."""

from __future__ import annotations

import json

import pytest

from tests.cli.cli_run import assert_one_line_error, run
from tests.unit.synthetic_traces import Proc, io, private_dir, write_trace

P = Proc(100)
FILES, SIZE = 4, 64 * 1024


def _run(where: str, chunk: int, slow_stat: bool, fsync: bool) -> list[dict]:
    """Each file stat'ed and read whole in `chunk`-byte reads (the last returns 0), one at a time."""
    rows, t = [], 0.0
    for i in range(FILES):
        path = f"{where}/shard-{i}.bin"
        rows.append(io(P, 100, t, t + (300 if slow_stat else 100), "newfstatat", path))
        t += 400
        for offset in range(0, SIZE + chunk, chunk):
            got = max(0, min(chunk, SIZE - offset))
            rows.append(io(P, 100, t, t + 10, "read", path, 3, offset, chunk, ret=got))
            t += 20
        if fsync:
            rows.append(io(P, 100, t, t + 5_000, "fsync", path, 3))
            t += 5_100
    return rows


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("diff")
    a = write_trace(private_dir(base, "a"), [P], [_run("/scratch/run1/data", SIZE, False, False)])
    b = write_trace(private_dir(base, "b"), [P], [_run("/scratch/run2/data", 4096, True, True)])
    return a, b


def test_diff_json_matches_files_by_name_and_says_what_changed(runs):
    done = run("diff", str(runs[0]), str(runs[1].parent), "--files-by", "name", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    figures = {row["figure"]: row for row in result["overview"]}
    assert figures["read_calls"]["baseline"] == FILES * 2 and figures["read_calls"]["variant"] == FILES * (SIZE // 4096 + 1)
    assert figures["bytes_read"]["delta"] == 0 and figures["bytes_read"]["ratio"] == 1
    assert figures["read_calls_per_file_read"]["variant"] == SIZE // 4096 + 1
    files = {row["file_key"]: row for row in result["tables"]["files"]}
    assert set(files) == {f"shard-{i}.bin" for i in range(FILES)}
    assert {row["calls_delta"] for row in files.values()} == {(SIZE // 4096 + 1 - 2) + 1}  # 15 more reads, one fsync
    ops = {row["op"]: row for row in result["tables"]["ops"]}
    assert ops["fsync"]["calls_baseline"] == 0 and ops["fsync"]["calls_variant"] == FILES
    assert ops["fsync"]["calls_ratio"] is None  # nothing to divide by
    said = [change["text"] for change in result["changes"]]
    assert "read calls per file read went from 2 to 17 (×8.5)" in said, said
    assert "sync time: none in the baseline, 20.0 ms in the variant" in said, said
    assert any(text.startswith("metadata time went from 400 µs to 1.2 ms (×3.0)") for text in said), said
    assert not any("bytes read" in text for text in said)  # the same bytes


def test_diff_by_path_keeps_apart_what_another_directory_holds(runs):
    result = json.loads(run("diff", str(runs[0]), str(runs[1]), "--json").stdout)
    files = {row["file_key"]: row for row in result["tables"]["files"]}
    assert len(files) == 2 * FILES
    assert files["/scratch/run1/data/shard-0.bin"]["calls_variant"] == 0
    picked = json.loads(run("diff", str(runs[0]), str(runs[1]), "--json", "--files-by", "/data/(.*)").stdout)
    assert {row["file_key"] for row in picked["tables"]["files"]} == {f"shard-{i}.bin" for i in range(FILES)}


def test_diff_threshold_and_screen(runs):
    screen = run("diff", str(runs[0]), str(runs[1]), "--files-by", "name", "--threshold", "1000")
    assert screen.returncode == 0, screen.stderr
    assert "Changes of 1000% or more" in screen.stdout and "sync time" in screen.stdout
    assert "metadata time went" not in screen.stdout  # ×3 is under ×11
    assert "read calls per file read" in screen.stdout and "Operations" in screen.stdout


def test_diff_html_is_private_and_has_its_charts(runs, tmp_path):
    page = tmp_path / "d.html"
    done = run("diff", str(runs[0]), str(runs[1]), "--html", str(page))
    assert done.returncode == 0, done.stderr
    html = page.read_text()
    assert page.stat().st_mode & 0o777 == 0o600
    assert html.count("<svg") >= 5 and "read calls per file read" in html and "<script" not in html
    assert_one_line_error(run("diff", str(runs[0]), str(runs[1]), "--html", str(page)), "exists", "--force")


@pytest.mark.parametrize("args, words", [
    (["/no/such/run", "B"], ["BASELINE /no/such/run", "no trace file"]),
    (["A", "/no/such/*.pfw.gz"], ["VARIANT /no/such/*.pfw.gz"]),
    (["A", "B", "--files-by", "(a)(b)"], ["at most one group"]),
    (["A", "B", "--files-by", "[unclosed"], ["--files-by '[unclosed'", "not a regular expression"]),
    (["A", "B", "--threshold", "0"], ["--threshold"]),
    (["A", "EMPTY"], ["holds no trace"]),
])
def test_diff_mistakes_get_one_line(runs, tmp_path, args, words):
    (tmp_path / "empty").mkdir()
    names = {"A": str(runs[0]), "B": str(runs[1]), "EMPTY": str(tmp_path / "empty")}
    assert_one_line_error(run("diff", *(names.get(arg, arg) for arg in args)), *words)
