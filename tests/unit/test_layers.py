"""Pure logic of the multi-layer capture: --layers, the call table, symbol aliases,
tracepoint formats, and the layer of each op."""

from __future__ import annotations

import pytest

from ioobserve.collect.enrich import _LAYERS
from ioobserve.data import events as ev
from ioobserve.data import schema as s
from ioobserve.probes import layers as ly
from ioobserve.probes.attach.uprobes import HDF5_FILE, LIBC_FILE, MPI_FILE, TLS_FILE, resolve_calls
from ioobserve.probes.kernel.tracepoint_format import FILEMAP_ADD, READAHEAD, TracepointFields, parse_format
from ioobserve.probes.maps.call_table import HDF5, LIBC, MPIIO, TLS, call_spec_array

FILEMAP_FORMAT = """name: mm_filemap_add_to_page_cache
ID: 600
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:unsigned long pfn;\toffset:8;\tsize:8;\tsigned:0;
\tfield:unsigned long i_ino;\toffset:16;\tsize:8;\tsigned:0;
\tfield:unsigned long index;\toffset:24;\tsize:8;\tsigned:0;
\tfield:dev_t s_dev;\toffset:32;\tsize:4;\tsigned:0;
\tfield:unsigned char order;\toffset:36;\tsize:1;\tsigned:0;
\tfield:char comm[16];\toffset:40;\tsize:16;\tsigned:0;
"""


def test_layers_add_to_the_defaults_and_remove_with_no():
    assert ly.parse_layers(None) == ly.DEFAULT
    assert ly.parse_layers("libc") == ly.DEFAULT | {ly.LIBC}
    assert ly.parse_layers("libc, no-cache") == {ly.SYSCALL, ly.IO_URING, ly.AIO, ly.BLOCK, ly.PYTHON, ly.LIBC}
    assert ly.parse_layers("no-io_uring,no-aio") == {ly.SYSCALL, ly.BLOCK, ly.CACHE, ly.PYTHON}
    assert ly.parse_layers("all,no-vfs") == set(ly.KNOWN) - {ly.VFS}
    assert ly.parse_layers("hdf5,mpiio") == ly.DEFAULT | {ly.HDF5, ly.MPIIO}
    assert ly.parse_layers("net") == ly.DEFAULT | {ly.NET}
    assert ly.parse_layers("tls") == ly.DEFAULT | {ly.TLS, ly.NET}  # its sockets and frames come from the net layer
    assert ly.NET not in ly.DEFAULT and ly.TLS not in ly.DEFAULT


@pytest.mark.parametrize("text", ["libcc", "no-syscall", "hdf"])
def test_layers_refused(text):
    with pytest.raises(ly.LayerError, match="--layers"):
        ly.parse_layers(text)


def test_library_layers_refused_without_uprobes(monkeypatch):
    """A kernel without uprobes: one clear line naming the layers, before anything starts."""
    from ioobserve.cli.errors import UserError
    from ioobserve.cli.filters import build_layers
    from ioobserve.probes.kernel import features as kernel

    monkeypatch.setattr(kernel, "uprobes_available", lambda: False)
    with pytest.raises(UserError, match=r"--layers libc,hdf5: this kernel has no uprobes"):
        build_layers("hdf5,libc")
    assert build_layers("no-cache") == {ly.SYSCALL, ly.IO_URING, ly.AIO, ly.BLOCK, ly.PYTHON}  # the others need none


