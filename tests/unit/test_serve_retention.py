"""serve's retention of job traces on fixture directories: by age, then by total size oldest
first, a trace with its companions; never a file being written, a symlink, or what lies
outside a job's directory. And the settings that choose layers and limits."""

from __future__ import annotations

import os

import pytest

from ioobserve.probes import layers as ly
from ioobserve.serve.config import ConfigError, ServeConfig
from ioobserve.serve.retention import COMPANIONS, job_traces, sweep

DAY = 86400
NOW = 1_800_000_000.0


def _trace(record_dir, job: str, name: str, age_days: float, size: int = 100, companions: bool = True):
    directory = record_dir / f"job-{job}"
    directory.mkdir(exist_ok=True, mode=0o700)
    path = directory / f"{name}.pfw.gz"
    for file in (path, *((path.with_name(path.name + c) for c in COMPANIONS) if companions else ())):
        file.write_bytes(b"x" * size)
        os.utime(file, (NOW - age_days * DAY, NOW - age_days * DAY))
    return path


def _left(record_dir) -> set[str]:
    return {str(p.relative_to(record_dir)) for p in record_dir.rglob("*") if p.is_file() or p.is_symlink()}


def test_traces_older_than_the_limit_go_with_their_companions(tmp_path):
    old, young = _trace(tmp_path, "1", "a", 40), _trace(tmp_path, "2", "b", 2)
    assert sweep(tmp_path, 30, None, set(), NOW) == [old]
    assert _left(tmp_path) == {str(young.relative_to(tmp_path)) + c for c in ("", *COMPANIONS)}


def test_the_oldest_go_while_the_rest_hold_more_than_the_limit(tmp_path):
    traces = [_trace(tmp_path, "1", name, age) for name, age in (("a", 5), ("b", 4), ("c", 3), ("d", 1))]
    each = 4 * 100  # a trace and its three companions
    assert [t.size for t in job_traces(tmp_path)] == [each] * 4
    assert sweep(tmp_path, None, 2 * each, set(), NOW) == traces[:2]
    assert sweep(tmp_path, None, 2 * each, set(), NOW) == []  # within the limit now


def test_a_file_being_written_is_never_removed_and_counts_toward_the_size(tmp_path):
    writing = _trace(tmp_path, "1", "current", 90)
    older = _trace(tmp_path, "2", "older", 50)
    assert sweep(tmp_path, 30, 1, {writing}, NOW) == [older]
    assert writing.exists()


def test_only_plain_files_in_job_directories_are_touched(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    victim = _trace(outside, "9", "theirs", 90)
    (tmp_path / "job-3").mkdir()
    os.symlink(victim, tmp_path / "job-3" / "link.pfw.gz")  # a link to a trace: not followed, not removed
    os.symlink(outside / "job-9", tmp_path / "job-4")  # a linked job directory: not entered
    (tmp_path / "notes.pfw.gz").write_bytes(b"x")  # not in a job's directory
    os.utime(tmp_path / "notes.pfw.gz", (0, 0))
    assert sweep(tmp_path, 1, 0, set(), NOW) == []
    assert victim.exists() and (tmp_path / "job-3" / "link.pfw.gz").is_symlink() and (tmp_path / "notes.pfw.gz").exists()


def test_layers_and_limits_are_checked_as_settings():
    assert ServeConfig().serve_layers() == {ly.SYSCALL, ly.IO_URING, ly.AIO, ly.BLOCK, ly.CACHE}
    assert ServeConfig(layers="no-cache,no-block").serve_layers() == {ly.SYSCALL, ly.IO_URING, ly.AIO}
    with pytest.raises(ConfigError, match="serve aggregates only .*libc: probes in every process"):
        ServeConfig(layers="libc").serve_layers()
    with pytest.raises(ConfigError, match="syscall layer cannot be switched off"):
        ServeConfig(layers="no-syscall").serve_layers()
    assert ServeConfig(retain_days=7, retain_gb=1.5).retention() == (7, 1_500_000_000)
    assert ServeConfig().retention() == (None, None)
    with pytest.raises(ConfigError, match="retain-gb -1: must be more than 0"):
        ServeConfig(retain_gb=-1).retention()
