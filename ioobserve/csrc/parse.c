/* A member of our event lines back into columns, in one call per member (ioobserve.trace.read.parse).
 *
 * Every line of such a member has one layer and one shape (ioobserve.trace.lines): the same
 * JSON text between its values, given here as the template's tokens. A line is read by
 * matching each token byte for byte and reading the value after it: an integer of a given
 * width and sign, or a string between quotes with nothing to unescape. Anything else is not
 * a line of this shape, and the member is refused with the line's number and what was
 * expected. Members come from files anyone could have written: every read is checked against
 * the text's end, every number against its column's range, and nothing is read past `text`.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "core.h"

#define MAX_FIELDS 32

/* A field's kind, one byte of `kinds`: an unsigned integer of 1, 2, 4 or 8 bytes (B H I Q),
 * a signed one (b h i q), or a string (s). */
struct field {
    char kind;
    int width;
    int is_signed;
    PyObject *column;    /* bytearray of rows * width, or of rows * 4 string codes */
    char *out;
    /* strings: distinct values, by an open-addressing table of (offset, length) into text */
    uint32_t *slots;     /* code + 1, 0: empty */
    Py_ssize_t n_slots;
    Py_ssize_t *value_at;
    Py_ssize_t *value_length;
    Py_ssize_t n_values, values_room;
    Py_ssize_t last_code; /* the code the line before had */
};

static int field_setup(struct field *field, char kind, Py_ssize_t rows)
{
    memset(field, 0, sizeof *field);
    field->kind = kind;
    switch (kind) {
    case 'B': case 'b': field->width = 1; break;
    case 'H': case 'h': field->width = 2; break;
    case 'I': case 'i': field->width = 4; break;
    case 'Q': case 'q': field->width = 8; break;
    case 's': field->width = 4; break;
    default:
        PyErr_Format(PyExc_ValueError, "unknown field kind %c", kind);
        return -1;
    }
    field->is_signed = kind == 'b' || kind == 'h' || kind == 'i' || kind == 'q';
    field->column = PyByteArray_FromStringAndSize(NULL, rows * field->width);
    if (!field->column)
        return -1;
    field->out = PyByteArray_AS_STRING(field->column);
    if (kind == 's') {
        field->n_slots = 64;
        field->slots = PyMem_RawCalloc((size_t)field->n_slots, sizeof *field->slots);
        field->values_room = 32;
        field->value_at = PyMem_RawMalloc((size_t)field->values_room * sizeof *field->value_at);
        field->value_length = PyMem_RawMalloc((size_t)field->values_room * sizeof *field->value_length);
        if (!field->slots || !field->value_at || !field->value_length) {
            PyErr_NoMemory();
            return -1;
        }
    }
    return 0;
}

static void field_release(struct field *field)
{
    Py_XDECREF(field->column);
    PyMem_RawFree(field->slots);
    PyMem_RawFree(field->value_at);
    PyMem_RawFree(field->value_length);
}

static uint64_t hash_bytes(const char *at, Py_ssize_t length)
{
    uint64_t hash = 1469598103934665603ULL; /* FNV-1a */
    for (Py_ssize_t i = 0; i < length; i++)
        hash = (hash ^ (unsigned char)at[i]) * 1099511628211ULL;
    return hash;
}

static int64_t new_or_known_code(struct field *field, const char *text, Py_ssize_t at, Py_ssize_t length);

/* Twice the slots, every value placed again (the table stays at most half full). */
static int grow_slots(struct field *field, const char *text)
{
    Py_ssize_t n_slots = field->n_slots * 2, mask = n_slots - 1;
    uint32_t *slots = PyMem_RawCalloc((size_t)n_slots, sizeof *slots);
    if (!slots)
        return -1;
    for (Py_ssize_t code = 0; code < field->n_values; code++) {
        Py_ssize_t slot = (Py_ssize_t)(hash_bytes(text + field->value_at[code], field->value_length[code]) & (uint64_t)mask);
        while (slots[slot])
            slot = (slot + 1) & mask;
        slots[slot] = (uint32_t)code + 1;
    }
    PyMem_RawFree(field->slots);
    field->slots = slots;
    field->n_slots = n_slots;
    return 0;
}