def test_each_op_has_one_layer():
    layer = dict(enumerate(_LAYERS.to_list()))
    assert layer[ev.OP_CODES["pread64"]] == s.LAYER_SYSCALL
    assert layer[ev.OP_CODES["block_write"]] == s.LAYER_BLOCK
    assert layer[ev.OP_CODES["readahead"]] == s.LAYER_CACHE
    assert layer[ev.OP_CODES["fwrite"]] == s.LAYER_STDIO
    assert layer[ev.OP_CODES["posix_pread"]] == s.LAYER_POSIX
    assert ev.OP_LABELS[ev.OP_CODES["posix_pread"]] == "pread"
    assert layer[ev.OP_CODES["vfs_fsync"]] == s.LAYER_VFS
    assert {layer[ev.OP_CODES[spec.op]] for spec in HDF5} == {s.LAYER_HDF5}
    assert {layer[ev.OP_CODES[spec.op]] for spec in MPIIO} == {s.LAYER_MPIIO}
    assert {layer[ev.OP_CODES[spec.op]] for spec in TLS} == {s.LAYER_TLS}
    assert {layer[code] for code in range(ev.FIRST_NET_OP, ev.FIRST_TLS_OP)} == {s.LAYER_NET}
    assert ev.OP_LABELS[ev.OP_CODES["net_read"]] == "read" and ev.OP_LABELS[ev.OP_CODES["SSL_read"]] == "SSL_read"
    assert layer[len(ev.OP_NAMES)] == s.LAYER_SYSCALL  # an op code from a newer probe: not MPI-IO
    assert len(ev.OP_NAMES) < ev.MAX_OPS


def test_call_table_rows():
    table = call_spec_array()
    fwrite = table[ev.OP_CODES["fwrite"]]
    assert (fwrite["library"], fwrite["stream_arg"], fwrite["count_arg"], fwrite["size_arg"]) == (ev.LIB_LIBC, 3, 2, 1)
    assert fwrite["flags"] == ev.C_RET_ITEMS
    assert table[ev.OP_CODES["posix_open"]]["flags"] == ev.C_RET_FD | ev.C_RET_INT
    assert table[ev.OP_CODES["read"]]["library"] == 0  # syscalls are not library calls
    assert table[ev.OP_CODES["posix_close"]]["flags"] == ev.C_RET_INT  # int: the upper register half is noise
    specs = LIBC + HDF5 + MPIIO + TLS
    assert len({spec.op for spec in specs}) == len(specs)
    # Every library op of the enum has a row, and only those.
    assert {ev.OP_NAMES[op] for op in range(ev.MAX_OPS) if table[op]["library"]} == {spec.op for spec in specs}


def test_library_handles_name_their_files():
    """HDF5 ids and MPI_File handles carry their file from the call that opened them."""
    table = call_spec_array()
    row = {op: table[ev.OP_CODES[op]] for op in ("H5Fopen", "H5Dopen2", "H5Dwrite", "H5Idec_ref",
                                                  "MPI_File_open", "MPI_File_close", "MPI_File_write_at_all")}
    assert row["H5Fopen"]["flags"] & ev.C_RET_HANDLE and row["H5Fopen"]["handle_arg"] == -1
    assert row["H5Dopen2"]["flags"] & ev.C_RET_HANDLE and row["H5Dopen2"]["handle_arg"] == 0
    assert row["H5Dwrite"]["handle_arg"] == 0 and row["H5Dwrite"]["library"] == ev.LIB_HDF5
    assert row["H5Idec_ref"]["flags"] & ev.C_KNOWN_HANDLE and row["H5Idec_ref"]["flags"] & ev.C_CLOSE_HANDLE
    assert row["MPI_File_open"]["flags"] & ev.C_OUT_HANDLE and row["MPI_File_open"]["handle_arg"] == 4
    assert row["MPI_File_close"]["flags"] & ev.C_HANDLE_PTR
    write_at_all = row["MPI_File_write_at_all"]  # (fh, offset, buf, count, datatype, status)
    assert (write_at_all["offset_arg"], write_at_all["count_arg"], write_at_all["size_arg"]) == (1, 3, 4)
    assert write_at_all["flags"] & ev.C_MPI_TYPE and write_at_all["library"] == ev.LIB_MPIIO


def test_aliases_are_probed_once_under_the_first_op():
    symbols = [(b"open64", 0x100), (b"open", 0x100), (b"__write", 0x200), (b"write", 0x200), (b"fopen", 0x300),
               (b"fopen64", 0x300), (b"unrelated", 0x400)]
    assert resolve_calls(symbols, LIBC) == {0x100: "posix_open", 0x200: "posix_write", 0x300: "fopen"}


