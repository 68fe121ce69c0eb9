"""Trace files are created 0600, never through symlinks or in directories others can write."""

from __future__ import annotations

import os
import stat

import pytest

from ioobserve.trace.output import OutputError, check_output_dir, create_private_file, trace_name


def test_missing_directory_is_created_private(tmp_path):
    target = check_output_dir(tmp_path / "new")
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o700


def test_symlinked_directory_is_refused(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(OutputError, match="symlink"):
        check_output_dir(tmp_path / "link")


def test_directory_writable_by_others_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.raises(OutputError, match="writable by other users"):
        check_output_dir(shared)


def test_a_file_is_not_a_directory(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(OutputError, match="not a directory"):
        check_output_dir(tmp_path / "f")


def test_missing_parent_is_refused(tmp_path):
    with pytest.raises(OutputError, match="parent"):
        check_output_dir(tmp_path / "a" / "b")


def test_private_file_is_0600_even_with_a_lax_umask(tmp_path):
    old = os.umask(0)
    try:
        fd = create_private_file(tmp_path, "t.pfw.gz")
    finally:
        os.umask(old)
    os.close(fd)
    assert stat.S_IMODE(os.stat(tmp_path / "t.pfw.gz").st_mode) == 0o600


def test_existing_file_or_symlink_is_never_written_through(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / "trace.pfw.gz").symlink_to(victim)
    with pytest.raises(OutputError, match="already exists"):
        create_private_file(tmp_path, "trace.pfw.gz")
    assert victim.read_text() == "keep"


def test_trace_name_layout():
    name = trace_name(pid=77, when=0)
    host, stamp, pid = name[: -len(".pfw.gz")].rsplit("-", 2)
    assert host and len(stamp) == 15 and stamp[8] == "T" and pid == "77"
    assert trace_name(part=3, pid=77, when=0).endswith("-77-3.pfw.gz")