/* The code of the string text[at .. at + length), added if new. */
static int64_t string_code(struct field *field, const char *text, Py_ssize_t at, Py_ssize_t length)
{
    /* Lines in time order often repeat the line before's op and file: no hashing then. */
    if (field->n_values) {
        Py_ssize_t last = field->last_code;
        if (field->value_length[last] == length && memcmp(text + field->value_at[last], text + at, (size_t)length) == 0)
            return last;
    }
    int64_t code = new_or_known_code(field, text, at, length);
    if (code >= 0)
        field->last_code = (Py_ssize_t)code;
    return code;
}

static int64_t new_or_known_code(struct field *field, const char *text, Py_ssize_t at, Py_ssize_t length)
{
    uint64_t hash = hash_bytes(text + at, length);
    Py_ssize_t mask = field->n_slots - 1, slot = (Py_ssize_t)(hash & (uint64_t)mask);
    while (field->slots[slot]) {
        Py_ssize_t code = field->slots[slot] - 1;
        if (field->value_length[code] == length && memcmp(text + field->value_at[code], text + at, (size_t)length) == 0)
            return code;
        slot = (slot + 1) & mask;
    }
    if (field->n_values >= UINT32_MAX - 1) {
        return -1;
    }
    if (field->n_values == field->values_room) {
        Py_ssize_t room = field->values_room * 2;
        Py_ssize_t *value_at = PyMem_RawRealloc(field->value_at, (size_t)room * sizeof *value_at);
        if (!value_at)
            return -1;
        field->value_at = value_at;
        Py_ssize_t *value_length = PyMem_RawRealloc(field->value_length, (size_t)room * sizeof *value_length);
        if (!value_length)
            return -1;
        field->value_length = value_length;
        field->values_room = room;
    }
    Py_ssize_t code = field->n_values++;
    field->value_at[code] = at;
    field->value_length[code] = length;
    field->slots[slot] = (uint32_t)code + 1;
    if (field->n_values * 2 > field->n_slots && grow_slots(field, text) < 0)
        return -1;
    return code;
}

static void store(struct field *field, Py_ssize_t row, uint64_t value)
{
    char *at = field->out + row * field->width;
    switch (field->width) {
    case 1: { uint8_t v = (uint8_t)value; memcpy(at, &v, 1); break; }
    case 2: { uint16_t v = (uint16_t)value; memcpy(at, &v, 2); break; }
    case 4: { uint32_t v = (uint32_t)value; memcpy(at, &v, 4); break; }
    default: memcpy(at, &value, 8); break;
    }
}

/* Whether a[0 .. length) equals b[0 .. length), 8 bytes at a time (tokens are short: a call
 * to memcmp per token cost more than the comparison). */
static inline int same_bytes(const char *a, const char *b, Py_ssize_t length)
{
    uint64_t x, y, differ = 0;
    if (length < 8) {
        for (Py_ssize_t i = 0; i < length; i++)
            differ |= (uint64_t)(unsigned char)(a[i] ^ b[i]);
        return differ == 0;
    }
    for (Py_ssize_t i = 0; i + 8 <= length; i += 8) {
        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        differ |= x ^ y;
    }
    memcpy(&x, a + length - 8, 8); /* the last 8 bytes, overlapping the loop's */
    memcpy(&y, b + length - 8, 8);
    return (differ | (x ^ y)) == 0;
}

/* Why a line was refused: set as the ValueError's message by the caller. */
struct refusal {
    Py_ssize_t line;
    const char *what;
    int field;
};