def test_libc_file_names():
    assert LIBC_FILE.match("libc.so.6") and LIBC_FILE.match("libc-2.31.so")
    assert not LIBC_FILE.match("libcrypt.so.1") and not LIBC_FILE.match("libc.so.6.bak")


@pytest.mark.parametrize("name", ["libhdf5.so.310", "libhdf5_serial.so.103.3.0", "libhdf5-9e18f0c6.so.320.0.0",
                                  "libhdf5_mpich.so.103"])
def test_hdf5_file_names(name):
    assert HDF5_FILE.match(name)


@pytest.mark.parametrize("name", ["libhdf5_hl-69da89c9.so.320.0.0", "libhdf5_cpp.so.310", "libhdf5.so.310.py"])
def test_not_hdf5_file_names(name):
    assert not HDF5_FILE.match(name)


def test_tls_file_names():
    assert TLS_FILE.match("libssl.so.3") and TLS_FILE.match("libssl.so.1.1") and TLS_FILE.match("libssl-1b2c3d4e.so.3")
    assert not TLS_FILE.match("libssl3.so") and not TLS_FILE.match("libcrypto.so.3")


def test_ssl_calls_name_their_socket_through_set_fd():
    table = call_spec_array()
    set_fd, read_ex = table[ev.OP_CODES["SSL_set_fd"]], table[ev.OP_CODES["SSL_read_ex"]]
    assert set_fd["flags"] & ev.C_BIND_HANDLE and (set_fd["handle_arg"], set_fd["fd_arg"]) == (0, 1)
    assert read_ex["flags"] & ev.C_OUT_BYTES and read_ex["aux_arg"] == 3 and read_ex["library"] == ev.LIB_SSL


def test_mpi_file_names():
    assert MPI_FILE.match("libmpich.so.12.2.2") and MPI_FILE.match("libmpi.so.40") and MPI_FILE.match("libmpi.so.12")
    assert not MPI_FILE.match("libmpichcxx.so.12") and not MPI_FILE.match("libmpi_cxx.so.40")


def test_tracepoint_format_offsets(tmp_path):
    assert parse_format(FILEMAP_FORMAT)["comm"] == (40, 16)
    event = tmp_path / "events" / "filemap" / "mm_filemap_add_to_page_cache"
    event.mkdir(parents=True)
    (event / "format").write_text(FILEMAP_FORMAT)
    assert FILEMAP_ADD.offsets(tmp_path) == {
        "TP_FILEMAP_ADD_I_INO": 16, "TP_FILEMAP_ADD_INDEX": 24, "TP_FILEMAP_ADD_S_DEV": 32, "TP_FILEMAP_ADD_ORDER": 36,
    }
    # An older kernel without `order`: optional, so -1; a required field missing: no layer.
    (event / "format").write_text(FILEMAP_FORMAT.replace("order", "other"))
    assert FILEMAP_ADD.offsets(tmp_path)["TP_FILEMAP_ADD_ORDER"] == -1
    (event / "format").write_text(FILEMAP_FORMAT.replace("i_ino", "inode"))
    assert FILEMAP_ADD.offsets(tmp_path) is None
    assert READAHEAD.offsets(tmp_path) is None  # absent tracepoints
    assert TracepointFields("X", ("filemap/mm_filemap_add_to_page_cache",), {"s_dev": 8}).offsets(tmp_path) is None


def test_network_layers_walk_the_deepest_python_stacks_unless_told():
    """Object-storage clients call deep (botocore's caller is 21 frames up): 32 frames by default there."""
    from ioobserve.cli.filters import build_python

    assert build_python(None, None, ly.DEFAULT)[1].depth == 16
    assert build_python(None, None, ly.parse_layers("tls"))[1].depth == ev.PY_MAX_FRAMES
    assert build_python(None, 8, ly.parse_layers("net"))[1].depth == 8
