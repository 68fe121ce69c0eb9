"""Block requests the recording could not attribute: submitted before it began and issued
during it, they are in no process's I/O, and each is counted (block_no_origin in the summary
and the end record). Not in the kernel matrix: it needs a loop device and FUSE."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ioobserve.trace.read.reader import own_records
from tests.kernel.faulty_mounts import faulty_fs
from tests.kernel.recorder import IOOBSERVE, STOP
from tests.waiting import wait_until


# Writes each in a thread of its own, O_DIRECT, WRITE_BYTES at every other WRITE_BYTES of
# the device (no two adjacent: none merges), until each has returned.
HELD_WRITES = """
import mmap, os, sys, threading
device, count = sys.argv[1], int(sys.argv[2])
fd = os.open(device, os.O_WRONLY | os.O_DIRECT)
buffer = mmap.mmap(-1, 4096)
def write(i):
    try:
        os.pwrite(fd, buffer, i * 8192)
    except OSError:
        pass
threads = [threading.Thread(target=write, args=(i,)) for i in range(count)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
"""


def _sleeping(pid: int) -> int:
    """Threads of `pid` in uninterruptible sleep (state D)."""
    found = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += (task / "stat").read_text().rsplit(")", 1)[1].split()[0] == "D"
        except OSError:  # ended meanwhile
            pass
    return found


@pytest.mark.kernel
def test_requests_issued_with_no_origin_are_counted(root_required, tmp_path):
    """Requests submitted before the recording and issued during it have no origin: none is in
    the trace, and each is counted (block_no_origin), exactly. A loop device over a FUSE file
    whose writes hang holds its driver's tags' worth of writes issued, the rest waiting in its
    scheduler; the recording starts, the FUSE connection is aborted, and the waiting ones are
    issued and fail."""
    with faulty_fs("--hang-after-bytes", "0") as fs:
        backing = fs.point / "disk.img"
        backing.touch()
        os.truncate(backing, 4 << 20)  # no write: every write to it hangs
        device = subprocess.run(["losetup", "--find", "--show", str(backing)], capture_output=True, text=True,
                                check=True).stdout.strip()
        queue = Path("/sys/block") / Path(device).name
        writers = None
        try:
            (queue / "queue" / "scheduler").write_text("mq-deadline")  # waiting requests are allocated (noted) there
            tags = int((queue / "mq" / "0" / "nr_tags").read_text())
            writes = tags + 20
            (queue / "queue" / "nr_requests").write_text(str(2 * tags))  # room in the scheduler for them all
            writers = subprocess.Popen([sys.executable, "-c", HELD_WRITES, device, str(writes)])
            # the driver's tags' worth issued, and every writer asleep in its write: the rest are
            # in the scheduler (it has room for them all, so none waits for a tag)
            wait_until(lambda: (queue / "inflight").read_text().split() == ["0", str(tags)]
                       and _sleeping(writers.pid) == writes,
                       lambda: f"{tags} writes issued on {device} ({(queue / 'inflight').read_text().split()}), "
                               f"{writes} writers asleep ({_sleeping(writers.pid)})")
            recorder = subprocess.Popen([IOOBSERVE, "record", "-o", str(tmp_path / "trace"), *STOP, "--all",
                                         "--layers", "syscall,block", "--", "cat"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            while "recording to" not in (line := recorder.stderr.readline()):
                assert line, recorder.communicate()[1]
            fs.abort()  # the held writes fail; the waiting ones are issued now, and fail
            writers.wait(timeout=120)
            wait_until(lambda: (queue / "inflight").read_text().split() == ["0", "0"], f"{device} idle")
            out, err = recorder.communicate(input="", timeout=300)
            assert recorder.returncode == 0, err
        finally:
            if writers is not None and writers.poll() is None:
                fs.abort()
                writers.kill()
            subprocess.run(["losetup", "-d", device], check=False)
    traces = sorted((tmp_path / "trace").glob("*.pfw.gz"))
    end = own_records(traces[-1], "end")[-1]["args"]
    assert end["lost"].get("block_no_origin") == writes - tags, end["lost"]
    assert f"block_no_origin {writes - tags}" in " ".join(out.split()), out