/* An integer of the field's width and sign at text[*at ..), up to `end`. */
static int read_integer(const struct field *field, const char *text, Py_ssize_t *at, Py_ssize_t end, uint64_t *value)
{
    Py_ssize_t i = *at;
    int negative = 0;
    if (i < end && text[i] == '-' && field->is_signed) {
        negative = 1;
        i++;
    }
    Py_ssize_t first = i;
    uint64_t magnitude = 0;
    while (i < end && i - first < 19 && (unsigned)(text[i] - '0') < 10) /* 19 digits never overflow */
        magnitude = magnitude * 10 + (unsigned)(text[i++] - '0');
    if (i < end && (unsigned)(text[i] - '0') < 10) { /* a 20th digit: checked */
        unsigned digit = (unsigned)(text[i++] - '0');
        if (magnitude > (UINT64_MAX - digit) / 10)
            return -1;
        magnitude = magnitude * 10 + digit;
        if (i < end && (unsigned)(text[i] - '0') < 10)
            return -1; /* 21 digits */
    }
    if (i == first)
        return -1;
    int bits = field->width * 8;
    if (field->is_signed) {
        uint64_t limit = (uint64_t)1 << (bits - 1); /* |min|; max is limit - 1 */
        if (negative ? magnitude > limit : magnitude >= limit)
            return -1;
        *value = negative ? (uint64_t)0 - magnitude : magnitude;
    } else if (bits < 64 && magnitude >> bits) {
        return -1;
    } else {
        *value = magnitude;
    }
    *at = i;
    return 0;
}

/* A string between quotes at text[*at ..): its bytes need no unescaping (no backslash, no
 * control character), as our writer makes them. */
static int read_string(const char *text, Py_ssize_t *at, Py_ssize_t end, Py_ssize_t *start, Py_ssize_t *length)
{
    Py_ssize_t i = *at;
    if (i >= end || text[i] != '"')
        return -1;
    i++;
    *start = i;
    while (i < end && text[i] != '"') {
        unsigned char c = (unsigned char)text[i];
        if (c == '\\' || c < 0x20)
            return -1;
        i++;
    }
    if (i >= end)
        return -1;
    *length = i - *start;
    *at = i + 1;
    return 0;
}

static PyObject *string_values(const struct field *field, const char *text)
{
    PyObject *values = PyList_New(field->n_values);
    if (!values)
        return NULL;
    for (Py_ssize_t code = 0; code < field->n_values; code++) {
        PyObject *value = PyBytes_FromStringAndSize(text + field->value_at[code], field->value_length[code]);
        if (!value) {
            Py_DECREF(values);
            return NULL;
        }
        PyList_SET_ITEM(values, code, value);
    }
    return values;
}

