"""`serve` when a job trace's disk fills: the daemon says so in its log, its metrics and its
socket go on answering, and the job's recording resumes in a new file once there is room."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from ioobserve.data import schema as s
from ioobserve.trace.read.reader import load, own_records
from tests.kernel.faulty_mounts import fill, small_tmpfs
from tests.kernel.serve_support import JOB, READS, WRITES, Service, metric_value, run_workload
from tests.waiting import wait_until

CALLS = 300_000
# Moves itself into the job's cgroup, then reads its file in 64-byte preads CALLS times.
FLOOD = f"""
import json, os, sys
cgroup, path = sys.argv[1], sys.argv[2]
with open(os.path.join(cgroup, "cgroup.procs"), "w") as procs:
    procs.write(str(os.getpid()))
with open(path, "wb") as handle:
    handle.write(b"x" * 4096)
fd = os.open(path, os.O_RDONLY)
for _ in range({CALLS}):
    os.pread(fd, 64, 0)
print(json.dumps({{"pid": os.getpid()}}))
"""


def _stream_answers(path: Path) -> str:
    with socket.socket(socket.AF_UNIX) as client:
        client.settimeout(30)
        client.connect(str(path))
        client.sendall(b"stream\n")
        return client.makefile().readline().strip()


def _job_calls(traces: Path, pid: int, ops: tuple[str, ...] = ("read", "write")) -> int:
    """How many of these calls of `pid` the job's trace files hold."""
    parts = sorted((traces / f"job-{JOB}").glob("*.pfw.gz"))
    if not parts:
        return 0
    return load(parts).filter((pl.col(s.PID) == pid) & pl.col(s.OP).is_in(list(ops))).height


@pytest.mark.kernel
def test_a_full_disk_under_a_job_trace_leaves_the_service_up_and_the_job_resumes(job_cgroup, tmp_path):
    with small_tmpfs("16m") as disk:
        service = Service(disk, "--record-job", JOB, "--flood-limit", "0")  # every call of the flood sent
        try:
            filler = fill(disk, leave=512 << 10)
            done = subprocess.run([sys.executable, "-c", FLOOD, str(job_cgroup), str(tmp_path / "f")],
                                  capture_output=True, text=True, timeout=300, check=True)
            pid = json.loads(done.stdout)["pid"]
            full = service.logged(f"job {JOB}: cannot write")
            assert "No space left on device (ENOSPC)" in full and str(disk) in full, full
            metrics = service.metrics()  # still serving, and still counting in the kernel
            assert metric_value(metrics, "ioobserve_calls_total", op="pread64", job=JOB) == CALLS
            assert _stream_answers(service.socket) == "ok streaming"
            filler.unlink()
            runs: list[int] = []  # the job goes on working; what it does before the daemon looks again is lost

            def a_run_recorded() -> bool:
                runs.append(run_workload(job_cgroup, tmp_path / f"after-{len(runs)}.bin"))
                return any(_job_calls(service.traces, run) == WRITES + READS for run in runs)

            wait_until(a_run_recorded, lambda: f"the job's calls after room came back in a new part; log: {service.lines}")
            service.logged(f"job {JOB}: writing again, in ")
        finally:
            out = service.stop()
        assert "Traceback" not in out, out
        # How much of the flood landed before the disk filled depends on how the writer's
        # members fell (none, on a fast machine); what did not land is counted in the end record.
        kept = _job_calls(service.traces, pid, ("pread64",))
        parts = (service.traces / f"job-{JOB}").glob("*.pfw.gz")
        (end,) = [r for part in parts for r in own_records(part, "end") if "recording_events" in r["args"]]  # the last
        assert kept < CALLS <= kept + end["args"]["lost"]["unwritten"], (kept, end)
