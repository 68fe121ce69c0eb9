"""Process context logic: launch variables, tag lines, the worker ordinals, the timeline's
inheritance, and the as-of join that gives each event the context in force at its time."""

from __future__ import annotations

import polars as pl

from ioobserve.collect.context_tables import ContextTables
from ioobserve.context.launch import HELPER, PROGRAM, SPAWN_CHILD, Launch, child_kind, launch_from_environ
from ioobserve.context.lifecycle import apply_record
from ioobserve.context.tags import MAX_TAGS, apply_tags, parse_tags, tag_text
from ioobserve.data import events as ev
from ioobserve.data import schema as s
from ioobserve.data.decode import ProcRecord
from ioobserve.data.model import join_process_context

SPAWN = ("python3", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5, pipe_handle=7)",
         "--multiprocessing-fork")
TRACKER = ("python3", "-c", "from multiprocessing.resource_tracker import main;main(4)")


class _Node:
    """The context tables, fed fork, exec and exit records one at a time as the collector feeds
    them: the process table first, then the timeline and the worker ordinals."""

    def __init__(self) -> None:
        self.context = ContextTables()
        self.timeline, self.workers = self.context.timeline, self.context.workers

    def fork(self, pid: int, ppid: int, ts_ns: int) -> None:
        self._apply(ProcRecord(ev.PROC_FORK, ts_ns, pid, pid, ppid, 0, 0, 0, "", "", ()))

    def exec(self, pid: int, ppid: int, ts_ns: int, argv: tuple[str, ...], launch: Launch) -> None:
        self._apply(ProcRecord(ev.PROC_EXEC, ts_ns, pid, pid, ppid, 0, 0, 0, "", "", argv), launch)

    def exit(self, pid: int, ts_ns: int) -> None:
        self._apply(ProcRecord(ev.PROC_EXIT, ts_ns, pid, pid, 0, 0, 0, 0, "", "", ()))

    def _apply(self, record: ProcRecord, launch: Launch | None = None) -> None:
        self.context.processes.apply([record])
        apply_record(self.timeline, self.workers, record, launch)


def _environ(**variables: str) -> bytes:
    return b"\0".join(f"{k}={v}".encode() for k, v in {"PATH": "/bin", **variables}.items()) + b"\0"


def test_launch_variables_most_specific_launcher_first():
    srun_torchrun = _environ(SLURM_JOB_ID="42", SLURM_STEP_ID="3", SLURM_PROCID="0", SLURM_LOCALID="0",
                             RANK="5", LOCAL_RANK="1", WORLD_SIZE="8", SLURM_NTASKS="2")
    assert launch_from_environ(srun_torchrun) == Launch("42", "3", 5, 1, 8)
    assert launch_from_environ(_environ(PMI_RANK="3", OMPI_COMM_WORLD_RANK="7")).rank == 7
    assert launch_from_environ(_environ(SLURM_PROCID="2", SLURM_LOCALID="1")) == Launch(rank=2, local_rank=1)
    # Not numbers where numbers are due, a variable named inside another's value: ignored.
    assert launch_from_environ(_environ(RANK="x", SLURM_JOB_ID="abc", NOTE="RANK=9")) == Launch()
    assert launch_from_environ(b"") == Launch()


def test_multiprocessing_children_by_their_command_line():
    assert child_kind(SPAWN) == SPAWN_CHILD
    assert child_kind(TRACKER) == HELPER
    assert child_kind(("python3", "-c", "from multiprocessing.forkserver import main; main(3, 4)")) == HELPER
    assert child_kind(("cat", "/data/x")) == PROGRAM


def test_tag_lines():
    assert tag_text("/run/ioobserve/tag/epoch=3") == "epoch=3"
    assert tag_text("/run/ioobserve/other") is None and tag_text(None) is None
    assert parse_tags("epoch=3, phase=train") == {"epoch": "3", "phase": "train"}
    assert parse_tags("phase=") == {"phase": None}  # removes the key
    for bad in ("epoch", "=3", "two words=1", "a=b c", "", "epoch=3,"):
        assert parse_tags(bad) is None, bad
    assert apply_tags((("epoch", "1"), ("phase", "io")), {"epoch": "2", "phase": None}) == (("epoch", "2"),)
    full = tuple((f"k{i:02}", "v") for i in range(MAX_TAGS))
    assert apply_tags(full, {"one_more": "v"}) is None and apply_tags(full, {"k00": "w"}) == (("k00", "w"), *full[1:])


