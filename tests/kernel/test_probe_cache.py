"""Probes loaded from the compiled-probe cache record exactly what freshly compiled ones do,
and the cache is what a second recording starts from."""

from __future__ import annotations

import os
import subprocess
import sys

from ioobserve.trace.read.reader import load, own_records
from tests.kernel.loader_counts import LOADER, expected_counts, trace_counts
from tests.kernel.recorder import IOOBSERVE, json_line, record_command

ARGS = ["--files", "6", "--size", str(64 * 1024), "--workers", "2", "--start", "fork"]


def _record_loader(tmp_path, name: str, env: dict[str, str]) -> None:
    """Record the loader; every process's calls and bytes are the ones it counted itself."""
    out, work = tmp_path / f"trace-{name}", tmp_path / f"work-{name}"
    work.mkdir()
    result = record_command(out, [sys.executable, LOADER, "--dir", str(work), *ARGS], env=env)
    assert result.returncode == 0, result.stderr
    expected = json_line(result.stdout, "EXPECTED")["EXPECTED"]
    traces = sorted(out.glob("*.pfw.gz"))
    frame = load(traces)
    assert len(expected) == 3
    for pid, entry in expected.items():
        assert trace_counts(frame, int(pid)) == expected_counts(entry), f"pid {pid} ({name})"
    (end,) = own_records(traces[0], "end")
    assert end["args"]["lost_total"] == 0


def test_the_second_recording_loads_the_first_ones_compile(root_required, tmp_path):
    cache = tmp_path / "cache"
    env = os.environ | {"IOOBSERVE_CACHE_DIR": str(cache)}
    _record_loader(tmp_path, "compiled", env)
    (entry,) = (cache / "probes").glob("*.json")
    assert entry.stat().st_mode & 0o777 == 0o600
    written = entry.stat()
    _record_loader(tmp_path, "cached", env)
    assert list((cache / "probes").glob("*.json")) == [entry]
    again = entry.stat()
    assert again.st_ino == written.st_ino  # a compile would have stored a new file in its place
    assert again.st_mtime_ns > written.st_mtime_ns  # looked up: marked as used


def test_probes_from_the_cache_are_the_ones_loaded(root_required, tmp_path, monkeypatch):
    from ioobserve.collect.recording import load_probes
    from ioobserve.probes.build import object_cache

    monkeypatch.setattr(object_cache, "CACHE_DIR", tmp_path)
    first = load_probes()
    try:
        assert not first.from_cache
    finally:
        first.close()
    second = load_probes()
    try:
        assert second.from_cache
        assert set(second.bpf.compiled.programs) >= {"on_sys_enter", "on_sys_exit", "py_walk"}
    finally:
        second.close()


def test_the_doctor_compiles_the_probes_once_for_every_recording(root_required, tmp_path):
    """`make setup` runs the doctor: its probes check leaves the compile in the cache."""
    env = os.environ | {"IOOBSERVE_CACHE_DIR": str(tmp_path / "cache")}
    for expected in ("compiled, and the compile kept", "loaded from the compile kept"):
        done = subprocess.run([IOOBSERVE, "doctor", "--quick"], capture_output=True, text=True, env=env, timeout=300,
                              check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        row = next(line for line in done.stdout.splitlines() if line.startswith("│ probes"))
        assert "ok" in row and " ".join(done.stdout.split()).count(expected) == 1, done.stdout
    assert len(list((tmp_path / "cache" / "probes").glob("*.json"))) == 1
