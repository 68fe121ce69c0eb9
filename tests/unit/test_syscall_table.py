"""The syscall table: every spec names a real op and fits the kernel's argument slots."""

from __future__ import annotations

import pytest

from ioobserve.data import events as ev
from ioobserve.probes.kernel.syscall_table import (FUNCTION_PREFIX, NUMBERS, SPECS, UnsupportedArchitecture, spec_array,
                                                   traced_functions)


def test_every_op_has_a_spec_and_specs_are_sane():
    # the syscall layer's ops: the first run, and the syscalls of asynchronous I/O
    syscall_ops = {*ev.OP_NAMES[1:ev.FIRST_BLOCK_OP], *ev.OP_NAMES[ev.FIRST_ASYNC_SYSCALL_OP:ev.FIRST_URING_OP]}
    net_ops = set(ev.OP_NAMES[ev.FIRST_NET_OP:ev.FIRST_TLS_OP])
    assert {spec.op for spec in SPECS if not spec.net_only} == syscall_ops
    assert {spec.op for spec in SPECS if spec.net_only} | {spec.net_op for spec in SPECS if spec.net_op} == net_ops
    for spec in SPECS:
        assert spec.net_op in net_ops | {""} and (not spec.net_only or spec.net_op == spec.op), spec
        for index in (spec.fd, spec.path, spec.dirfd, spec.count, spec.offset, spec.aux, spec.buf, spec.fd2, spec.path2):
            assert -1 <= index <= 5, spec
        if spec.flags & ev.S_IOV:
            assert spec.count >= 1  # the iovec pointer sits just before the count


@pytest.mark.parametrize("arch", sorted(NUMBERS))
def test_spec_array_places_ops_at_their_numbers(arch):
    table = spec_array(arch, net=True)
    for name, nr in NUMBERS[arch].items():
        assert ev.OP_NAMES[table[nr]["op"]] == name
    assert (table["op"] != 0).sum() == len(NUMBERS[arch])
    assert ev.OP_NAMES[table[NUMBERS[arch]["read"]]["net_op"]] == "net_read"


@pytest.mark.parametrize("arch", sorted(NUMBERS))
def test_without_the_net_layer_sockets_have_no_rows_and_no_net_ops(arch):
    table = spec_array(arch)
    net_only = {spec.op for spec in SPECS if spec.net_only}
    assert all(table[NUMBERS[arch][name]]["op"] == 0 for name in net_only)
    assert (table["net_op"] == 0).all()
    assert (table["op"] != 0).sum() == len(NUMBERS[arch]) - len(net_only)
    assert len(traced_functions(arch, net=False)) == len(NUMBERS[arch]) - len(net_only)


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


def test_fentry_leaves_the_socket_syscalls_alone_without_the_net_layer():
    from ioobserve.probes import layers as ly
    from ioobserve.probes.attach.syscall import SyscallEntry, SyscallLayer
    from ioobserve.probes.kernel.program_kind import RAW
    from ioobserve.probes.kernel.syscall_table import machine_arch

    entry = SyscallEntry("fentry", RAW, RAW)
    prefix = FUNCTION_PREFIX[machine_arch()]
    left_out = SyscallLayer(entry, ly.DEFAULT)._left_out
    assert {f"{prefix}recvfrom", f"{prefix}connect"} <= left_out
    assert not left_out & set(traced_functions(net=False))  # the file syscalls, and a stand-in's points, stay
    assert SyscallLayer(entry, ly.parse_layers("net"))._left_out == frozenset()
