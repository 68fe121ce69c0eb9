/* Line numbers from a code object's line table, as CPython computes them (the ranges
 * code.co_lines() yields): Objects/lnotab_notes.txt for 3.10, Objects/locations.md for
 * 3.11+. Offsets are in bytes of bytecode. Tables come from the kernel's copy of a process's
 * memory, so a table may be cut short or be garbage: every read is within `length`, a
 * varint's bits past 64 are dropped, and lines wrap as unsigned 64-bit integers do. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "linetable.h"

#define NO_LINE_310 (-128)
#define INFO_NONE 15
#define INFO_NO_COLUMNS 13
#define INFO_LONG 14
#define INFO_ONE_LINE0 10

static size_t ranges_310(const unsigned char *table, size_t length, int64_t first, struct line_range *out)
{
    size_t n = 0;
    uint64_t end = 0, line = (uint64_t)first;
    for (size_t at = 0; at + 1 < length; at += 2) {
        uint64_t start = end;
        end += table[at];
        int delta = (signed char)table[at + 1];
        int64_t current = NO_LINE;
        if (delta != NO_LINE_310) {
            line += (uint64_t)(int64_t)delta;
            current = (int64_t)line;
        }
        if (end > start)
            out[n++] = (struct line_range){start, end, current};
    }
    return n;
}

/* The varint at table[*at]; 0 when it runs past the table's end (then *at = length). */
static int read_varint(const unsigned char *table, size_t length, size_t *at, uint64_t *value)
{
    if (*at >= length)
        return 0;
    unsigned byte = table[(*at)++];
    unsigned shift = 0;
    *value = byte & 63;
    while (byte & 64) {
        if (*at >= length)
            return 0;
        byte = table[(*at)++];
        shift += 6;
        if (shift < 64)
            *value |= (uint64_t)(byte & 63) << shift;
    }
    return 1;
}

static size_t ranges_311(const unsigned char *table, size_t length, int64_t first, struct line_range *out)
{
    size_t n = 0, at = 0;
    uint64_t end = 0, line = (uint64_t)first;
    while (at < length) {
        unsigned head = table[at];
        unsigned code = (head >> 3) & 15;
        if (code == INFO_NO_COLUMNS || code == INFO_LONG) {
            size_t varint_at = at + 1;
            uint64_t value;
            if (!read_varint(table, length, &varint_at, &value))
                break; /* a table cut short: the ranges read so far stand */
            line += value & 1 ? (uint64_t)0 - (value >> 1) : value >> 1;
        } else if (code >= INFO_ONE_LINE0 && code < INFO_NO_COLUMNS) {
            line += code - INFO_ONE_LINE0;
        }
        uint64_t start = end;
        end += ((head & 7) + 1) * 2;
        out[n++] = (struct line_range){start, end, code == INFO_NONE ? NO_LINE : (int64_t)line};
        at++;
        while (at < length && !(table[at] & 128))
            at++;
    }
    return n;
}

/* The table's ranges (PyMem_Raw-allocated, *out; NULL and 0 for none), or -1 out of memory. */
int line_ranges(const unsigned char *table, size_t length, int64_t first, int before_311,
                struct line_range **out, size_t *count)
{
    *out = NULL;
    *count = 0;
    if (!length)
        return 0;
    struct line_range *ranges = PyMem_RawMalloc(length * sizeof *ranges);
    if (!ranges)
        return -1;
    *count = before_311 ? ranges_310(table, length, first, ranges) : ranges_311(table, length, first, ranges);
    *out = ranges;
    return 0;
}

/* The line of the instruction at `offset` bytes: NO_LINE where no range covers it. */
int64_t line_at(const struct line_range *ranges, size_t count, uint64_t offset)
{
    size_t low = 0, high = count; /* the first range starting after offset */
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (ranges[middle].start <= offset)
            low = middle + 1;
        else
            high = middle;
    }
    if (!low)
        return NO_LINE;
    const struct line_range *range = &ranges[low - 1];
    return offset < range->end ? range->line : NO_LINE;
}

/* _core.lines_at(table, firstlineno, before_311, offsets) -> [line]: for the tests, which
 * compare it with the interpreters' own co_lines(). */
PyObject *core_lines_at(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer table;
    long long first;
    int before_311;
    PyObject *offsets;
    if (!PyArg_ParseTuple(args, "y*LpO", &table, &first, &before_311, &offsets))
        return NULL;
    PyObject *lines = NULL, *sequence = PySequence_Fast(offsets, "offsets must be a sequence");
    struct line_range *ranges = NULL;
    size_t count;
    if (!sequence)
        goto done;
    if (line_ranges(table.buf, (size_t)table.len, first, before_311, &ranges, &count) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(sequence);
    lines = PyList_New(n);
    for (Py_ssize_t i = 0; lines && i < n; i++) {
        unsigned long long offset = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(sequence, i));
        PyObject *line = offset == (unsigned long long)-1 && PyErr_Occurred()
            ? NULL : PyLong_FromLongLong(line_at(ranges, count, offset));
        if (!line)
            Py_CLEAR(lines);
        else
            PyList_SET_ITEM(lines, i, line);
    }
done:
    PyMem_RawFree(ranges);
    Py_XDECREF(sequence);
    PyBuffer_Release(&table);
    return lines;
}
