"""The IO_URING and AIO layers: fio's io_uring and libaio jobs, recorded system-wide by
`ioobserve record`, are traced request for request and byte for byte as fio itself counts
them; each request belongs to fio's job process, lasts a positive time inside the job's
life, and names the io_uring_enter or io_submit that submitted it as its parent. The jobs
recorded with the same filter run one after another under one recorder."""

from __future__ import annotations

import json
import os
import shutil
import shlex
from pathlib import Path

import polars as pl
import pytest

from ioobserve.data import events as ev
from ioobserve.data import schema as s
from ioobserve.trace.read.reader import load
from tests.kernel.kernel_side import ran
from tests.kernel.recorder import record_command

pytestmark = pytest.mark.matrix  # also run in each guest of the kernel matrix

BLOCK_SIZE = 4096
FILE_SIZE = 4 << 20
REQUESTS = 256
DEPTH = 8
PATH, COMM = "path", "comm"
# (id, ioengine and its options, rw, layer, the ops its requests must have, the filter recorded with)
JOBS = [
    ("uring-randread", ["--ioengine=io_uring"], "randread", s.LAYER_IO_URING, {"read", "readv"}, None),
    ("uring-randwrite", ["--ioengine=io_uring"], "randwrite", s.LAYER_IO_URING, {"write", "writev"}, PATH),
    ("uring-fixed-randread", ["--ioengine=io_uring", "--fixedbufs=1", "--registerfiles=1"], "randread",
     s.LAYER_IO_URING, {"read_fixed"}, PATH),
    ("uring-fixed-randwrite", ["--ioengine=io_uring", "--fixedbufs=1", "--registerfiles=1"], "randwrite",
     s.LAYER_IO_URING, {"write_fixed"}, None),
    # the SQPOLL thread is named iou-sqp-PID: a comm filter asks about the ring's owner
    ("uring-sqpoll-randread", ["--ioengine=io_uring", "--sqthread_poll=1"], "randread", s.LAYER_IO_URING,
     {"read", "readv"}, COMM),
    ("uring-sqpoll-randwrite", ["--ioengine=io_uring", "--sqthread_poll=1"], "randwrite", s.LAYER_IO_URING,
     {"write", "writev"}, PATH),
    ("libaio-randread", ["--ioengine=libaio", "--direct=1"], "randread", s.LAYER_AIO, {"pread"}, COMM),
    ("libaio-randwrite", ["--ioengine=libaio", "--direct=1"], "randwrite", s.LAYER_AIO, {"pwrite"}, PATH),
]
SUBMITTED_BY = {s.LAYER_IO_URING: "io_uring_enter", s.LAYER_AIO: "io_submit"}


