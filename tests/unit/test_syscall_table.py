"""The syscall table: every spec names a real op and fits the kernel's argument slots."""

from __future__ import annotations

import pytest

from ioobserve import events as ev
from ioobserve.probes.syscall_table import (FUNCTION_PREFIX, NUMBERS, SPECS, UnsupportedArchitecture, spec_array,
                                              traced_functions)


def test_every_op_has_a_spec_and_specs_are_sane():
    # the syscall layer's ops: the first run, and the syscalls of asynchronous I/O
    syscall_ops = {*ev.OP_NAMES[1:ev.FIRST_BLOCK_OP], *ev.OP_NAMES[ev.FIRST_ASYNC_SYSCALL_OP:ev.FIRST_URING_OP]}
    assert {spec.op for spec in SPECS} == syscall_ops
    for spec in SPECS:
        for index in (spec.fd, spec.path, spec.dirfd, spec.count, spec.offset, spec.aux, spec.buf, spec.fd2, spec.path2):
            assert -1 <= index <= 5, spec
        if spec.flags & ev.S_IOV:
            assert spec.count >= 1  # the iovec pointer sits just before the count


@pytest.mark.parametrize("arch", sorted(NUMBERS))
def test_spec_array_places_ops_at_their_numbers(arch):
    table = spec_array(arch)
    for name, nr in NUMBERS[arch].items():
        assert ev.OP_NAMES[table[nr]["op"]] == name
    assert (table["op"] != 0).sum() == len(NUMBERS[arch])


def test_unknown_architecture_is_refused():
    with pytest.raises(UnsupportedArchitecture):
        spec_array("pdp11")


@pytest.mark.parametrize("arch", sorted(NUMBERS))
def test_each_traced_syscall_names_its_kernel_function(arch):
    functions = traced_functions(arch)
    assert len(functions) == len(NUMBERS[arch]) == len(set(functions))
    assert all(name.startswith(FUNCTION_PREFIX[arch]) for name in functions)
    if arch == "x86_64":  # entry points named unlike their syscalls
        assert {"__x64_sys_newstat", "__x64_sys_newfstatat", "__x64_sys_sendfile64", "__x64_sys_pread64"} <= set(functions)
    assert traced_functions("pdp11") == []
