"""The host as seen from a container through a mount of its root (IOOBSERVE_HOST_ROOT), on
fixture trees: paths followed inside it, bcc's kernel headers (the kernel's own, a Debian pair
merged), the cgroup v2 hierarchy, the node's name and its mounts."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from ioobserve.context import mounts
from ioobserve.plumbing.host import in_root, node_name
from ioobserve.probes.build import headers as h

RELEASE = "6.1.0-9-amd64"


def _debian_host(root: Path) -> None:
    """A host laid out as Debian lays out linux-headers-6.1.0-9-amd64: the flavour tree's scripts
    link relatively into linux-kbuild, and /lib/modules/RELEASE/build links absolutely to it."""
    common, flavour = root / "usr/src/linux-headers-6.1.0-9-common", root / f"usr/src/linux-headers-{RELEASE}"
    (common / "include/linux").mkdir(parents=True)
    (common / "include/linux/kconfig.h").write_text("/* kconfig */\n")
    (flavour / "include/generated").mkdir(parents=True)
    (flavour / "include/generated/autoconf.h").write_text("#define CONFIG_X 1\n")
    kbuild = root / "usr/lib/linux-kbuild-6.1/scripts"
    kbuild.mkdir(parents=True)
    (kbuild / "tool").write_text("kbuild's\n")
    os.symlink("../../lib/linux-kbuild-6.1/scripts", flavour / "scripts")
    (root / f"lib/modules/{RELEASE}").mkdir(parents=True)
    os.symlink(f"/usr/src/linux-headers-{RELEASE}", root / f"lib/modules/{RELEASE}/build")


def test_a_path_is_followed_inside_the_host_root(tmp_path):
    _debian_host(tmp_path)
    build = in_root(tmp_path, f"/lib/modules/{RELEASE}/build/scripts/tool")
    assert build == tmp_path / "usr/lib/linux-kbuild-6.1/scripts/tool"
    assert build.read_text() == "kbuild's\n"
    assert in_root(Path("/"), "/proc/self/..") == Path("/proc")


def test_a_symlink_loop_is_an_error_not_a_hang(tmp_path):
    os.symlink("/b", tmp_path / "a")
    os.symlink("/a", tmp_path / "b")
    with pytest.raises(OSError, match="symbolic links"):
        in_root(tmp_path, "/a/x")


def test_a_debian_pair_under_the_host_root_is_merged_with_links_inside_it(tmp_path, monkeypatch):
    monkeypatch.delenv("BCC_KERNEL_SOURCE", raising=False)
    host = tmp_path / "host"
    _debian_host(host)
    # Another kernel runs (no /lib/modules of its own): the pair is found under /usr/src.
    chosen = h.find_headers("6.18.0-test", cache_dir=tmp_path / "cache", root=host)
    assert chosen.path is not None and chosen.path.parent == tmp_path / "cache/kernel-headers"
    assert (chosen.path / "include/linux/kconfig.h").read_text() == "/* kconfig */\n"
    assert (chosen.path / "scripts/tool").read_text() == "kbuild's\n"
    assert os.readlink(chosen.path / "scripts").startswith(str(host))
    assert "not matching" in chosen.description


def test_the_kernels_own_build_tree_under_the_host_root_is_given_to_bcc(tmp_path, monkeypatch):
    monkeypatch.delenv("BCC_KERNEL_SOURCE", raising=False)
    _debian_host(tmp_path)
    flavour = tmp_path / f"usr/src/linux-headers-{RELEASE}"
    (flavour / "include/linux").mkdir(parents=True)
    (flavour / "include/linux/kconfig.h").write_text("/* its own */\n")
    chosen = h.find_headers(RELEASE, cache_dir=tmp_path / "cache", root=tmp_path)
    # bcc would follow the absolute link out of the host root: it gets the tree itself.
    assert (chosen.path, chosen.matching) == (flavour, True)


def test_no_headers_names_the_set_up_step_and_a_containers_mounts(tmp_path, monkeypatch):
    monkeypatch.delenv("BCC_KERNEL_SOURCE", raising=False)
    monkeypatch.setattr(h, "host_root", lambda: Path("/"))
    empty = tmp_path / "src"
    empty.mkdir()
    with pytest.raises(h.HeadersMissing) as raised:
        h.find_headers("0.0.0-none", usr_src=empty, cache_dir=tmp_path / "cache")
    message = str(raised.value)
    assert "run 'make setup'" in message and "in a container, mount the host's /lib/modules and /usr/src" in message
    assert "IOOBSERVE_HOST_ROOT=/host" in message and "\n" not in message


def test_no_headers_under_a_host_root_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.delenv("BCC_KERNEL_SOURCE", raising=False)
    with pytest.raises(h.HeadersMissing, match=f"under the host's root at {tmp_path}"):
        h.find_headers("0.0.0-none", cache_dir=tmp_path / "cache", root=tmp_path)


MOUNTINFO = """\
22 1 254:0 / / rw,relatime - ext4 /dev/vda rw
96 88 0:50 / /sys/fs/cgroup rw,nosuid - tmpfs tmpfs rw,mode=755
97 96 0:29 /libpod_parent/libpod-1 /sys/fs/cgroup/cpu rw,nosuid - cgroup cgroup rw,cpu
120 22 254:0 / /host ro,relatime - ext4 /dev/vda rw
131 120 0:27 / /host/sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw
140 96 0:27 /kubepods.slice/pod1 /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw
"""


def test_the_hosts_cgroup2_is_the_one_under_its_root(tmp_path):
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(MOUNTINFO)
    assert mounts.cgroup2_mount(str(mountinfo), host=Path("/host")) == Path("/host/sys/fs/cgroup/unified")
    assert mounts.cgroup2_mount(str(mountinfo), host=Path("/")) == Path("/host/sys/fs/cgroup/unified")  # the first
    assert mounts.cgroup2_mount(str(mountinfo), host=Path("/elsewhere")) is None


def test_the_node_is_named_by_the_variable_then_the_hosts_hostname_then_our_own(tmp_path, monkeypatch):
    """A DaemonSet names the node (IOOBSERVE_NODE); a container given the host's root takes the
    host's /etc/hostname, not its own name (its pod's, or its id)."""
    monkeypatch.delenv("IOOBSERVE_NODE", raising=False)
    monkeypatch.delenv("IOOBSERVE_HOST_ROOT", raising=False)
    assert node_name() == socket.gethostname()
    monkeypatch.setenv("IOOBSERVE_HOST_ROOT", str(tmp_path))
    assert node_name() == socket.gethostname()  # no /etc/hostname under that root
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/hostname").write_text("gpu-node-17\n")
    assert node_name() == "gpu-node-17"
    monkeypatch.setenv("IOOBSERVE_NODE", "k8s-node-a")
    assert node_name() == "k8s-node-a"


def test_the_nodes_mounts_are_inits_and_our_own_when_inits_cannot_be_read(tmp_path, monkeypatch):
    """A container's own root is an overlay; the trace's MT records must name the host's."""
    inits = tmp_path / "mountinfo"
    inits.write_text("22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
                     "30 22 0:52 / /scratch\\040space rw - lustre 10.0.0.1@tcp:/fs rw\n")
    monkeypatch.setattr(mounts, "NODE_MOUNTINFO", str(inits))
    assert [(m.mountpoint, m.fstype, m.major, m.minor) for m in mounts.node_mounts()] == [
        ("/", "ext4", 254, 0), ("/scratch space", "lustre", 0, 52)]
    monkeypatch.setattr(mounts, "NODE_MOUNTINFO", str(tmp_path / "absent"))
    assert mounts.node_mounts() == mounts.read_mounts()
