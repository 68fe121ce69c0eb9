"""Decoding auxiliary records and device numbers."""

from __future__ import annotations

import os

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from ioobserve.data import events as ev
from ioobserve.data.decode import decode_aux, kernel_dev_to_user, name_frame, path_from_components

from tests.unit.fake_ring import ring_blob


def test_path_from_leaf_first_components():
    assert path_from_components(b"file.bin\0data\0tmp\0", False) == "/tmp/data/file.bin"
    assert path_from_components(b"", False) == "/"
    assert path_from_components(b"c\0b\0", True) == "…/b/c"  # cut short: the missing top is marked


def test_kernel_dev_to_user_matches_os_makedev():
    pairs = [(8, 1), (259, 3), (0, 45), (4095, 1048575), (300, 70000)]
    kernel = np.array([(major << 20) | minor for major, minor in pairs], dtype=np.uint32)
    assert kernel_dev_to_user(kernel).tolist() == [os.makedev(a, b) for a, b in pairs]


def _record(dtype, payload: bytes, **fields) -> bytes:
    head = np.zeros(1, dtype=dtype)
    for name, value in fields.items():
        head[name] = value
    return head.tobytes() + payload


def test_decode_aux_sorts_records_by_kind():
    path = _record(ev.PATH_RECORD, b"f\0d\0", kind=ev.AUX_PATH, dev=5, ino=7, mode=0o100644, len=4)
    name = _record(ev.NAME_RECORD, b"rel/x", kind=ev.AUX_NAME, tid=9, ts_ns=11, index=1, base_dev=5, base_ino=3, len=5)
    proc = _record(ev.PROC_RECORD, b"/usr/bin/python3\0python3\0-c\0pass\0", kind=ev.AUX_PROC, proc_kind=ev.PROC_EXEC,
                   pid=42, tid=42, ppid=1, comm=b"python3", len=33)
    batch = decode_aux(ring_blob([path, name, proc, b"\x63\0\0\0"]))
    assert batch.paths[0].path == "/d/f" and batch.paths[0].ino == 7
    assert name_frame(batch.names).rows() == [(9, 11, 1, 5, 3, False, "rel/x")]  # relative: joined to its directory later
    assert batch.procs[0].exe == "/usr/bin/python3"
    assert batch.procs[0].argv == ("python3", "-c", "pass")
    assert batch.procs[0].comm == "python3"


def test_a_head_record_keeps_its_bytes_and_no_more_than_the_kernel_copies():
    request = b"GET /bucket/key HTTP/1.1\r\nHost: s3.amazonaws.com\r\nRange: bytes=0-99\r\n\r\n"
    head = _record(ev.HEAD_RECORD, request, kind=ev.AUX_HEAD, tid=12, ts_ns=34, len=len(request))
    garbled = _record(ev.HEAD_RECORD, b"x" * 8, kind=ev.AUX_HEAD, tid=1, ts_ns=2, len=1 << 30)  # len beyond its bytes
    batch = decode_aux(ring_blob([head, garbled]))
    assert [(h.tid, h.ts_ns, h.data) for h in batch.heads] == [(12, 34, request), (1, 2, b"x" * 8)]


def _cgroup(path: bytes, ident: int, truncated: bool = False) -> bytes:
    data = path.ljust(ev.CGROUP_PATH_BYTES, b"\0")
    return _record(ev.CGROUP_RECORD, data, kind=ev.AUX_CGROUP, id=ident, ts_ns=3, len=len(path),
                   flags=ev.PATH_TRUNCATED if truncated else 0)


def test_a_cgroup_made_is_learned_by_the_table_unless_cut_short(tmp_path):
    from ioobserve.context.cgroups import CgroupTable

    pod = "8e1d2c3b-4a5f-6e7d-8c9b-0a1b2c3d4e5f"
    made = decode_aux(ring_blob([_cgroup(f"/kubepods/besteffort/pod{pod}/abc".encode(), 77),
                                 _cgroup(b"/very/long", 78, truncated=True)])).cgroups
    assert [(c.id, c.path, c.truncated) for c in made] == [(77, f"/kubepods/besteffort/pod{pod}/abc", False),
                                                          (78, "/very/long", True)]
    table = CgroupTable(mount=tmp_path)  # an empty tree: nothing a walk could find
    table.learn(made)
    assert table.lookup([77, 78]).keys() == {77}
    assert table.by_id[77].pod == pod


def test_names_that_name_themselves_are_marked_fast():
    """What os.path.normpath would leave as it is, and labels; the rest is joined in Python."""
    names = ["/a/b", "/", "", "/a//b", "/a/./b", "/a/../b", "/a/", "rel", "/.hidden", "/a/.", "/a/..", "/..b/...",
             "/é/\udcff"]  # \xff: not UTF-8
    records = [_record(ev.NAME_RECORD, name.encode("utf-8", "surrogateescape"), kind=ev.AUX_NAME, tid=1, ts_ns=n,
                       len=len(name.encode("utf-8", "surrogateescape"))) for n, name in enumerate(names)]
    records.append(_record(ev.NAME_RECORD, b"a.b", kind=ev.AUX_NAME, index=ev.NAME_LABEL, len=3))  # a module's name
    frame = name_frame(decode_aux(ring_blob(records)).names)
    fast = dict(zip(frame.get_column("name").to_list(), frame.get_column("fast").to_list()))
    assert fast == {"/a/b": True, "/": True, "": True, "/a//b": False, "/a/./b": False, "/a/../b": False,
                    "/a/": False, "rel": False, "/.hidden": True, "/a/.": False, "/a/..": False, "/..b/...": True,
                    "/é/\\xff": True, "a.b": True}
    assert all(os.path.normpath(name) == name for name, is_fast in fast.items() if is_fast and name.startswith("/"))


@given(st.text(st.sampled_from("/a.é"), max_size=12))
def test_a_name_marked_fast_is_what_normpath_makes_of_it(name):
    raw = name.encode()
    frame = name_frame(decode_aux(ring_blob([_record(ev.NAME_RECORD, raw, kind=ev.AUX_NAME, len=len(raw))])).names)
    if frame.get_column("fast")[0] and name:
        assert os.path.normpath(name) == name


def test_batches_drained_later_extend_an_earlier_one_in_order():
    first = decode_aux(ring_blob([_record(ev.NAME_RECORD, b"a", kind=ev.AUX_NAME, tid=1, ts_ns=1, len=1)]))
    later = decode_aux(ring_blob([_record(ev.NAME_RECORD, b"b", kind=ev.AUX_NAME, tid=1, ts_ns=2, len=1),
                                  _record(ev.PATH_RECORD, b"f\0", kind=ev.AUX_PATH, dev=5, ino=7, mode=0o100644, len=2)]))
    first.extend(later)
    assert name_frame(first.names).get_column("name").to_list() == ["a", "b"]
    assert [p.path for p in first.paths] == ["/f"]
