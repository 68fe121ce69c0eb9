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

from ioobserve.context.kubernetes import pod_names
from ioobserve.context.mounts import cgroup2_mount
from ioobserve.data.model import CgroupContext, parse_cgroup_path

RETRY_UNKNOWN_S = 1.0  # an id still unknown after a walk is looked for again after this

MAX_KEPT_NAMES = 4096  # containers whose runtime's names are kept, the latest (a bound for months of pods)
_UNREAD = object()


def cgroup_context(path: str, names: dict | None = None) -> CgroupContext:
    """What a cgroup's path says, with a Kubernetes container's names from its runtime (those
    kept in `names` by container id, read ahead; else read now)."""
    context = parse_cgroup_path(path)
    if not context.container:
        return context
    found = names.get(context.container, _UNREAD) if names is not None else _UNREAD  # one lookup: the reader may evict
    if found is _UNREAD:
        found = pod_names(context.container)
    return dataclasses.replace(context, **dataclasses.asdict(found)) if found else context


class CgroupTable:
    """cgroup id -> CgroupContext for the v2 hierarchy, learned by walking its mount."""

    def __init__(self, mount: Path | None = None):
        self.mount = mount if mount is not None else cgroup2_mount()
        self.by_id: dict[int, CgroupContext] = {}  # also cgroups removed since: late events still name them
        self._present: set[int] = set()  # the ids the last walk found
        self._unknown_since: dict[int, float] = {}
        self._names: dict[str, object] = {}  # container id -> kubernetes.PodNames (or None), read ahead
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
                self.by_id[ino] = cgroup_context(path, self._names)
            present.add(ino)
            todo += [entry.path for entry in entries if entry.is_dir(follow_symlinks=False)]
        self._present = present
        self._name_pods()

    def read_names_ahead(self, made) -> None:
        """Read the runtime's names of the containers whose cgroups the probes saw made, now
        (the collector's reader, ahead of the events): a short-lived pod's bundle is gone once
        the runtime removes the container, seconds before a busy recorder's worker learns the
        cgroup. Only this dict is written here, so the worker's table needs no lock."""
        for record in made:
            container = parse_cgroup_path(record.path or "/").container
            if container and container not in self._names:
                if len(self._names) >= MAX_KEPT_NAMES:
                    self._names.pop(next(iter(self._names)))
                self._names[container] = pod_names(container)

    def learn(self, made) -> None:
        """Take in the cgroups the probes saw made (decode.CgroupRecord: id and path); a path
        cut short by the probes is left to the walk."""
        for record in made:
            if not record.truncated:
                self.by_id[record.id] = cgroup_context(record.path or "/", self._names)
                self._unknown_since.pop(record.id, None)
        self._name_pods()

    def _name_pods(self) -> None:
        """Give a pod's own cgroup (kubepods/…/pod<uid>, above its containers') the namespace and
        name its containers' bundles gave: it has no bundle, and its CG record and any I/O
        charged to it should name the pod as its containers' do."""
        names = {c.pod: (c.namespace, c.pod_name) for c in self.by_id.values() if c.pod and c.pod_name}
        for i, c in self.by_id.items():
            if c.pod in names and c.container is None and c.pod_name is None:
                namespace, pod_name = names[c.pod]
                self.by_id[i] = dataclasses.replace(c, namespace=namespace, pod_name=pod_name)

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
