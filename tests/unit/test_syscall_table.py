"""The syscall table: every spec names a real op and fits the kernel's argument slots."""

from __future__ import annotations

import pytest

from ioobserve import events as ev
from ioobserve.probes.syscall_table import NUMBERS, SPECS, UnsupportedArchitecture, spec_array


def test_every_op_has_a_spec_and_specs_are_sane():
    assert {spec.op for spec in SPECS} == set(ev.OP_NAMES[1:ev.FIRST_BLOCK_OP])  # the rest are block requests
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