def _rank_with_pool(node: _Node) -> None:
    """Rank 5 (pid 10) spawns a resource tracker (11) and four workers (12-15); the tracker's
    exec is learned only after the first worker's fork, as happens for real."""
    node.exec(10, 1, 100, ("python3", "train.py"), Launch(job="42", rank=5))
    node.fork(11, 10, 200)
    node.fork(12, 10, 300)
    node.exec(11, 10, 310, TRACKER, Launch(job="42", rank=5))
    node.exec(12, 10, 320, SPAWN, Launch(job="42", rank=5))
    for pid, at in ((13, 400), (14, 500), (15, 600)):
        node.fork(pid, 10, at)
        node.exec(pid, 10, at + 10, SPAWN, Launch(job="42", rank=5))


def test_spawn_pool_ordinals_skip_the_helper_even_when_it_execs_late():
    node = _Node()
    timeline = node.timeline
    _rank_with_pool(node)
    assert [timeline.at(pid, 1000).worker for pid in (12, 13, 14, 15)] == [0, 1, 2, 3]
    assert timeline.at(11, 250).worker is None  # not a worker, not even before its exec
    assert timeline.at(10, 1000).worker is None and timeline.at(13, 1000).rank == 5
    node.fork(16, 13, 2000)  # a worker's own child works for it
    assert timeline.at(16, 2000).worker == 1
    assert not node.workers.pending()  # the tracker gave its ordinal back, the rest showed theirs


def test_program_children_are_not_workers_but_become_ranks_of_their_own():
    node = _Node()
    timeline = node.timeline
    node.exec(10, 1, 100, ("bash", "job.sh"), Launch(rank=2))
    node.fork(11, 10, 200)
    node.exec(11, 10, 210, ("python3", "train.py"), Launch(rank=2))
    node.fork(12, 11, 300)  # a fork-started DataLoader worker of the python rank
    assert timeline.at(12, 1000).worker is None  # not shown before it does I/O of its own
    node.fork(13, 12, 500)  # the worker's child, learned before the worker's first I/O
    node.workers.confirm({12: 400, 11: 400})
    assert timeline.at(11, 1000).worker is None and timeline.at(12, 399).worker is None
    assert timeline.at(12, 400).worker == 0 and timeline.at(13, 500).worker == 0


def test_spawn_children_without_a_rank_are_numbered_at_exec():
    node = _Node()
    timeline = node.timeline
    for pid, at in ((20, 100), (21, 200)):
        node.fork(pid, 5, at)
        node.exec(pid, 5, at + 10, SPAWN, Launch())
    node.fork(22, 5, 300)  # a plain fork of a process without a rank: not a worker
    assert [timeline.at(pid, 1000).worker for pid in (20, 21, 22)] == [0, 1, None]


def test_tags_take_effect_from_their_time_and_reach_children_forked_later():
    node = _Node()
    timeline = node.timeline
    node.exec(10, 1, 100, ("python3",), Launch(rank=0))
    node.fork(11, 10, 500)  # learned before the parent's earlier tag arrives
    assert timeline.tag(10, 400, {"epoch": "1"})
    node.fork(12, 10, 300)  # forked before the tag: does not inherit it
    assert timeline.tag(11, 600, {"phase": "io"})
    assert timeline.at(10, 399).tags == () and timeline.at(10, 400).tags == (("epoch", "1"),)
    assert timeline.at(11, 550).tags == (("epoch", "1"),)
    assert timeline.at(11, 600).tags == (("epoch", "1"), ("phase", "io"))
    assert timeline.at(12, 1000).tags == ()
    too_many = {f"k{i}": "v" for i in range(MAX_TAGS + 1)}
    assert not timeline.tag(10, 700, too_many) and timeline.tags_malformed == 1


def test_a_reused_pid_starts_without_the_old_context():
    node = _Node()
    timeline = node.timeline
    node.exec(30, 1, 100, ("python3",), Launch(job="9", rank=1))
    node.fork(30, 2, 5000)  # pid 30 again, child of a process without context
    assert timeline.at(30, 6000) == timeline.at(99, 0)  # empty
    assert 30 not in timeline