PyObject *core_parse_shape(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer text_view;
    PyObject *tokens;
    const char *kinds;
    Py_ssize_t n_kinds;
    if (!PyArg_ParseTuple(args, "y*O!s#:parse_shape", &text_view, &PyTuple_Type, &tokens, &kinds, &n_kinds))
        return NULL;
    PyObject *result = NULL;
    struct field fields[MAX_FIELDS];
    int n_fields = 0;
    const char *text = text_view.buf;
    const Py_ssize_t end = text_view.len;
    if (n_kinds < 1 || n_kinds > MAX_FIELDS || PyTuple_GET_SIZE(tokens) != n_kinds + 1) {
        PyErr_Format(PyExc_ValueError, "1 to %d fields and one token more are needed", MAX_FIELDS);
        goto done;
    }
    for (Py_ssize_t t = 0; t <= n_kinds; t++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(tokens, t))) {
            PyErr_Format(PyExc_TypeError, "token %zd is not bytes", t);
            goto done;
        }
    }
    /* Room for as many lines as could fit: each is at least its tokens, a newline and a
     * digit or two quotes per value. The columns are cut to the lines read at the end. */
    Py_ssize_t shortest = 1;
    for (Py_ssize_t t = 0; t <= n_kinds; t++)
        shortest += PyBytes_GET_SIZE(PyTuple_GET_ITEM(tokens, t)) + (t < n_kinds ? (kinds[t] == 's' ? 2 : 1) : 0);
    Py_ssize_t room = end / shortest + 1, rows = 0;
    for (; n_fields < n_kinds; n_fields++) {
        if (field_setup(&fields[n_fields], kinds[n_fields], room) < 0) {
            n_fields++;
            goto done;
        }
    }
    const char *token_at[MAX_FIELDS + 1];
    Py_ssize_t token_length[MAX_FIELDS + 1];
    for (Py_ssize_t t = 0; t <= n_kinds; t++) {
        token_at[t] = PyBytes_AS_STRING(PyTuple_GET_ITEM(tokens, t));
        token_length[t] = PyBytes_GET_SIZE(PyTuple_GET_ITEM(tokens, t));
    }
    struct refusal refusal = {0, NULL, -1};
    int out_of_memory = 0;
    Py_ssize_t at = 0;
    /* Without the GIL: only the text (held through the buffer), the tokens' copies of their
     * addresses and our own memory are touched, so the reader's other threads run meanwhile. */
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t row = 0; at < end && !refusal.what && !out_of_memory; row++, rows++) {
        if (row == room) { /* cannot happen: every line read is at least `shortest` long */
            refusal = (struct refusal){row + 1, "more lines than the member's length allows", -1};
            break;
        }
        for (int f = 0; f <= n_kinds; f++) {
            Py_ssize_t length = token_length[f];
            if (length > end - at || !same_bytes(text + at, token_at[f], length)) {
                refusal = (struct refusal){row + 1, "the text between values differs from the member's first line", f};
                break;
            }
            at += length;
            if (f == n_kinds)
                break;
            struct field *field = &fields[f];
            if (field->kind == 's') {
                Py_ssize_t start, size;
                if (read_string(text, &at, end, &start, &size) < 0) {
                    refusal = (struct refusal){row + 1, "not a plain string between quotes", f};
                    break;
                }
                int64_t code = string_code(field, text, start, size);
                if (code < 0) {
                    out_of_memory = 1;
                    break;
                }
                store(field, row, (uint64_t)code);
            } else {
                uint64_t value;
                if (read_integer(field, text, &at, end, &value) < 0) {
                    refusal = (struct refusal){row + 1, "not an integer in the field's range", f};
                    break;
                }
                store(field, row, value);
            }
        }
        if (!refusal.what && !out_of_memory && (at >= end || text[at] != '\n'))
            refusal = (struct refusal){row + 1, at >= end ? "the member ends inside the line" : "the line goes on after its last value", -1};
        at++;
    }
    Py_END_ALLOW_THREADS
    if (out_of_memory) {
        PyErr_NoMemory();
        goto done;
    }
    if (refusal.what) {
        if (refusal.field >= 0)
            PyErr_Format(PyExc_ValueError, "line %zd, field %d: %s", refusal.line, refusal.field + 1, refusal.what);
        else
            PyErr_Format(PyExc_ValueError, "line %zd: %s", refusal.line, refusal.what);
        goto done;
    }
    for (int f = 0; f < n_kinds; f++) {
        if (PyByteArray_Resize(fields[f].column, rows * fields[f].width) < 0)
            goto done;
    }
    PyObject *columns = PyTuple_New(n_kinds);
    if (!columns)
        goto done;
    for (int f = 0; f < n_kinds; f++) {
        PyObject *column;
        if (fields[f].kind == 's') {
            PyObject *values = string_values(&fields[f], text);
            column = values ? Py_BuildValue("(ON)", fields[f].column, values) : NULL;
        } else {
            column = fields[f].column;
            Py_INCREF(column);
        }
        if (!column) {
            Py_DECREF(columns);
            goto done;
        }
        PyTuple_SET_ITEM(columns, f, column);
    }
    result = Py_BuildValue("(nN)", rows, columns);
done:
    for (int f = 0; f < n_fields; f++)
        field_release(&fields[f]);
    PyBuffer_Release(&text_view);
    return result;
}
