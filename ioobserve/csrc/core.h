/* The compiled core's functions, one file each, gathered by module.c into ioobserve._core. */
#ifndef IOOBSERVE_CORE_H
#define IOOBSERVE_CORE_H

#include <Python.h>

#define CORE_F_PARENT 0x200 /* events.F_PARENT: exported as _core.F_PARENT, compared by a test */

/* The ring buffer's record headers (ioobserve.collect.capture). */
#define RING_HEADER_BYTES 8
#define RING_BUSY (1u << 31)
#define RING_DISCARD (1u << 30)

/* events.py's auxiliary records, as the kernel writes them: exported as _core.LAYOUT and
 * compared with events.py by a test. */
#define ev_AUX_PATH 1
#define ev_AUX_NAME 2
#define ev_AUX_PY_CHAIN 6
#define ev_AUX_PY_CODE 7
#define ev_NAME_LABEL 2
#define NAME_AT_TS_NS 8
#define NAME_AT_BASE_INO 16
#define NAME_AT_BASE_DEV 24
#define NAME_AT_TID 28
#define NAME_AT_INDEX 32
#define NAME_AT_LEN 34
#define NAME_HEAD_BYTES 36
#define ev_PY_MAX_FRAMES 32
#define ev_PY_TRUNCATED 1
#define ev_PY_NAME_BYTES 128
#define ev_PY_FILE_BYTES 256
#define ev_PY_TABLE_BYTES 2048
#define CHAIN_AT_CHAIN 8
#define CHAIN_AT_PID 16
#define CHAIN_AT_DEPTH 20
#define CHAIN_AT_FLAGS 24
#define CHAIN_FRAMES_AT 32
#define FRAME_BYTES 24
#define FRAME_AT_CODE 0
#define FRAME_AT_INSTR 16
#define CODE_AT_CODE 8
#define CODE_AT_PID 16
#define CODE_AT_FIRSTLINENO 20
#define CODE_AT_NAME_LEN 24
#define CODE_AT_FILE_LEN 28
#define CODE_AT_TABLE_LEN 32
#define CODE_AT_NAME_KIND 40
#define CODE_AT_FILE_KIND 41
#define CODE_AT_VERSION 42
#define CODE_HEAD_BYTES 44 /* through version */
#define CODE_AT_NAME 48
#define CODE_AT_FILE 176
#define CODE_AT_TABLE 432

extern PyTypeObject StacksType;

PyObject *core_lines_at(PyObject *self, PyObject *args);
PyObject *core_ring_committed(PyObject *self, PyObject *arg);
PyObject *core_aux_split(PyObject *self, PyObject *arg);
PyObject *core_match_names(PyObject *self, PyObject *args);
PyObject *core_rows_by_file(PyObject *self, PyObject *args);
PyObject *core_event_lines(PyObject *self, PyObject *args);
PyObject *core_parse_shape(PyObject *self, PyObject *args);

#endif
