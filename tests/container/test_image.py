"""The image as admins deploy it (issue 47): built from Debian's packages and PyPI, run by
podman as a DaemonSet runs it (the host's PID namespace, its root at /host, privileged), it
records the host's processes and a pod's container beside it, with their cgroup context, and
says in one line what a host that is not ready lacks."""

from __future__ import annotations

import gzip
import json
import socket
import subprocess
import sys
import tempfile
import urllib.request
import uuid
from pathlib import Path

import polars as pl
import pytest

from ioobserve.context.mounts import read_mounts
from ioobserve.data import schema as s
from ioobserve.trace.read.reader import load
from tests.container.podman import AGENT, HOST_ROOT, LIMITS, Detached, podman, private_dir
from tests.kernel.scratch_cgroups import scratch_cgroups
from tests.waiting import wait_until

pytestmark = pytest.mark.kernel

WRITES, READS = 7, 5
# Moves itself into a cgroup (when given one), then makes exactly these calls, and says so.
WORKLOAD = f"""
import json, os, sys
cgroup, path = sys.argv[1], sys.argv[2]
if cgroup:
    with open(os.path.join(cgroup, "cgroup.procs"), "w") as procs:
        procs.write(str(os.getpid()))
fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o600)
for _ in range({WRITES}):
    os.write(fd, b"x" * 512)
os.lseek(fd, 0, 0)
for _ in range({READS}):
    os.read(fd, 256)
os.close(fd)
print(json.dumps({{"pid": os.getpid()}}))
"""


def _recording(image: str, traces: Path) -> Detached:
    """`ioobserve record` of every process on the node, from the image, until stopped."""
    agent = Detached(image, *AGENT, *HOST_ROOT, "-v", f"{traces}:/traces", "--", "ioobserve", "record", "-o", "/traces")
    agent.wait_logged("recording to")
    return agent


def _stopped(agent: Detached, traces: Path) -> pl.DataFrame:
    status, out = agent.stop()
    assert status == 0, out
    found = sorted(traces.glob("*.pfw.gz"))
    assert len(found) == 1, (found, out)
    # Named by the node (the host's /etc/hostname under /host), not by the container's own name,
    # and its file systems are the host's, not the container's overlay root.
    assert found[0].name.startswith(f"{Path('/etc/hostname').read_text().strip()}-"), found[0].name
    host_root_fstype = [m.fstype for m in read_mounts() if m.mountpoint == "/"][-1]
    assert _mount_types(found[0])["/"] == host_root_fstype != "overlay"
    return load(found[0], progress=False)


def _mount_types(trace: Path) -> dict[str, str]:
    """Mount point -> file system type, from a trace's MT records."""
    with gzip.open(trace, "rt") as lines:
        records = [json.loads(line.rstrip(",\n")) for line in lines if '"name":"MT"' in line]
    return {record["args"]["name"]: record["args"]["value"] for record in records}


def _calls(events: pl.DataFrame, **where) -> dict[str, int]:
    mine = events.filter(pl.col(s.LAYER) == "SYSCALL", *(pl.col(k).cast(pl.String) == v for k, v in where.items()),
                         pl.col(s.OP).cast(pl.String).is_in(["write", "read"]))
    return dict(mine.group_by(pl.col(s.OP).cast(pl.String)).len().iter_rows())


