"""Context tables: paths by file identity, renames, relative path arguments, lineage."""

from __future__ import annotations

import os

from ioobserve.context.files import FileTable
from ioobserve.context.processes import ProcessTable
from ioobserve.data import events as ev
from ioobserve.data.decode import NameRecord, PathRecord, ProcRecord


def test_paths_by_identity_replace_and_rename():
    table = FileTable()
    table.add([PathRecord(1, 10, 0o100644, "/a/x"), PathRecord(1, 11, 0o40755, "/a")])
    table.add([PathRecord(1, 10, 0o100644, "/a/y")])  # the same file, renamed behind our back
    table.rename("/a", "/b")
    frame = table.frame()
    assert dict(zip(frame["ino"].to_list(), frame["path"].to_list())) == {10: "/b/y", 11: "/b"}
    assert frame.height == 2


def test_the_reader_learns_only_new_files_and_the_worker_replaces_in_order():
    """A new file with a deleted one's inode: the reader, ahead of the events, keeps the old
    name for the events still queued; the worker's `add`, in their order, replaces it."""
    table = FileTable()
    table.add_new([PathRecord(1, 10, 0o100644, "/tmp/old")])
    table.add_new([PathRecord(1, 10, 0o100644, "/work/new"), PathRecord(1, 12, 0o100644, "/work/lib.so")])
    assert table.by_id == {(1, 10): "/tmp/old", (1, 12): "/work/lib.so"}
    table.add([PathRecord(1, 10, 0o100644, "/work/new")])
    frame = table.frame()
    assert dict(zip(frame["ino"].to_list(), frame["path"].to_list())) == {10: "/work/new", 12: "/work/lib.so"}


def test_relative_names_join_their_base_directory():
    table = FileTable()
    table.add([PathRecord(1, 5, 0o40755, "/work/dir")])
    assert table.join_name(NameRecord(1, 1, 0, 1, 5, "../x/./f")) == "/work/x/f"
    assert table.join_name(NameRecord(1, 1, 0, 0, 0, "/abs//p")) == "/abs/p"
    assert table.join_name(NameRecord(1, 1, 0, 9, 9, "rel")) == "?/rel"  # base never seen


def test_absolute_names_come_out_as_normpath_makes_them():
    """normpath is skipped where it would change nothing: it must never be skipped elsewhere."""
    table = FileTable()
    for name in ("/", "/a/b", "/a//b", "//a", "///a", "/a/./b", "/a/../b", "/a/b/", "/a/.hidden", "/a/b/.", "/a/..",
                 "/..", "/a/b..", "/a/...", "/.", "/a/b/c.txt", "/tmp/x y", "/\udcff/é"):
        assert table.join_name(NameRecord(1, 1, 0, 0, 0, name)) == os.path.normpath(name), name


def test_lineage_from_fork_exec_exit():
    table = ProcessTable()
    table.by_pid[100] = table.get(100)  # unknown pid: recorded as an empty process
    records = [
        ProcRecord(ev.PROC_FORK, 1, 101, 101, 100, 0, 7, 0, "parent", "", ()),
        ProcRecord(ev.PROC_EXEC, 2, 101, 101, 100, 0, 7, 0, "worker", "/usr/bin/python3", ("python3", "w.py")),
        ProcRecord(ev.PROC_FORK, 3, 102, 102, 101, 0, 7, 0, "worker", "", ()),
        ProcRecord(ev.PROC_EXIT, 4, 102, 102, 0, 0, 7, 3, "worker", "", ()),
    ]
    changed = table.apply(records)
    assert [p.pid for p in changed] == [101, 101, 102]
    assert table.by_pid[102].ppid == 101 and table.by_pid[102].exit_code == 3
    assert table.by_pid[102].cmdline == ("python3", "w.py")  # inherited at fork
    assert table.descendants(100) == {100, 101, 102}


def test_exited_processes_are_forgotten_after_a_while():
    table = ProcessTable()
    table.apply([ProcRecord(ev.PROC_FORK, 1, 201, 201, 200, 0, 7, 0, "w", "", ()),
                 ProcRecord(ev.PROC_FORK, 1, 202, 202, 200, 0, 7, 0, "w", "", ()),
                 ProcRecord(ev.PROC_EXIT, 5, 201, 201, 0, 0, 7, 0, "w", "", ())])
    assert table.forget_exited(before_ns=4) == []
    assert table.forget_exited(before_ns=6) == [201]
    assert 201 not in table.by_pid and 202 in table.by_pid
