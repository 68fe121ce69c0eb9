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
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT, "ioobserve._core", "The compiled per-batch core of ioobserve.", -1, core_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__core(void)
{
    PyObject *module = PyModule_Create(&core_module);
    if (module && PyModule_AddIntConstant(module, "F_PARENT", CORE_F_PARENT) < 0)
        Py_CLEAR(module);
    return module;
}
