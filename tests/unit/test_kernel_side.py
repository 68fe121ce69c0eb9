"""The two halves of a matrix test (tests/kernel/kernel_side.py): in the suite both run here; in a
guest the kernel side's facts are left whole and the test stops; on the host they are read back,
never recorded again, and a missing recording fails the check."""

from __future__ import annotations

import itertools
import json

import pytest

from tests.kernel import kernel_side as ks

NODE = "tests/kernel/test_x.py::test_y[a/b]"


def _record(side, size: int) -> dict:
    (side.out / "trace").mkdir()
    (side.out / "trace" / "host-1.pfw.gz").write_bytes(b"x" * size)
    (side.scratch / "work").write_text("stays")
    return {"size": size, "path": side.out / "trace"}  # a Path: kept as its text, as JSON keeps it


def _side(tmp_path, name="side") -> ks.KernelSide:
    count = itertools.count()

    def new_directory():
        path = tmp_path / f"{name}-{next(count)}"
        path.mkdir()
        return path

    return ks.KernelSide(NODE, new_directory)


def test_in_the_suite_both_halves_run_here_and_the_facts_are_json(tmp_path, monkeypatch):
    monkeypatch.delenv(ks.PHASE, raising=False)
    recorded = _side(tmp_path)(_record, 3)
    assert recorded["size"] == 3 and recorded["path"] == str(recorded.out / "trace")
    assert [path.name for path in recorded.traces()] == ["host-1.pfw.gz"]


def test_a_guest_leaves_whole_facts_and_the_host_reads_them_without_recording(tmp_path, monkeypatch):
    monkeypatch.setenv(ks.RECORDINGS, str(tmp_path / "recordings"))
    monkeypatch.setenv(ks.PHASE, ks.RECORD)
    with pytest.raises(ks.KernelSideDone):
        _side(tmp_path, "guest")(_record, 5)
    out = tmp_path / "recordings" / ks.recording_key(NODE)
    assert json.loads((out / ks.FACTS).read_text())["size"] == 5 and not (out / f"{ks.FACTS}.part").exists()
    assert (out / "trace" / "host-1.pfw.gz").stat().st_size == 5
    assert not (out / "work").exists()  # the scratch stayed where it ran

    monkeypatch.setenv(ks.PHASE, ks.CHECK)
    recorded = _side(tmp_path, "host")(lambda side, size: pytest.fail("recorded again on the host"), 5)
    assert recorded.out == out and recorded["size"] == 5 and recorded.traces() == [out / "trace" / "host-1.pfw.gz"]


def test_the_host_fails_a_test_whose_guest_left_no_recording(tmp_path, monkeypatch):
    monkeypatch.setenv(ks.RECORDINGS, str(tmp_path))
    monkeypatch.setenv(ks.PHASE, ks.CHECK)
    with pytest.raises(AssertionError, match="the guest left no recording for tests/kernel/test_x.py::test_y"):
        _side(tmp_path)(_record, 1)


def test_one_kernel_side_per_test(tmp_path, monkeypatch):
    monkeypatch.delenv(ks.PHASE, raising=False)
    side = _side(tmp_path)
    side(_record, 1)
    with pytest.raises(AssertionError, match="calls kernel_side twice"):
        side(_record, 1)


def test_a_shared_kernel_side_runs_once_in_the_suite(tmp_path, monkeypatch):
    monkeypatch.delenv(ks.PHASE, raising=False)
    runs = []

    def counted(side, size):
        runs.append(size)
        return {"size": size}

    first = _side(tmp_path, "a")(counted, 7, share=True)
    again = _side(tmp_path, "b")(counted, 7, share=True)
    other = _side(tmp_path, "c")(counted, 8, share=True)
    assert runs == [7, 8] and first is again and other["size"] == 8


def test_keys_are_names_of_their_own_per_test():
    keys = {ks.recording_key(f"tests/kernel/test_x.py::test_y[{param}]") for param in ("a/b", "a_b", "a b", "a:b")}
    assert len(keys) == 4 and all("/" not in key and " " not in key for key in keys)


def test_a_shared_kernel_side_is_recorded_once_in_a_guest_and_read_by_each_test_on_the_host(tmp_path, monkeypatch):
    monkeypatch.setenv(ks.RECORDINGS, str(tmp_path / "recordings"))
    monkeypatch.setenv(ks.PHASE, ks.RECORD)
    runs = []

    def counted(side, size):
        runs.append(size)
        return {"size": size}

    for node in ("tests/kernel/test_x.py::test_one", "tests/kernel/test_x.py::test_two"):
        with pytest.raises(ks.KernelSideDone):
            ks.KernelSide(node, lambda: tmp_path)(counted, 4, share=True)
    assert runs == [4]
    monkeypatch.setenv(ks.PHASE, ks.CHECK)
    for node in ("tests/kernel/test_x.py::test_one", "tests/kernel/test_x.py::test_two"):
        assert ks.KernelSide(node, lambda: tmp_path)(counted, 4, share=True)["size"] == 4
    assert runs == [4]
