"""common.h and ioobserve/data/events.py describe the same bytes: compile the header and compare."""

from __future__ import annotations

import subprocess

import pytest

from ioobserve.data import events as ev
from tests.conftest import ROOT

STRUCTS = {
    "ioo_event": ev.EVENT,
    "ioo_syscall_spec": ev.SYSCALL_SPEC,
    "ioo_call_spec": ev.CALL_SPEC,
    "ioo_config": ev.CONFIG,
    "ioo_agg_key": ev.AGG_KEY,
    "ioo_agg_value": ev.AGG_VALUE,
    "ioo_file_key": ev.FILE_KEY,
    "ioo_lib_record": ev.LIB_RECORD,
    "ioo_py_layout": ev.PY_LAYOUT,
    "ioo_py_proc": ev.PY_PROC,
    "ioo_py_image": ev.PY_IMAGE,
    "ioo_py_frame": ev.PY_FRAME,
    "ioo_py_chain_record": ev.PY_CHAIN_RECORD,
    "ioo_py_code_record": ev.PY_CODE_RECORD,
    "ioo_sock_desc": ev.SOCK_DESC,
    "ioo_endpoint": ev.ENDPOINT,
}
FIXED_WITH_HEADER = {"ioo_lib_record", "ioo_py_chain_record", "ioo_py_code_record"}
HEADERS = {"ioo_head_record": ev.HEAD_RECORD, "ioo_path_record": ev.PATH_RECORD, "ioo_name_record": ev.NAME_RECORD, "ioo_proc_record": ev.PROC_RECORD,
           "ioo_env_record": ev.ENV_RECORD, "ioo_cgroup_record": ev.CGROUP_RECORD}


def _c_layout(tmp_path) -> dict[str, int]:
    lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "common.h"', "int main(void) {"]
    for struct, dtype in {**STRUCTS, **HEADERS}.items():
        lines.append(f'printf("{struct}.sizeof %zu\\n", sizeof(struct {struct}));')
        if struct in HEADERS:
            lines.append(f'printf("{struct}.data %zu\\n", offsetof(struct {struct}, data));')
        for field in dtype.names:
            c_field = {"kind": "hdr.kind", "size": "hdr.size"}.get(field, field) if struct in HEADERS or struct in FIXED_WITH_HEADER else field
            lines.append(f'printf("{struct}.{field} %zu\\n", offsetof(struct {struct}, {c_field}));')
    for name in ev.OP_NAMES[1:]:
        lines.append(f'printf("op.{name} %d\\n", IOO_OP_{name.upper()});')
    lines.append('printf("op.COUNT %d\\n", IOO_OP_COUNT);')
    lines.append('printf("const.ENV_BYTES %d\\n", IOO_ENV_BYTES);')
    lines.append('printf("const.AUX_KINDS %d\\n", IOO_AUX_KINDS);')
    lines.append('printf("const.AUX_ENV %d\\n", IOO_AUX_ENV);')
    lines.append('printf("const.AUX_LIB %d\\n", IOO_AUX_LIB);')
    lines.append('printf("const.CGROUP %d %d\\n", IOO_AUX_CGROUP, IOO_CGROUP_PATH_BYTES);')
    lines.append('printf("const.AGG %d %d %d\\n", IOO_AGG_LATENCY, IOO_AGG_SIZE, IOO_AGG_SLOTS);')
    lines.append('printf("const.LAYER_LIBS %d\\n", IOO_LAYER_LIBS);')
    lines.append('printf("const.NET %d %d %d\\n", IOO_LAYER_NET, IOO_S_MSGHDR, IOO_S_PEER_AT_EXIT);')
    lines.append('printf("const.TLS %d %d %d %d %d %d %d %d\\n", IOO_LIB_SSL, IOO_C_BIND_HANDLE, IOO_C_OUT_BYTES, '
                 'IOO_AUX_HEAD, IOO_HEAD_BYTES, IOO_F_HEAD, IOO_F_TLS_HELLO, IOO_F_ANSWER);')
    lines.append('printf("const.PYTHON %d %d %d %u %d %d %d %d %d %d\\n", IOO_LAYER_PYTHON, IOO_AUX_PY_CHAIN, IOO_AUX_PY_CODE, '
                 'IOO_PY_NO_FIELD, IOO_PY_LAYOUTS, IOO_PY_MAX_FRAMES, IOO_PY_LASTI, IOO_PY_TRUNCATED, IOO_PY_NAME_BYTES, '
                 'IOO_PY_TABLE_BYTES);')
    lines.append('printf("const.C_FLAGS %d %d %d %d %d %d %d %d %d %d\\n", IOO_C_RET_STREAM, IOO_C_RET_FD, IOO_C_RET_ITEMS, '
                 'IOO_C_RET_HANDLE, IOO_C_OUT_HANDLE, IOO_C_HANDLE_PTR, IOO_C_CLOSE_HANDLE, IOO_C_MPI_TYPE, IOO_C_KNOWN_HANDLE, IOO_C_RET_INT);')
    lines.append('printf("const.LIBS %d %d %d\\n", IOO_LIB_LIBC, IOO_LIB_HDF5, IOO_LIB_MPIIO);')
    lines.append('printf("const.PY_SAME %d %llu\\n", IOO_PY_SAME_SHIFT, (unsigned long long)IOO_PY_CHAIN_MASK);')
    lines.append("return 0; }")
    source = tmp_path / "layout.c"
    source.write_text("\n".join(lines))
    binary = tmp_path / "layout"
    subprocess.run(["cc", "-I", str(ROOT / "ebpf_probes"), "-o", str(binary), str(source)], check=True)
    out = subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout
    rows = (line.split() for line in out.splitlines())
    return {key: int(values[0]) if len(values) == 1 else tuple(map(int, values)) for key, *values in rows}


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    return _c_layout(tmp_path_factory.mktemp("layout"))


