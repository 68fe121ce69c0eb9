"""The start record every trace of record, top and serve begins with: its keys declared once,
those a recorder does not give left out."""

from __future__ import annotations

import os

from ioobserve import __version__
from ioobserve.collect.traces import StartRecord
from ioobserve.plumbing.host import node_name
from ioobserve.probes.maps.filters import KernelFilters

COMMON = {"host", "kernel", "ioobserve", "command", "recorder_pid", "layers"}


def test_a_bare_start_record_has_the_common_keys_only():
    fields = StartRecord(["ioobserve", "top"], {"syscall", "block"}).fields()
    assert set(fields) == COMMON
    assert fields["host"] == node_name() and fields["kernel"] == os.uname().release
    assert (fields["ioobserve"], fields["recorder_pid"]) == (__version__, os.getpid())
    assert (fields["command"], fields["layers"]) == (["ioobserve", "top"], ["block", "syscall"])


def test_filters_a_job_and_python_stacks_are_said_when_given():
    filters = KernelFilters(pids={9, 3}, cgroup_ids={5}, comms={"python3"}, prefixes=["/data"], excluded_devs=set())
    fields = StartRecord(["train.py"], {"python"}, filters, job="81234", python_stacks={"depth": 8, "sample": 1}).fields()
    assert set(fields) == COMMON | {"filters", "job", "python_stacks"}
    assert fields["filters"] == {"pid": [3, 9], "cgroup_ids": [5], "comm": ["python3"], "path_prefix": ["/data"]}
    assert (fields["job"], fields["python_stacks"]) == ("81234", {"depth": 8, "sample": 1})
