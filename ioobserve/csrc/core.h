/* The compiled core's functions, one file each, gathered by module.c into ioobserve._core. */
#ifndef IOOBSERVE_CORE_H
#define IOOBSERVE_CORE_H

#include <Python.h>

#define CORE_F_PARENT 0x200 /* events.F_PARENT: exported as _core.F_PARENT, compared by a test */

PyObject *core_event_lines(PyObject *self, PyObject *args);
PyObject *core_parse_shape(PyObject *self, PyObject *args);

#endif