@pytest.mark.parametrize("struct", sorted(STRUCTS))
def test_fixed_records_match(layout, struct):
    dtype = STRUCTS[struct]
    assert dtype.itemsize == layout[f"{struct}.sizeof"]
    for field in dtype.names:
        assert dtype.fields[field][1] == layout[f"{struct}.{field}"], field


@pytest.mark.parametrize("struct", sorted(HEADERS))
def test_variable_record_headers_match(layout, struct):
    dtype = HEADERS[struct]
    for field in dtype.names:
        assert dtype.fields[field][1] == layout[f"{struct}.{field}"], field
    # the header dtype ends exactly where the variable data begins
    assert dtype.itemsize == layout[f"{struct}.data"]


def test_op_codes_match(layout):
    for code, name in enumerate(ev.OP_NAMES[1:], start=1):
        assert layout[f"op.{name}"] == code
    assert layout["op.COUNT"] == len(ev.OP_NAMES)
    assert len(ev.OP_NAMES) <= ev.MAX_OPS


def test_event_fields_are_naturally_aligned():
    assert ev.EVENT.itemsize % 8 == 0
    for name in ev.EVENT.names:
        field, offset = ev.EVENT.fields[name][:2]
        assert offset % min(field.alignment, 8) == 0, name


def test_constants_match(layout):
    assert layout["const.ENV_BYTES"] == ev.ENV_BYTES
    assert layout["const.AUX_KINDS"] == ev.AUX_KINDS
    assert layout["const.AUX_ENV"] == ev.AUX_ENV
    assert layout["const.AUX_LIB"] == ev.AUX_LIB
    assert layout["const.CGROUP"] == (ev.AUX_CGROUP, ev.CGROUP_PATH_BYTES)
    assert layout["ioo_cgroup_record.sizeof"] == ev.CGROUP_RECORD.itemsize + ev.CGROUP_PATH_BYTES
    assert layout["const.LAYER_LIBS"] == ev.LAYER_LIBS
    assert layout["const.NET"] == (ev.LAYER_NET, ev.S_MSGHDR, ev.S_PEER_AT_EXIT)
    assert layout["const.TLS"] == (ev.LIB_SSL, ev.C_BIND_HANDLE, ev.C_OUT_BYTES, ev.AUX_HEAD, ev.HEAD_BYTES, ev.F_HEAD,
                                   ev.F_TLS_HELLO, ev.F_ANSWER)
    assert layout["const.AGG"] == (ev.AGG_LATENCY, ev.AGG_SIZE, ev.AGG_SLOTS)
    assert layout["const.C_FLAGS"] == (ev.C_RET_STREAM, ev.C_RET_FD, ev.C_RET_ITEMS, ev.C_RET_HANDLE, ev.C_OUT_HANDLE,
                                       ev.C_HANDLE_PTR, ev.C_CLOSE_HANDLE, ev.C_MPI_TYPE, ev.C_KNOWN_HANDLE, ev.C_RET_INT)
    assert layout["const.LIBS"] == (ev.LIB_LIBC, ev.LIB_HDF5, ev.LIB_MPIIO)
    assert layout["const.PY_SAME"] == (ev.PY_SAME_SHIFT, ev.PY_CHAIN_MASK)
    assert layout["const.PYTHON"] == (ev.LAYER_PYTHON, ev.AUX_PY_CHAIN, ev.AUX_PY_CODE, ev.PY_NO_FIELD, ev.PY_LAYOUTS,
                                      ev.PY_MAX_FRAMES, ev.PY_LASTI, ev.PY_TRUNCATED, ev.PY_NAME_BYTES, ev.PY_TABLE_BYTES)
