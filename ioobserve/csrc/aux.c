/* Auxiliary records as the capture process takes them from the ring: the bytes of the
 * ring itself, each record after its 8-byte header and 8-byte aligned (discarded ones
 * included), so that neither the capture process nor the reader makes a Python object per
 * record it only passes on (ioobserve.collect.ringbuf, ioobserve.decode). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#include "core.h"

static size_t stride_of(uint32_t header)
{
    return (RING_HEADER_BYTES + (header & ~(RING_BUSY | RING_DISCARD)) + 7) & ~(size_t)7;
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
    size_t size = (size_t)window.len, at = 0;
    while (at + RING_HEADER_BYTES <= size) {
        uint32_t header;
        memcpy(&header, data + at, sizeof header);
        size_t stride = stride_of(header);
        if (header & RING_BUSY || stride > size - at)
            break;
        at += stride;
    }
    PyBuffer_Release(&window);
    return PyLong_FromSize_t(at);
}

static int is_python_stack_kind(const unsigned char *record, size_t length)
{
    uint32_t kind;
    if (length < sizeof kind)
        return 0;
    memcpy(&kind, record, sizeof kind);
    return kind == ev_AUX_PY_CHAIN || kind == ev_AUX_PY_CODE;
}

/* aux_split(blob) -> ([record], python): the records of a ring blob but the Python stack
 * ones, each as bytes, and those in one ring blob of their own (for _core.Stacks.add). */
PyObject *core_aux_split(PyObject *self, PyObject *arg)
{
    (void)self;
    Py_buffer blob;
    if (PyObject_GetBuffer(arg, &blob, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *data = blob.buf;
    size_t size = (size_t)blob.len, at, python_bytes = 0;
    PyObject *records = PyList_New(0), *python = NULL, *result = NULL;
    for (at = 0; records && at + RING_HEADER_BYTES <= size;) {
        uint32_t header;
        memcpy(&header, data + at, sizeof header);
        size_t stride = stride_of(header), length = header & ~(RING_BUSY | RING_DISCARD);
        if (header & RING_BUSY || stride > size - at)
            break;
        const unsigned char *record = data + at + RING_HEADER_BYTES;
        if (!(header & RING_DISCARD)) {
            if (is_python_stack_kind(record, length)) {
                python_bytes += stride;
            } else {
                PyObject *one = PyBytes_FromStringAndSize((const char *)record, (Py_ssize_t)length);
                if (!one || PyList_Append(records, one) < 0)
                    Py_CLEAR(records);
                Py_XDECREF(one);
            }
        }
        at += stride;
    }
    if (records && at != size) {
        PyErr_Format(PyExc_ValueError, "auxiliary records: the record at byte %zu runs past the %zu given", at, size);
        Py_CLEAR(records);
    }
    if (records && (python = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)python_bytes))) {
        char *out = PyBytes_AS_STRING(python);
        for (at = 0; at < size;) {
            uint32_t header;
            memcpy(&header, data + at, sizeof header);
            size_t stride = stride_of(header);
            if (!(header & RING_DISCARD)
                && is_python_stack_kind(data + at + RING_HEADER_BYTES, header & ~(RING_BUSY | RING_DISCARD))) {
                memcpy(out, data + at, stride);
                out += stride;
            }
            at += stride;
        }
        result = PyTuple_Pack(2, records, python);
    }
    Py_XDECREF(records);
    Py_XDECREF(python);
    PyBuffer_Release(&blob);
    return result;
}
