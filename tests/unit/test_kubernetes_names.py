"""A Kubernetes container's names from its runtime's OCI bundle, on fixture roots laid out as
containerd's CRI plugin and CRI-O (and podman) lay them out; anything else gives no names."""

from __future__ import annotations

import json

import pytest

from ioobserve.context import kubernetes as k
from ioobserve.context.cgroups import CgroupTable, cgroup_context

CID = "3f4b8c2a9d1e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c"
POD = "8e1d2c3b-4a5f-6e7d-8c9b-0a1b2c3d4e5f"


def _bundle(root, layout: str, annotations) -> None:
    path = root / layout.format(id=CID)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"ociVersion": "1.0.2", "annotations": annotations}))


def test_containerds_cri_annotations_name_the_container(tmp_path):
    _bundle(tmp_path, k.BUNDLES[0], {"io.kubernetes.cri.sandbox-namespace": "ml", "io.kubernetes.cri.sandbox-name": "train-0",
                                     "io.kubernetes.cri.container-name": "loader", "io.kubernetes.cri.container-type": "container"})
    assert k.pod_names(CID, tmp_path) == k.PodNames("ml", "train-0", "loader")


@pytest.mark.parametrize("layout", k.BUNDLES[1:])
def test_cri_o_and_podman_annotations_name_the_container(tmp_path, layout):
    _bundle(tmp_path, layout, {"io.kubernetes.pod.namespace": "ml", "io.kubernetes.pod.name": "train-0",
                                     "io.kubernetes.container.name": "loader"})
    assert k.pod_names(CID, tmp_path) == k.PodNames("ml", "train-0", "loader")


def test_no_bundle_or_a_bad_one_gives_no_names(tmp_path):
    assert k.pod_names(CID, tmp_path) is None  # not a Kubernetes container, or gone
    _bundle(tmp_path, k.BUNDLES[1], {"org.opencontainers.image.title": "x"})
    assert k.pod_names(CID, tmp_path) is None  # a plain container: no Kubernetes annotations
    (tmp_path / k.BUNDLES[1].format(id=CID)).write_text("{not json")
    assert k.pod_names(CID, tmp_path) is None
    (tmp_path / k.BUNDLES[1].format(id=CID)).write_bytes(b" " * (k.MAX_BUNDLE_BYTES + 1))
    assert k.pod_names(CID, tmp_path) is None


def test_only_a_container_id_is_put_into_a_path(tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "config.json").write_text(json.dumps({"annotations": {"io.kubernetes.pod.name": "x"}}))
    assert k.pod_names("../../../../../etc", tmp_path) is None
    assert k.pod_names("abc", tmp_path) is None


def test_a_cgroups_context_carries_the_names(tmp_path, monkeypatch):
    _bundle(tmp_path, k.BUNDLES[0], {"io.kubernetes.cri.sandbox-namespace": "ml", "io.kubernetes.cri.sandbox-name": "train-0",
                                     "io.kubernetes.cri.container-name": "loader"})
    monkeypatch.setattr(k, "host_root", lambda: tmp_path)
    context = cgroup_context(f"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{POD.replace('-', '_')}.slice/"
                             f"cri-containerd-{CID}.scope")
    assert (context.pod, context.container) == (POD, CID)
    assert (context.namespace, context.pod_name, context.container_name) == ("ml", "train-0", "loader")
    assert cgroup_context("/system.slice/sshd.service").namespace is None


def test_a_pods_own_cgroup_takes_the_names_of_its_containers(tmp_path, monkeypatch):
    """The pod's cgroup has no bundle; once a container of it is known, it is named too."""
    _bundle(tmp_path, k.BUNDLES[0], {"io.kubernetes.cri.sandbox-namespace": "ml", "io.kubernetes.cri.sandbox-name": "train-0",
                                     "io.kubernetes.cri.container-name": "loader"})
    monkeypatch.setattr(k, "host_root", lambda: tmp_path)
    pod = tmp_path / "cgroup" / "kubepods" / "besteffort" / f"pod{POD}"
    (pod / CID).mkdir(parents=True)
    (tmp_path / "cgroup" / "kubepods" / "besteffort" / "pod11111111-2222-3333-4444-555555555555").mkdir()
    table = CgroupTable(tmp_path / "cgroup")
    by_path = {c.path: c for c in table.by_id.values()}
    pods_own = by_path[f"/kubepods/besteffort/pod{POD}"]
    assert (pods_own.pod, pods_own.container, pods_own.namespace, pods_own.pod_name) == (POD, None, "ml", "train-0")
    assert pods_own.container_name is None
    other = by_path["/kubepods/besteffort/pod11111111-2222-3333-4444-555555555555"]
    assert (other.namespace, other.pod_name) == (None, None)  # no container of it is known: no names


def test_names_read_ahead_outlive_the_bundle(tmp_path, monkeypatch):
    """The collector's reader reads a new container's names as its cgroup is made; the runtime
    may remove the bundle before the worker learns the cgroup, whose names stay."""
    from ioobserve.data.decode import CgroupRecord

    _bundle(tmp_path, k.BUNDLES[0], {"io.kubernetes.cri.sandbox-namespace": "ml", "io.kubernetes.cri.sandbox-name": "train-0",
                                     "io.kubernetes.cri.container-name": "loader"})
    monkeypatch.setattr(k, "host_root", lambda: tmp_path)
    (tmp_path / "cgroup").mkdir()
    table = CgroupTable(tmp_path / "cgroup")
    made = [CgroupRecord(id=4242, ts_ns=1, path=f"/kubepods/besteffort/pod{POD}/{CID}", truncated=False)]
    table.read_names_ahead(made)
    (tmp_path / k.BUNDLES[0].format(id=CID)).unlink()  # the short-lived container removed
    table.learn(made)
    context = table.by_id[4242]
    assert (context.container, context.namespace, context.pod_name, context.container_name) == (CID, "ml", "train-0", "loader")