def test_doctor_passes_inside_the_image(image):
    done = podman("run", "--rm", *AGENT, *HOST_ROOT, image, "ioobserve", "doctor", check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "recording can work here" in done.stdout


def test_without_the_hosts_headers_it_says_which_mounts_to_add_in_one_line(image):
    # No /host and no /usr/src: the image has no kernel headers of its own.
    done = podman("run", "--rm", *AGENT, image, "ioobserve", "record", "--duration", "1", check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("ioobserve: error: no kernel headers for ")
    assert "in a container, mount the host's /lib/modules and /usr/src" in done.stderr
    assert "IOOBSERVE_HOST_ROOT=/host" in done.stderr


def test_a_host_process_is_recorded_from_the_image_with_its_own_cgroup(image, tmp_path):
    relative = "system.slice/ioobserve-test-host.service"
    traces = private_dir(tmp_path, "traces")
    with scratch_cgroups(relative) as base:
        agent = _recording(image, traces)
        try:
            done = subprocess.run([sys.executable, "-c", WORKLOAD, str(base / relative), str(tmp_path / "data")],
                                  capture_output=True, text=True, timeout=60, check=True)
        finally:
            events = _stopped(agent, traces)
    pid = json.loads(done.stdout)["pid"]
    assert _calls(events, pid=str(pid), path=str(tmp_path / "data")) == {"write": WRITES, "read": READS}
    mine = events.filter(pl.col(s.PID) == pid, pl.col(s.OP).cast(pl.String) == "write")
    assert mine.get_column(s.CGROUP_PATH).cast(pl.String).unique().to_list() == [f"/{base.name}/{relative}"]
    assert mine.get_column(s.UNIT).cast(pl.String).unique().to_list() == ["ioobserve-test-host.service"]


def test_the_charts_capability_set_records_every_users_calls_and_stacks_without_privileges(image, tmp_path):
    """The chart's `capabilities` (privileged: false): another user's Python process is recorded
    exactly, with its Python stacks, and the recorder warns of nothing."""
    import shutil

    import yaml

    from tests.conftest import ROOT

    capabilities = yaml.safe_load((ROOT / "deploy" / "helm" / "ioobserve" / "values.yaml").read_text())["capabilities"]
    # not privileged: tracefs comes from the host as the chart's /sys mount gives it
    limited = ["--pid=host", *LIMITS, "--cap-drop=all", f"--cap-add={','.join('CAP_' + c for c in capabilities)}",
               "-v", "/sys/kernel/tracing:/sys/kernel/tracing"]
    traces = private_dir(tmp_path, "traces")
    work = Path(tempfile.mkdtemp(prefix="ioobserve-caps-", dir="/var/tmp"))  # reachable by nobody
    try:
        work.chmod(0o755)
        shutil.chown(work, "nobody")
        agent = Detached(image, *limited, *HOST_ROOT, "-v", f"{traces}:/traces", "--", "ioobserve", "record", "-o", "/traces")
        agent.wait_logged("recording to")
        try:
            done = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable, "-c",
                                   WORKLOAD, "", str(work / "data")], capture_output=True, text=True, timeout=60, check=True)
        finally:
            out = agent.logs()
            events = _stopped(agent, traces)
        pid = json.loads(done.stdout)["pid"]
        assert _calls(events, pid=str(pid), path=str(work / "data")) == {"write": WRITES, "read": READS}
        mine = events.filter((pl.col(s.PID) == pid) & (pl.col(s.PATH) == str(work / "data")) &
                             (pl.col(s.LAYER) == s.LAYER_SYSCALL))
        assert mine.get_column(s.USER).cast(pl.String).unique().to_list() == ["nobody"]
        assert mine.height >= WRITES + READS and mine.get_column(s.PY_FUNCTION).null_count() == 0, \
            "every call has its Python frame"
        assert "warning" not in out, out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_a_pods_container_beside_it_gets_the_pods_context_and_names(image, tmp_path):
    pod = str(uuid.uuid4())
    parent = f"/kubepods/besteffort/pod{pod}"  # kubelet's layout with the cgroupfs driver
    traces, data = private_dir(tmp_path, "traces"), private_dir(tmp_path, "data")
    agent = _recording(image, traces)
    try:
        container = _pod_container(image, parent, data)
    finally:
        events = _stopped(agent, traces)
        _remove_cgroups(parent)
    assert _calls(events, pod=pod, path="/data/file") == {"write": WRITES, "read": READS}  # as the container sees it
    mine = events.filter(pl.col(s.POD).cast(pl.String) == pod)
    named = {s.CONTAINER: container, s.NAMESPACE: "ml", s.POD_NAME: "train-0", s.CONTAINER_NAME: "loader"}
    for column, value in named.items():
        assert mine.get_column(column).cast(pl.String).unique().to_list() == [value], column


def _pod_container(image: str, parent: str, data: Path) -> str:
    """A container as kubelet starts a pod's through CRI-O: under the pod's cgroup, with the
    pod's names in its annotations (podman keeps its bundle where CRI-O does); it runs WORKLOAD
    on /data/file and is removed once it has ended. Its id."""
    names = [f"--annotation=io.kubernetes.{key}={value}" for key, value in
             (("pod.namespace", "ml"), ("pod.name", "train-0"), ("container.name", "loader"))]
    done = podman("run", "-d", *LIMITS, f"--cgroup-parent={parent}", *names, "-v", f"{data}:/data", image,
                  "python3", "-c", WORKLOAD, "", "/data/file")
    container = done.stdout.strip()
    status = podman("wait", container, timeout=120).stdout.strip()
    assert status == "0", podman("logs", container, check=False).stderr
    podman("rm", container)
    return container


def _metrics(port: int) -> dict:
    from prometheus_client.parser import text_string_to_metric_families

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def _value(metrics: dict, name: str, **labels: str) -> float:
    return sum(value for (sample, found), value in metrics.items() if sample == name and labels.items() <= dict(found).items())


def test_serve_in_the_image_labels_a_pods_io_with_its_names(image, tmp_path):
    pod = str(uuid.uuid4())
    parent = f"/kubepods/besteffort/pod{pod}"
    data = private_dir(tmp_path, "data")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    agent = Detached(image, *AGENT, *HOST_ROOT, "--network=host", "--", "ioobserve", "serve",
                     f"--listen=127.0.0.1:{port}", "--node=node-a")
    try:
        agent.wait_logged("metrics on")
        _pod_container(image, parent, data)
        # the data file's mount point: the workload's stdout (a pipe) is written to as well
        dev = data.stat().st_dev
        mount = next(m.mountpoint for m in read_mounts() if m.dev == dev)
        mine = {"job": pod, "namespace": "ml", "pod": "train-0", "node": "node-a", "layer": "syscall", "mountpoint": mount}

        def counted_reads() -> dict | None:
            metrics = _metrics(port)
            return metrics if _value(metrics, "ioobserve_calls_total", op="read", **mine) else None

        counted = wait_until(counted_reads, lambda: f"serve counted the pod's reads under {mine}: {agent.logs()}")
        assert _value(counted, "ioobserve_calls_total", op="write", **mine) == WRITES
        assert _value(counted, "ioobserve_write_bytes_total", op="write", **mine) == WRITES * 512
        # reads of 256 B or less: the workload's (the interpreter's own ask for whole files or 4 KiB)
        assert _value(counted, "ioobserve_request_size_bytes_bucket", op="read", le="256.0", **mine) == READS
    finally:
        status, out = agent.stop()
        _remove_cgroups(parent)
    assert status == 0 and "stopped" in out, out


def _remove_cgroups(parent: str) -> None:
    """podman leaves a container's parent cgroups behind in each hierarchy: remove the empty ones."""
    for hierarchy in Path("/sys/fs/cgroup").iterdir():
        path = hierarchy / parent.lstrip("/")
        while path != hierarchy and path.is_dir():
            try:
                path.rmdir()
            except OSError:
                break  # not empty: another pod's, or the machine's own
            path = path.parent
