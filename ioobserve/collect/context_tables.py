"""What a recording knows of the node while it runs, in one object that the collector and
the enricher share: the files, processes, cgroups and users, each process's context over time,
the worker ordinals and the Python stacks; the one way a batch's records update them, and the
one way to forget exited processes in all of them."""

from __future__ import annotations

from dataclasses import dataclass, field

from ioobserve.context.cgroups import CgroupTable
from ioobserve.context.files import FileTable
from ioobserve.context.lifecycle import apply_lifecycle
from ioobserve.context.processes import ProcessTable
from ioobserve.context.timeline import ContextTimeline
from ioobserve.context.users import UserNames
from ioobserve.context.workers import WorkerOrdinals
from ioobserve.data.decode import AuxBatch
from ioobserve.data.model import Process
from ioobserve.python.stacks import PythonStacks


@dataclass
class ContextTables:
    """The context tables of one recording (each made empty unless given)."""

    files: FileTable = field(default_factory=FileTable)
    processes: ProcessTable = field(default_factory=ProcessTable)
    cgroups: CgroupTable = field(default_factory=CgroupTable)  # walks the cgroup v2 mount when made
    users: UserNames = field(default_factory=UserNames)
    stacks: PythonStacks = field(default_factory=PythonStacks)
    timeline: ContextTimeline = field(init=False)  # both on the process table's tree
    workers: WorkerOrdinals = field(init=False)

    def __post_init__(self) -> None:
        self.timeline = ContextTimeline(self.processes)
        self.workers = WorkerOrdinals(self.timeline, self.processes)

    def apply(self, records: AuxBatch) -> list[Process]:
        """A batch's auxiliary records, before its events are named: cgroups made, files opened
        (a new file with a deleted one's inode is named anew from here on), processes born,
        exec'd and exited with their context, and Python's chain and code records; returns
        the processes that changed."""
        self.cgroups.learn(records.cgroups)
        self.files.add(records.paths)
        changed = self.processes.apply(records.procs)
        apply_lifecycle(self.timeline, self.workers, records.procs, records.envs)
        self.stacks.add(records.python)
        return changed

    def forget_exited(self, before_ns: int) -> list[int]:
        """Processes that exited before `before_ns` (monotonic) go from every table, so a long
        recording on a busy node stays bounded; returns their pids."""
        gone = self.processes.forget_exited(before_ns)
        self.timeline.forget(gone)
        self.workers.forget(gone)
        self.stacks.forget(gone)
        return gone
