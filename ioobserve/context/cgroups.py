"""cgroup v2 ids to their paths, and the job context a path names: Slurm job/step/task
(cgroup v1 and v2 layouts), Kubernetes pod and container, systemd unit, container ids of
Docker, containerd, CRI-O and podman.

The kernel stamps every event with the v2 cgroup id of its task, which is the inode number
of the cgroup's directory under the v2 mount. The table learns ids by walking that mount:
once at start, and again whenever an event names an id it has not seen, so a job's first
I/O is already tagged; and from the probes' record of each cgroup made (`learn`), so a
container that is gone before a walk could find it is named too. Ids are never reused, so
what was learned stays true.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import polars as pl

from ioobserve import schema as s
from ioobserve.context.kubernetes import pod_names
from ioobserve.model import CgroupContext, parse_cgroup_path
from ioobserve.probes.kernel import cgroup2_mount

RETRY_UNKNOWN_S = 1.0  # an id still unknown after a walk is looked for again after this

def cgroup_context(path: str) -> CgroupContext:
    """What a cgroup's path says, with a Kubernetes container's names from its runtime."""
    context = parse_cgroup_path(path)
    names = pod_names(context.container) if context.container else None
    return dataclasses.replace(context, **dataclasses.asdict(names)) if names else context


class CgroupTable:
    """cgroup id -> CgroupContext for the v2 hierarchy, learned by walking its mount."""

    def __init__(self, mount: Path | None = None):
        self.mount = mount if mount is not None else cgroup2_mount()
        self.by_id: dict[int, CgroupContext] = {}  # also cgroups removed since: late events still name them
        self._present: set[int] = set()  # the ids the last walk found
        self._unknown_since: dict[int, float] = {}
        self.walks = 0
        if self.mount is not None:
            self.walk()

    def walk(self) -> None:
        """Learn every cgroup that exists now."""
        if self.mount is None:
            return
        self.walks += 1
        root = str(self.mount)
        todo, present = [root], set()
        while todo:
            directory = todo.pop()
            try:
                ino = os.stat(directory).st_ino
                entries = list(os.scandir(directory))
            except OSError:  # removed while we walked
                continue
            path = directory[len(root):] or "/"
            known = self.by_id.get(ino)
            if known is None or known.path != path:  # new, or an id given again to another cgroup
                self.by_id[ino] = cgroup_context(path)
            present.add(ino)
            todo += [entry.path for entry in entries if entry.is_dir(follow_symlinks=False)]
        self._present = present

    def learn(self, made) -> None:
        """Take in the cgroups the probes saw made (decode.CgroupRecord: id and path); a path
        cut short by the probes is left to the walk."""
        for record in made:
            if not record.truncated:
                self.by_id[record.id] = cgroup_context(record.path or "/")
                self._unknown_since.pop(record.id, None)

    def lookup(self, ids) -> dict[int, CgroupContext]:
        """Context of each id known or found by a fresh walk; ids still unknown are left out."""
        wanted = {int(i) for i in ids}
        missing = wanted - self.by_id.keys()
        now = time.monotonic()
        if any(now - self._unknown_since.get(i, -RETRY_UNKNOWN_S) >= RETRY_UNKNOWN_S for i in missing):
            self.walk()
            for i in missing - self.by_id.keys():
                self._unknown_since[i] = now
        return {i: self.by_id[i] for i in wanted if i in self.by_id}

    def gone(self, ids) -> set[int]:
        """Of these known ids, those whose cgroup has been removed (ids never learned are not judged)."""
        if self.mount is None:
            return set()
        return {i for i in ids if i in self.by_id and not (self.mount / self.by_id[i].path.lstrip("/")).is_dir()}

    def forget(self, ids) -> None:
        """Drop these ids (cgroups that are gone and dealt with), so a long-running table stays bounded."""
        for i in ids:
            self.by_id.pop(i, None)
            self._unknown_since.pop(i, None)

    def ids_where(self, keep) -> set[int]:
        """Ids of the cgroups that exist, whose context satisfies `keep` and whose parent's does
        not: the tops of the matching subtrees (the kernel filter also selects what is below).
        A removed job's step is no top: its entry is still known, its cgroup is gone."""
        self.walk()
        tops = set()
        matching = {ctx.path: i for i, ctx in self.by_id.items() if i in self._present and keep(ctx)}
        for path, i in matching.items():
            parent = path.rsplit("/", 1)[0] or "/"
            if parent == path or parent not in matching:
                tops.add(i)
        return tops


def context_frame(contexts: dict[int, CgroupContext]) -> pl.DataFrame:
    """A row per cgroup: its id and the columns of schema.CGROUP_CONTEXT_SCHEMA."""
    rows = [(i, c.path, c.job, c.step, c.task, c.unit, c.container, c.pod, c.namespace, c.pod_name, c.container_name)
            for i, c in contexts.items()]
    return pl.DataFrame(rows, schema={s.CGROUP: pl.UInt64, **s.CGROUP_CONTEXT_SCHEMA}, orient="row")
