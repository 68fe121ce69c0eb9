"""The filter options shared by the commands, and their validation into kernel maps."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from ioobserve.cli.errors import UserError
from ioobserve.context.mounts import cgroup2_mount
from ioobserve.context.tags import TAG_DIR
from ioobserve.data import events as ev
from ioobserve.probes.maps.filters import KernelFilters

PidOption = Annotated[Optional[list[int]], typer.Option("--pid", help="Trace this process and all its descendants (repeatable).")]
CgroupOption = Annotated[
    Optional[list[str]],
    typer.Option("--cgroup", help="Trace tasks in this cgroup v2 or below it: a path under the cgroup2 mount, or relative to it (repeatable)."),
]
JobOption = Annotated[
    Optional[list[str]],
    typer.Option("--job", help="Trace this Slurm job (all its steps and tasks, including ones started later; repeatable)."),
]
UnitOption = Annotated[
    Optional[list[str]],
    typer.Option("--unit", help="Trace this systemd unit, e.g. slurmd.service or session-3.scope (repeatable)."),
]
PodOption = Annotated[
    Optional[list[str]],
    typer.Option("--pod", help="Trace this Kubernetes pod running on this node, by UID or NAMESPACE/NAME (all its containers, "
                 "including ones started later; repeatable)."),
]
NamespaceOption = Annotated[
    Optional[list[str]],
    typer.Option("--namespace", help="Trace the Kubernetes pods of this namespace running on this node now (repeatable)."),
]
CommOption = Annotated[Optional[list[str]], typer.Option("--comm", help="Trace processes with this exact command name (repeatable).")]
PrefixOption = Annotated[
    Optional[list[Path]],
    typer.Option("--path-prefix", help="Trace only files under this existing directory or file (repeatable, at most 7)."),
]
LayersOption = Annotated[
    Optional[str],
    typer.Option("--layers", help="Layers to add to the defaults (syscall, io_uring, aio, block, cache, python), comma-separated: "
                 "libc, hdf5, mpiio, vfs, all; no-NAME leaves one out. E.g. --layers libc or --layers libc,no-cache."),
]
PyStacksOption = Annotated[
    Optional[str],
    typer.Option("--py-stacks", help="Python stacks of traced calls: auto (default: every call but those made inside an "
                 "import, which the import's event names), all, N (one call in N per thread, imports left out) or off."),
]
PyDepthOption = Annotated[
    Optional[int],
    typer.Option("--py-depth", help=f"Python frames walked per call, 1 to {ev.PY_MAX_FRAMES} (default 16; "
                 f"{ev.PY_MAX_FRAMES} with --layers net or tls)."),
]


def split_layers(text: str | None) -> tuple[frozenset[str], dict[str, str]]:
    """The layers of --layers this kernel can give, and why it cannot give the others."""
    from ioobserve.probes import layers as ly

    try:
        layers = ly.parse_layers(text)
    except ly.LayerError as exc:
        raise UserError(str(exc)) from exc
    missing: dict[str, str] = {}
    libraries = [layer for layer in ly.LIBRARY_LAYERS if layer in layers]
    if libraries:
        from ioobserve.probes.kernel.features import uprobes_available

        if not uprobes_available():
            missing.update(dict.fromkeys(libraries, "this kernel has no uprobes (CONFIG_UPROBE_EVENTS)"))
    if ly.VFS in layers:
        from ioobserve.probes.capabilities import vfs_available

        mechanism, why = vfs_available()
        if mechanism is None:
            missing[ly.VFS] = why
    return layers - set(missing), missing


def build_layers(text: str | None) -> frozenset[str]:
    """The layers of --layers, refusing one this kernel cannot give (with the reason)."""
    layers, missing = split_layers(text)
    if missing:
        reasons = "; ".join(sorted(set(missing.values())))
        raise UserError(f"--layers {','.join(missing)}: {reasons} "
                        "(run 'ioobserve doctor'; the syscall layer still sees every call)")
    return layers


def build_python(stacks: str | None, depth: int | None, layers: frozenset[str]):
    """The layers and Python stack options of --py-stacks and --py-depth."""
    from ioobserve.probes import layers as ly
    from ioobserve.probes.attach.python import PythonOptions

    options = PythonOptions()
    if depth is None and layers & {ly.NET, ly.TLS}:
        # Object-storage clients call deep: botocore's caller is 21 frames above the socket's send.
        options = PythonOptions(depth=ev.PY_MAX_FRAMES)
    if depth is not None:
        if not 1 <= depth <= ev.PY_MAX_FRAMES:
            raise UserError(f"--py-depth {depth}: must be between 1 and {ev.PY_MAX_FRAMES}")
        options = PythonOptions(depth=depth)
    choice = (stacks or "auto").strip().lower()
    if choice == "off":
        return layers - {ly.PYTHON}, options
    if choice == "auto":
        return layers, options
    if choice == "all":
        return layers, PythonOptions(depth=options.depth, walk_imports=True)
    if not choice.isdigit() or int(choice) < 1:
        raise UserError(f"--py-stacks {stacks}: expected auto, all, off or a number N (walk one traced call in N per thread)")
    return layers, PythonOptions(depth=options.depth, sample=int(choice))


def _kernel_dev(st_dev: int) -> int:
    return (os.major(st_dev) << 20) | os.minor(st_dev)


def _cgroup_id(spec: str) -> int:
    root = cgroup2_mount()
    if root is None:
        raise UserError("--cgroup needs cgroup v2, which is not mounted here")
    path = Path(spec)
    candidates = [path] if path.is_absolute() else [root / path]
    if path.is_absolute() and root not in path.parents and path != root:
        candidates.append(root / spec.lstrip("/"))
    for candidate in candidates:
        if candidate.is_dir() and (candidate == root or root in candidate.parents):
            return candidate.stat().st_ino  # a cgroup v2 id is its directory's inode number
    raise UserError(f"cgroup {spec!r} not found under {root}")


def _context_cgroups(jobs: list[str], units: list[str], pods: list[str] = (), namespaces: list[str] = ()) -> set[int]:
    """cgroup ids at the tops of the given jobs', units' and pods' subtrees; the kernel filter
    selects everything below them, including cgroups created later."""
    from ioobserve.context.cgroups import CgroupTable

    table = CgroupTable()
    if table.mount is None:
        raise UserError("--job, --unit, --pod and --namespace need cgroup v2, which is not mounted here")
    ids: set[int] = set()
    for job in jobs:
        if not job.isdigit():
            raise UserError(f"--job {job!r}: a Slurm job id is a number")
        found = table.ids_where(lambda ctx, job=job: ctx.job == job)
        if not found:
            raise UserError(f"--job {job}: no cgroup of this job under {table.mount} (is it running on this node?)")
        ids |= found
    for unit in units:
        if not unit or "/" in unit:
            raise UserError(f"--unit {unit!r}: a unit name such as slurmd.service or session-3.scope")
        names = {unit, f"{unit}.service"}
        found = table.ids_where(lambda ctx, names=names: ctx.path.rsplit("/", 1)[-1] in names)
        if not found:
            raise UserError(f"--unit {unit}: no cgroup of this unit under {table.mount} (see systemctl status)")
        ids |= found
    for pod in pods:
        ids |= _pod_cgroups(table, f"--pod {pod}", _pod_uids(table, pod))
    for namespace in namespaces:
        if not namespace or "/" in namespace:
            raise UserError(f"--namespace {namespace!r}: a Kubernetes namespace's name, such as default")
        uids = {ctx.pod for ctx in table.by_id.values() if ctx.namespace == namespace and ctx.pod}
        ids |= _pod_cgroups(table, f"--namespace {namespace}", uids)
    return ids


def _pod_uids(table, pod: str) -> set[str]:
    """The UIDs a --pod value names: itself, or those of the pods named NAMESPACE/NAME."""
    namespace, slash, name = pod.partition("/")
    if not slash:
        return {pod}
    if not namespace or not name or "/" in name:
        raise UserError(f"--pod {pod!r}: a pod's UID, or NAMESPACE/NAME")
    return {ctx.pod for ctx in table.by_id.values() if (ctx.namespace, ctx.pod_name) == (namespace, name) and ctx.pod}


def _pod_cgroups(table, option: str, uids: set[str]) -> set[int]:
    found = table.ids_where(lambda ctx: ctx.pod in uids) if uids else set()
    if not found:
        raise UserError(f"{option}: no pod of it runs on this node (its cgroups are not under {table.mount}; "
                        "a name is known only from the container runtime's records)")
    return found


def build_filters(pids: list[int] | None, cgroups: list[str] | None, comms: list[str] | None,
                  prefixes: list[Path] | None, jobs: list[str] | None = None, units: list[str] | None = None,
                  pods: list[str] | None = None, namespaces: list[str] | None = None) -> KernelFilters:
    """Check what the user asked for and turn it into map contents; raises UserError."""
    filters = KernelFilters()
    for pid in pids or []:
        if pid <= 0 or not Path(f"/proc/{pid}").is_dir():
            raise UserError(f"--pid {pid}: no such process")
        filters.pids.add(pid)
    filters.filter_pid = bool(filters.pids)
    filters.cgroup_ids = {_cgroup_id(spec) for spec in cgroups or []}
    if jobs or units or pods or namespaces:
        filters.cgroup_ids |= _context_cgroups(jobs or [], units or [], pods or [], namespaces or [])
    for comm in comms or []:
        if not comm or len(comm.encode()) > ev.COMM_LEN - 1:
            raise UserError(f"--comm {comm!r}: a command name is 1 to {ev.COMM_LEN - 1} bytes (as in /proc/PID/comm)")
        filters.comms.add(comm)
    if len(prefixes or []) > ev.MAX_PREFIXES - 1:  # one slot keeps application tags visible
        raise UserError(f"--path-prefix: at most {ev.MAX_PREFIXES - 1} prefixes")
    for prefix in prefixes or []:
        try:
            real = prefix.resolve(strict=True)
            st = real.stat()
        except (OSError, RuntimeError):
            raise UserError(f"--path-prefix {prefix}: no such file or directory") from None
        if len(str(real).encode()) >= ev.PREFIX_LEN:
            raise UserError(f"--path-prefix {prefix}: longer than {ev.PREFIX_LEN - 1} bytes")
        filters.prefixes.append(str(real))
        filters.prefix_dirs.add((_kernel_dev(st.st_dev), st.st_ino))
    if filters.prefixes:
        filters.prefixes.append(TAG_DIR)  # a tag path never exists: matched as a string only
    return filters
