/* ioobserve._core: the per-batch work that Python cannot do fast enough, called once per
 * batch with buffers in and one buffer out (README, "The compiled core"). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "core.h"

static PyMethodDef core_methods[] = {
    {"event_lines", core_event_lines, METH_VARARGS,
     "event_lines(order, columns, valid, ops, modules, precision_ns, file_prefix, template) -> "
     "(text, [(layer, shape, start, end, rows)], written_ts, pids): a batch's event lines by (layer, shape)."},
    {"parse_shape", core_parse_shape, METH_VARARGS,
     "parse_shape(text, tokens, kinds) -> (rows, columns): a member of event lines of one shape as columns "
     "(bytearrays of each field's width; strings as (codes, [distinct values])); ValueError naming the line."},
    {"lines_at", core_lines_at, METH_VARARGS,
     "lines_at(table, firstlineno, before_311, offsets) -> [line]: the line (-1: none) of each byte offset, "
     "from a CPython line table (3.10's format if before_311, else 3.11's)."},
    {"ring_committed", core_ring_committed, METH_O,
     "ring_committed(window) -> int: the bytes of a ring window that hold committed records."},
    {"aux_split", core_aux_split, METH_O,
     "aux_split(blob) -> ([record], python, names): a ring blob's records; the Python stack ones in a ring blob "
     "apart, the name records as columns (or None)."},
    {"match_names", core_match_names, METH_VARARGS,
     "match_names(event_tid, event_ts, name_tid, name_ts, name_index) -> (first, second, label, matched): "
     "each event's name records by index (int32 rows, -1: none), and which records an event matched."},
    {"rows_by_file", core_rows_by_file, METH_VARARGS,
     "rows_by_file(opened, kdev, kdev_valid, dev, ino, name_hash, name_valid) -> (which, firsts): a batch's rows "
     "grouped by the file they name (uint32 group per row, uint32 first row per group)."},
    {NULL, NULL, 0, NULL},
};

/* The record layout the compiled code reads, for a test to compare with events.py. */
static int add_layout(PyObject *module)
{
    static const struct { const char *name; long value; } layout[] = {
        {"AUX_PY_CHAIN", ev_AUX_PY_CHAIN}, {"AUX_PY_CODE", ev_AUX_PY_CODE}, {"PY_MAX_FRAMES", ev_PY_MAX_FRAMES},
        {"PY_TRUNCATED", ev_PY_TRUNCATED}, {"PY_NAME_BYTES", ev_PY_NAME_BYTES}, {"PY_FILE_BYTES", ev_PY_FILE_BYTES},
        {"PY_TABLE_BYTES", ev_PY_TABLE_BYTES}, {"chain.chain", CHAIN_AT_CHAIN}, {"chain.pid", CHAIN_AT_PID},
        {"chain.depth", CHAIN_AT_DEPTH}, {"chain.flags", CHAIN_AT_FLAGS}, {"chain.frames", CHAIN_FRAMES_AT},
        {"frame.itemsize", FRAME_BYTES}, {"frame.code", FRAME_AT_CODE}, {"frame.instr", FRAME_AT_INSTR},
        {"code.code", CODE_AT_CODE}, {"code.pid", CODE_AT_PID}, {"code.firstlineno", CODE_AT_FIRSTLINENO},
        {"code.name_len", CODE_AT_NAME_LEN}, {"code.file_len", CODE_AT_FILE_LEN}, {"code.table_len", CODE_AT_TABLE_LEN},
        {"code.name_kind", CODE_AT_NAME_KIND}, {"code.file_kind", CODE_AT_FILE_KIND}, {"code.version", CODE_AT_VERSION},
        {"code.pad", CODE_HEAD_BYTES}, {"code.name", CODE_AT_NAME}, {"code.file", CODE_AT_FILE},
        {"code.table", CODE_AT_TABLE}, {"ring.header", RING_HEADER_BYTES}, {"AUX_NAME", ev_AUX_NAME},
        {"NAME_LABEL", ev_NAME_LABEL}, {"name.ts_ns", NAME_AT_TS_NS}, {"name.base_ino", NAME_AT_BASE_INO},
        {"name.base_dev", NAME_AT_BASE_DEV}, {"name.tid", NAME_AT_TID}, {"name.index", NAME_AT_INDEX},
        {"name.len", NAME_AT_LEN}, {"name.itemsize", NAME_HEAD_BYTES},
    };
    PyObject *table = PyDict_New();
    for (size_t i = 0; table && i < sizeof layout / sizeof *layout; i++) {
        PyObject *value = PyLong_FromLong(layout[i].value);
        if (!value || PyDict_SetItemString(table, layout[i].name, value) < 0)
            Py_CLEAR(table);
        Py_XDECREF(value);
    }
    int added = table ? PyModule_AddObjectRef(module, "LAYOUT", table) : -1;
    Py_XDECREF(table);
    return added;
}

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT, "ioobserve._core", "The compiled per-batch core of ioobserve.", -1, core_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__core(void)
{
    PyObject *module = PyModule_Create(&core_module);
    if (module && (PyModule_AddIntConstant(module, "F_PARENT", CORE_F_PARENT) < 0 || add_layout(module) < 0
                   || PyType_Ready(&StacksType) < 0 || PyModule_AddObjectRef(module, "Stacks", (PyObject *)&StacksType) < 0))
        Py_CLEAR(module);
    return module;
}
