"""The comparison's pure parts (ioobserve.analysis.compare and .changes): rows matched by key,
a missing row's sums taken as 0, a run's only job paired with the other's, and the changes
said past the threshold, many files' at once."""

from __future__ import annotations

import polars as pl

from ioobserve.analysis import compare as c
from ioobserve.analysis.changes import factor, file_changes, past


def test_side_by_side_matches_rows_and_orders_by_the_largest_change():
    spec = c.TABLES["ops"]
    columns = {"op": pl.String, "calls": pl.UInt64, "bytes_read": pl.UInt64, "bytes_written": pl.UInt64, "time_ns": pl.UInt64}
    before = pl.DataFrame([("read", 10, 100, 0, 1_000), ("stat", 5, 0, 0, 50)], schema=columns, orient="row")
    after = pl.DataFrame([("read", 40, 100, 0, 9_000), ("fsync", 2, 0, 0, 4_000)], schema=columns, orient="row")
    rows = {row["op"]: row for row in c.side_by_side(before, after, spec).iter_rows(named=True)}
    assert list(rows) == ["read", "fsync", "stat"]  # |Δ time|: 8000, 4000, 50
    assert (rows["read"]["calls_delta"], rows["read"]["calls_ratio"], rows["read"]["bytes_read_ratio"]) == (30, 4, 1)
    assert (rows["fsync"]["calls_baseline"], rows["fsync"]["calls_ratio"]) == (0, None)
    assert (rows["stat"]["calls_variant"], rows["stat"]["calls_delta"]) == (0, -5)


def test_a_runs_only_job_is_paired_with_the_others():
    one = pl.DataFrame({"job": ["4242"], "calls": [1]})
    other = pl.DataFrame({"job": ["5120"], "calls": [2]})
    paired = c._paired_jobs(one, other)
    assert [frame.get_column("job").to_list() for frame in paired] == [["4242 → 5120"]] * 2
    two = pl.DataFrame({"job": ["5120", "5121"], "calls": [2, 3]})
    assert c._paired_jobs(one, two)[1].get_column("job").to_list() == ["5120", "5121"]  # by id when not one each


def test_file_keys_by_path_name_and_pattern():
    paths = pl.DataFrame({"path": ["/a/data/x/1.bin", "/b/data/x/1.bin", "/etc/hosts"]})
    def keys(how: str) -> list[str]:
        return paths.select(c.FileKey(how).expr()).to_series().to_list()
    assert keys("path") == paths.get_column("path").to_list()
    assert keys("name") == ["1.bin", "1.bin", "hosts"]
    assert keys("/data/(.*)") == ["x/1.bin", "x/1.bin", "/etc/hosts"]  # unmatched: its whole path
    assert keys("data/x") == ["data/x", "data/x", "/etc/hosts"]  # no group: the match


def test_threshold_and_factor():
    assert past(100, 125, 0.25) and past(125, 100, 0.25) and not past(100, 124, 0.25)
    assert past(0, 1, 0.25) and past(1, 0, 0.25) and not past(0, 0, 0.25)
    assert (factor(1.04), factor(0.9), factor(8.5), factor(0.25)) == ("+4%", "-10%", "×8.5", "÷4.0")


def test_many_files_changing_together_are_said_once():
    n = 48
    frame = pl.DataFrame({"file_key": [f"s{i}" for i in range(n)], "calls_baseline": [4.0] * n,
                          "calls_variant": [34.0] * (n - 1) + [4.0], "time_ns_baseline": [1e6] * n,
                          "time_ns_variant": [1e6] * n, "calls_ratio": [8.5] * n, "time_ns_ratio": [1.0] * n})
    said = file_changes(frame, 0.25)
    assert [change.text for change in said] == [
        "47 of the 48 files both runs used: calls went from 4 to 34 (×8.5) in the median one"]


def test_an_operations_failed_requests_are_said_however_little_time_they_took():
    from ioobserve.analysis.changes import row_changes

    spec = c.TABLES["requests"]
    columns = {"op": pl.String, "requests": pl.UInt64, "errors": pl.UInt64, "bytes": pl.UInt64, "time_ns": pl.UInt64}
    before = pl.DataFrame([("GetObject", 1000, 0, 10 << 20, 9_000_000_000), ("HeadObject", 40, 2, 0, 4_000_000)],
                          schema=columns, orient="row")
    after = pl.DataFrame([("GetObject", 1000, 3, 10 << 20, 9_000_000_000), ("HeadObject", 40, 40, 0, 4_000_000)],
                         schema=columns, orient="row")
    found = row_changes("requests", c.side_by_side(before, after, spec), 0.25)
    assert [(change.name, change.measure, change.baseline, change.variant) for change in found] == [
        ("HeadObject", "errors", 2, 40)]  # GetObject's 3 are under the floor; HeadObject's time is 0.04% of it
    assert "failed requests" in found[0].text