def test_compaction_keeps_what_later_events_see():
    node = _Node()
    timeline = node.timeline
    node.exec(10, 1, 100, ("python3",), Launch(rank=0))
    for step in range(100):
        timeline.tag(10, 1000 + step, {"step": str(step)})
    before = timeline.at(10, 5000)
    timeline.compact(1050)
    assert timeline.at(10, 5000) == before and timeline.at(10, 1049).tags == (("step", "49"),)
    assert timeline.rows([10], from_ns=1098, clock_offset_ns=0).height == 2  # steps 98 and 99


def test_as_of_join_gives_each_event_the_context_in_force():
    node = _Node()
    timeline = node.timeline
    node.exec(10, 1, 100, ("python3",), Launch(job="42", rank=3))
    timeline.tag(10, 200, {"epoch": "1"})
    events = pl.DataFrame({s.TS: [1050, 1150, 1250, 1300], s.PID: [10, 10, 10, 11],
                           s.JOB: [None, None, "7", None], s.STEP: [None] * 4},
                          schema={s.TS: pl.UInt64, s.PID: pl.UInt32, s.JOB: pl.String, s.STEP: pl.String})
    joined = join_process_context(events, timeline.rows([10], from_ns=0, clock_offset_ns=1000))
    assert joined.get_column(s.RANK).to_list() == [None, 3, 3, None]  # before its exec, and another pid
    assert joined.get_column(s.JOB).to_list() == [None, "42", "7", None]  # the cgroup's job wins
    assert joined.get_column(s.TAGS).to_list() == [None, None, [{"key": "epoch", "value": "1"}], None]


def test_tag_expression_reads_one_key():
    import ioobserve

    frame = pl.DataFrame({s.TAGS: [[{"key": "epoch", "value": "3"}, {"key": "phase", "value": "io"}], None, []]},
                         schema={s.TAGS: pl.List(s.TAG_ENTRY)})
    assert frame.select(ioobserve.tag("phase")).to_series().to_list() == ["io", None, None]


def test_each_epochs_fresh_workers_are_numbered_from_0_again():
    node = _Node()
    timeline = node.timeline
    _rank_with_pool(node)
    for pid in (12, 13, 14, 15):
        node.exit(pid, 1500)
    for pid, at in ((22, 2000), (23, 2100)):  # the next epoch's workers (fork start method)
        node.fork(pid, 10, at)
    node.fork(24, 10, 2200)
    node.exec(24, 10, 2210, ("nvidia-smi",), Launch(rank=5))  # a program, not a worker
    node.fork(25, 10, 2300)
    node.workers.confirm({22: 2500, 23: 2500, 25: 2500})
    assert [timeline.at(pid, 3000).worker for pid in (22, 23, 24, 25)] == [0, 1, None, 2]
    assert [timeline.at(pid, 1000).worker for pid in (12, 13, 14, 15)] == [0, 1, 2, 3]  # history stays


def test_forgotten_processes_leave_nothing_behind():
    node = _Node()
    timeline, workers = node.timeline, node.workers
    node.exec(10, 1, 100, ("python3",), Launch(rank=0))
    for pid in range(100, 150):
        node.fork(pid, 10, pid)
        workers.confirm({pid: pid + 1})
        node.exit(pid, pid + 2)
    node.context.forget_exited(before_ns=1000)
    assert node.context.processes.by_pid[10].children == [] and not workers._ordinals and not workers._in_use[10]
    assert all(pid not in timeline for pid in range(100, 150))


def test_pages_an_exec_faults_in_do_not_make_a_child_a_worker():
    import numpy as np

    from ioobserve.collect.enrich import Enricher

    node = _Node()
    timeline = node.timeline
    node.exec(10, 1, 100, ("python3",), Launch(rank=0))
    node.fork(24, 10, 200)  # about to exec `cat`: its exec reads the binary's pages
    batch = np.zeros(2, dtype=ev.EVENT)
    batch["pid"] = batch["tid"] = 24
    batch["ts_ns"] = (210, 220)
    batch["op"] = (ev.OP_CODES["cache_miss"], ev.OP_CODES["close"])
    Enricher(node.context, 0).frame(batch)
    assert node.workers.pending() == {24}
    batch["op"][1] = ev.OP_CODES["read"]
    Enricher(node.context, 0).frame(batch)
    assert not node.workers.pending() and timeline.at(24, 300).worker == 0
