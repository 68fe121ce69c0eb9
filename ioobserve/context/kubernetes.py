"""A Kubernetes container's names: its pod's namespace and name and its own name, which no
cgroup path holds (it holds the pod's UID and the container's id). The container runtime
keeps them as annotations of the OCI bundle it made for the container; they are read from
there, under the host's root (IOOBSERVE_HOST_ROOT in a container), while the container lives.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from ioobserve.plumbing.host import host_root

# Where each runtime keeps a container's bundle, by its id.
BUNDLES = (
    "run/containerd/io.containerd.runtime.v2.task/k8s.io/{id}/config.json",  # containerd (CRI)
    "run/containers/storage/overlay-containers/{id}/userdata/config.json",  # CRI-O (its run root)
    "var/lib/containers/storage/overlay-containers/{id}/userdata/config.json",  # CRI-O and podman (graph root)
)
# Each name's annotation: kubelet's (CRI-O, podman) first, then containerd's CRI plugin's.
ANNOTATIONS = {
    "namespace": ("io.kubernetes.pod.namespace", "io.kubernetes.cri.sandbox-namespace"),
    "pod_name": ("io.kubernetes.pod.name", "io.kubernetes.cri.sandbox-name"),
    "container_name": ("io.kubernetes.container.name", "io.kubernetes.cri.container-name"),
}
MAX_BUNDLE_BYTES = 4 << 20  # a config.json is a few KiB; a bigger file is not one
_CONTAINER_ID = re.compile(r"[0-9a-f]{12,64}")  # the only ids put into a path


@dataclass(frozen=True)
class PodNames:
    """A container's Kubernetes names (None: its runtime did not say)."""

    namespace: str | None
    pod_name: str | None
    container_name: str | None


def pod_names(container_id: str, root: Path | None = None) -> PodNames | None:
    """The names the runtime gave this container, or None if no bundle of it is found (not a
    Kubernetes container, gone already, or a runtime whose bundles live elsewhere)."""
    if not _CONTAINER_ID.fullmatch(container_id):
        return None
    root = root or host_root()
    for layout in BUNDLES:
        annotations = _annotations(root / layout.format(id=container_id))
        if annotations is not None:
            found = {name: next((annotations[key] for key in keys if isinstance(annotations.get(key), str)), None)
                     for name, keys in ANNOTATIONS.items()}
            return PodNames(**found) if any(found.values()) else None
    return None


def _annotations(path: Path) -> dict | None:
    try:
        with open(path, "rb") as bundle:
            raw = bundle.read(MAX_BUNDLE_BYTES + 1)
        config = json.loads(raw) if len(raw) <= MAX_BUNDLE_BYTES else None
    except (OSError, ValueError):
        return None
    annotations = config.get("annotations") if isinstance(config, dict) else None
    return annotations if isinstance(annotations, dict) else None
