/* Auxiliary records as the capture process takes them from the ring: the bytes of the
 * ring itself, each record after its 8-byte header and 8-byte aligned (discarded ones
 * included), so that neither the capture process nor the reader makes a Python object per
 * record it only passes on (ioobserve.collect.capture, ioobserve.data.decode). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#include "core.h"

#define LENGTH_OF(header) ((size_t)((header) & ~(RING_BUSY | RING_DISCARD)))

/* The record at data[at] (at <= size): its header into *header, and its stride (header,
 * record and padding to 8 bytes); 0 where no whole committed record is there (the data ends,
 * or the kernel is still writing it). */
static size_t record_at(const unsigned char *data, size_t size, size_t at, uint32_t *header)
{
    if (size - at < RING_HEADER_BYTES)
        return 0;
    memcpy(header, data + at, sizeof *header);
    size_t stride = (RING_HEADER_BYTES + LENGTH_OF(*header) + 7) & ~(size_t)7;
    return *header & RING_BUSY || stride > size - at ? 0 : stride;
}

/* ring_committed(window) -> bytes: how much of `window` (the ring's data from the consumer's
 * position on) holds records the kernel has committed, up to the first still being written. */
PyObject *core_ring_committed(PyObject *self, PyObject *arg)
{
    (void)self;
    Py_buffer window;
    if (PyObject_GetBuffer(arg, &window, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *data = window.buf;
    size_t size = (size_t)window.len, at = 0, stride;
    uint32_t header;
    while ((stride = record_at(data, size, at, &header)) != 0)
        at += stride;
    PyBuffer_Release(&window);
    return PyLong_FromSize_t(at);
}

static uint32_t kind_of(const unsigned char *record, size_t length)
{
    uint32_t kind = 0;
    if (length >= sizeof kind)
        memcpy(&kind, record, sizeof kind);
    return kind;
}

static int is_python_stack_kind(uint32_t kind)
{
    return kind == ev_AUX_PY_CHAIN || kind == ev_AUX_PY_CODE;
}

/* Whether the component at name[at..] is "." or ".." (what os.path.normpath removes). */
static int dot_component(const unsigned char *name, size_t length, size_t at)
{
    size_t end = at;
    while (end < length && name[end] != '/')
        end++;
    return (end - at == 1 && name[at] == '.') || (end - at == 2 && name[at] == '.' && name[at + 1] == '.');
}

/* A name that names itself (decode.NAME_SCHEMA's `fast`): a label, nothing, or an absolute
 * path os.path.normpath would leave as it is (no empty, "." or ".." component, no trailing
 * slash). Others are joined to their directory in Python (context/files.py). */
static int names_itself(const unsigned char *name, size_t length, unsigned index)
{
    if (index == ev_NAME_LABEL || length == 0)
        return 1;
    if (name[0] != '/' || (length > 1 && name[length - 1] == '/'))
        return 0;
    for (size_t i = 0; i + 1 < length; i++)
        if (name[i] == '/' && (name[i + 1] == '/' || dot_component(name, length, i + 1)))
            return 0;
    return 1;
}

struct name_columns {
    PyObject *tid, *ts_ns, *index, *base_dev, *base_ino, *fast, *texts;
};

static void name_columns_release(struct name_columns *names)
{
    Py_XDECREF(names->tid);
    Py_XDECREF(names->ts_ns);
    Py_XDECREF(names->index);
    Py_XDECREF(names->base_dev);
    Py_XDECREF(names->base_ino);
    Py_XDECREF(names->fast);
    Py_XDECREF(names->texts);
}

static int name_columns_make(struct name_columns *names, Py_ssize_t n)
{
    names->tid = PyByteArray_FromStringAndSize(NULL, n * 4);
    names->ts_ns = PyByteArray_FromStringAndSize(NULL, n * 8);
    names->index = PyByteArray_FromStringAndSize(NULL, n * 2);
    names->base_dev = PyByteArray_FromStringAndSize(NULL, n * 4);
    names->base_ino = PyByteArray_FromStringAndSize(NULL, n * 8);
    names->fast = PyByteArray_FromStringAndSize(NULL, n);
    names->texts = PyList_New(n);
    return names->tid && names->ts_ns && names->index && names->base_dev && names->base_ino && names->fast
        && names->texts ? 0 : -1;
}

/* The name record's fields into row `row` of the columns; -1 if its text cannot be made. */
static int name_row(struct name_columns *names, Py_ssize_t row, const unsigned char *record, size_t length)
{
    uint16_t index, text_length;
    memcpy(&index, record + NAME_AT_INDEX, sizeof index);
    memcpy(&text_length, record + NAME_AT_LEN, sizeof text_length);
    memcpy(PyByteArray_AS_STRING(names->tid) + row * 4, record + NAME_AT_TID, 4);
    memcpy(PyByteArray_AS_STRING(names->ts_ns) + row * 8, record + NAME_AT_TS_NS, 8);
    memcpy(PyByteArray_AS_STRING(names->index) + row * 2, &index, 2);
    memcpy(PyByteArray_AS_STRING(names->base_dev) + row * 4, record + NAME_AT_BASE_DEV, 4);
    memcpy(PyByteArray_AS_STRING(names->base_ino) + row * 8, record + NAME_AT_BASE_INO, 8);
    size_t room = length - NAME_HEAD_BYTES;
    const unsigned char *text = record + NAME_HEAD_BYTES;
    size_t used = text_length < room ? text_length : room;
    PyByteArray_AS_STRING(names->fast)[row] = (char)names_itself(text, used, index);
    PyObject *decoded = PyUnicode_DecodeUTF8((const char *)text, (Py_ssize_t)used, "backslashreplace"); /* as decode._text */
    if (!decoded)
        return -1;
    PyList_SET_ITEM(names->texts, row, decoded);
    return 0;
}

/* aux_split(blob) -> ([record], python, names): the records of a ring blob, by what reads
 * them. The Python stack records stay one ring blob (for _core.Stacks.add); the name records
 * become columns (tid, ts_ns, index, base_dev, base_ino, fast: bytearrays of uint32,
 * uint64, uint16, uint32, uint64 and bool, and texts: [str]), or None if there are none;
 * any other record is bytes, in the list. A name record too short for its head is dropped. */
PyObject *core_aux_split(PyObject *self, PyObject *arg)
{
    (void)self;
    Py_buffer blob;
    if (PyObject_GetBuffer(arg, &blob, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *data = blob.buf;
    size_t size = (size_t)blob.len, at, python_bytes = 0;
    Py_ssize_t n_names = 0, row = 0;
    struct name_columns names = {0};
    PyObject *records = PyList_New(0), *python = NULL, *result = NULL;
    uint32_t header;
    size_t stride;
    for (at = 0; records && (stride = record_at(data, size, at, &header)) != 0; at += stride) {
        size_t length = LENGTH_OF(header);
        const unsigned char *record = data + at + RING_HEADER_BYTES;
        uint32_t kind = kind_of(record, length);
        if (header & RING_DISCARD) {
            /* the kernel gave this space up */
        } else if (is_python_stack_kind(kind)) {
            python_bytes += stride;
        } else if (kind == ev_AUX_NAME) {
            n_names += length >= NAME_HEAD_BYTES;
        } else {
            PyObject *one = PyBytes_FromStringAndSize((const char *)record, (Py_ssize_t)length);
            if (!one || PyList_Append(records, one) < 0)
                Py_CLEAR(records);
            Py_XDECREF(one);
        }
    }
    if (records && at != size) {
        PyErr_Format(PyExc_ValueError, "auxiliary records: the record at byte %zu runs past the %zu given", at, size);
        Py_CLEAR(records);
    }
    if (!records || !(python = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)python_bytes))
        || (n_names && name_columns_make(&names, n_names) < 0))
        goto done;
    char *out = PyBytes_AS_STRING(python);
    for (at = 0; at < size; at += stride) { /* every record is whole: the first pass saw them */
        stride = record_at(data, size, at, &header);
        size_t length = LENGTH_OF(header);
        const unsigned char *record = data + at + RING_HEADER_BYTES;
        uint32_t kind = kind_of(record, length);
        if (!(header & RING_DISCARD)) {
            if (is_python_stack_kind(kind)) {
                memcpy(out, data + at, stride);
                out += stride;
            } else if (kind == ev_AUX_NAME && length >= NAME_HEAD_BYTES && name_row(&names, row++, record, length) < 0) {
                goto done;
            }
        }
    }
    if (n_names)
        result = Py_BuildValue("(OO(OOOOOOO))", records, python, names.tid, names.ts_ns, names.index, names.base_dev,
                               names.base_ino, names.fast, names.texts);
    else
        result = Py_BuildValue("(OOO)", records, python, Py_None);
done:
    name_columns_release(&names);
    Py_XDECREF(records);
    Py_XDECREF(python);
    PyBuffer_Release(&blob);
    return result;
}