def _lay_out(directory: Path) -> Path:
    """fio's file in `directory` (on a block-device file system: libaio's --direct=1 needs
    O_DIRECT, and /tmp may be tmpfs), laid out before the recording."""
    directory.mkdir()
    with open(directory / "data", "wb") as data:
        data.write(os.urandom(FILE_SIZE))
        # On disk before fio starts: its invalidation drops only clean pages, and reads served
        # by dirty ones take under a microsecond, a duration the trace's µs round to 0.
        os.fsync(data.fileno())
        os.posix_fadvise(data.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    return directory / "data"


def _record_fio_jobs(side, recorded_filter: str | None) -> dict:
    """The jobs of JOBS recorded with this filter, one after another under one recorder (a
    recorder's start and stop cost most of a test under emulation): per job, fio's JSON
    report (the job's, and when fio wrote it: "timestamp_ms") and its file; and the directory
    all their files are in, which a path filter names."""
    fio = shutil.which("fio")
    if fio is None:
        pytest.fail("fio is missing: make setup installs it")
    jobs = [job for job in JOBS if job[5] == recorded_filter]
    prefix = Path("/var/tmp") / f"ioobserve-async-{os.getpid()}-{side.scratch.name}"
    prefix.mkdir()
    try:
        commands, files = [], {}
        for name, engine, rw, *_ in jobs:
            files[name] = _lay_out(prefix / name)
            commands.append([fio, f"--name={name}", f"--filename={files[name]}", f"--size={FILE_SIZE}",
                             f"--bs={BLOCK_SIZE}", *engine, f"--rw={rw}", f"--iodepth={DEPTH}",
                             f"--io_size={REQUESTS * BLOCK_SIZE}", "--randrepeat=0", "--output-format=json",
                             f"--output={side.scratch / name}.json"])
        options = {PATH: ("--path-prefix", str(prefix)), COMM: ("--comm", "fio"), None: ()}[recorded_filter]
        script = " && ".join(shlex.join(command) for command in commands)
        done = record_command(side.out / "trace", ["sh", "-c", script], *options)
        reports = {name: json.loads((side.scratch / f"{name}.json").read_text()) for name, *_ in jobs
                   if (side.scratch / f"{name}.json").exists()}
    finally:
        shutil.rmtree(prefix)
    return ran(done) | {"prefix": str(prefix), "files": files, "reports": reports}


@pytest.mark.kernel
@pytest.mark.parametrize("name, engine, rw, layer, ops, recorded_filter", JOBS, ids=[job[0] for job in JOBS])
def test_fio_requests_are_traced_exactly(root_required, kernel_side, name, engine, rw, layer, ops, recorded_filter):
    recorded = kernel_side(_record_fio_jobs, recorded_filter, share=True)
    done = recorded.done()
    assert done.returncode == 0, done.stderr
    data = recorded["files"][name]
    report = recorded["reports"][name]
    job = {**report["jobs"][0], "timestamp_ms": report["timestamp_ms"]}
    frame = load(recorded.traces())
    side = job["read"] if rw == "randread" else job["write"]
    assert side["total_ios"] == REQUESTS and side["io_bytes"] == REQUESTS * BLOCK_SIZE, side  # fio did what was asked

    requests = frame.filter((pl.col(s.LAYER) == layer) & (pl.col(s.PATH) == data))
    assert set(requests.get_column(s.OP).cast(pl.String).unique()) <= ops, requests.get_column(s.OP).unique()
    assert requests.height == side["total_ios"]
    assert requests.get_column(s.BYTES).sum() == side["io_bytes"]
    assert requests.get_column(s.BYTES_REQ).sum() == side["io_bytes"]
    assert (requests.get_column(s.RET) == BLOCK_SIZE).all()
    offsets = requests.get_column(s.OFFSET)
    assert ((offsets >= 0) & (offsets < FILE_SIZE) & (offsets % BLOCK_SIZE == 0)).all()
    assert requests.filter(pl.col(s.LAYER) != layer).height == 0
    if recorded_filter == PATH:  # nothing outside the prefix but calls that name no file
        assert frame.filter(pl.col(s.PATH).is_not_null() & ~pl.col(s.PATH).cat.starts_with(recorded["prefix"])).height == 0
    if recorded_filter == COMM:
        assert set(frame.get_column(s.COMM).unique()) == {"fio"}

    # fio's job process (forked by the fio command), its one thread: not the SQPOLL thread
    pids = requests.get_column(s.PID).unique()
    assert pids.len() == 1
    job_pid = pids.item()
    job_events = frame.filter(pl.col(s.PID) == job_pid)
    parent = job_events.get_column(s.PPID).drop_nulls().unique()
    assert parent.len() == 1 and parent.item() != job_pid
    assert frame.filter(pl.col(s.PID) == parent.item()).get_column(s.COMM).unique().to_list() == ["fio"]  # fio's main process
    assert set(requests.get_column(s.TID).unique()) == {job_pid}
    assert set(requests.get_column(s.COMM).unique()) == {"fio"}

    # each lasts a positive time inside the job's life: from its process's first call to fio's
    # report, written once the job ended (in whole ms: one more allowed)
    calls = job_events.filter(pl.col(s.LAYER) == s.LAYER_SYSCALL)
    first, last = job_events.get_column(s.TS).min(), (job["timestamp_ms"] + 1) * 1_000_000
    assert (requests.get_column(s.DUR) > 0).all()
    assert (requests.get_column(s.TS) >= first).all() and ((requests.get_column(s.TS) + requests.get_column(s.DUR)) <= last).all()
    assert (requests.get_column(s.DUR) < last - first).all()

    # the call that submitted each one is its parent; a SQPOLL thread's requests have none
    submitters = calls.filter(pl.col(s.OP) == SUBMITTED_BY[layer]).select(s.TID, pl.col(s.TS).alias(s.PARENT_TS))
    sqpoll = "--sqthread_poll=1" in engine
    if sqpoll:
        assert requests.get_column(s.PARENT_TS).null_count() == requests.height
        assert ((requests.get_column(s.FLAGS) & ev.F_SQPOLL) != 0).all()
    else:
        assert requests.join(submitters, on=[s.TID, s.PARENT_TS], how="anti").height == 0
    if layer == s.LAYER_IO_URING:
        ring_fds = requests.get_column(s.ARG).unique()
        assert ring_fds.len() == 1 and ring_fds.item() < 1024  # one ring, named by its descriptor
        fixed = "--registerfiles=1" in engine or sqpoll  # fio registers its files for SQPOLL
        assert ((requests.get_column(s.FLAGS) & ev.F_FIXED) != 0).all() == fixed
