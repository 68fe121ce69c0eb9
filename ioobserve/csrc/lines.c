/* Event lines from a batch's columns, in one call per batch (ioobserve.trace.lines).
 *
 * The Python side hands over the batch's columns as buffers (numpy arrays, zero-copy from
 * Polars), each with an optional validity buffer (one byte per row), the string columns as
 * codes into small dictionaries, and the rows' time order. Here each row's fields are
 * derived (µs times, the sub-µs remainders, defaults left out), rows are grouped by (layer,
 * shape) in order of first appearance, and each group's lines are written after each other
 * into one buffer, from the templates the Python side makes once per shape (`template`).
 * Every index that comes from a buffer is checked against that buffer's length.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "core.h"

/* The fields, in line order: ioobserve.trace.lines.EVENT_FIELDS. */
enum field {
    F_NAME, F_PID, F_TID, F_TS, F_DUR, F_FHASH, F_FHASH2, F_RET, F_COUNT, F_OFFSET, F_FD, F_ARG, F_UID,
    F_CGROUP, F_EVFLAGS, F_TNS, F_DNS, F_PTS, F_PYSTACK, F_PYFRAME, F_MODULE, F_STATUS, N_FIELDS
};

/* The input columns, in the order of the `columns` tuple: lines.INPUT_COLUMNS. */
enum input {
    IN_OP, IN_LAYER, IN_PID, IN_TID, IN_TS, IN_DUR, IN_FILE, IN_FILE2, IN_RET, IN_COUNT, IN_OFFSET, IN_FD,
    IN_ARG, IN_UID, IN_CGROUP, IN_FLAGS, IN_PTS, IN_PYSTACK, IN_PYFRAME, IN_MODULE, IN_STATUS, N_INPUTS
};

#define MAX_GROUPS 4096  /* (layer, shape) pairs in one batch: 2^21 shapes could never all occur */
#define NUMBER_MAX 21    /* "-9223372036854775808" or 20 digits */
#define NO_CODE UINT32_MAX

struct column {
    Py_buffer view;
    int held;
    int is_signed;
    const uint8_t *valid; /* NULL: every row valid */
    Py_buffer valid_view;
    int valid_held;
};

#define COPY_SLACK 32 /* bytes a short copy may read past a token and write past the text */

struct group {
    uint32_t layer;
    uint32_t shape;
    char *literals;                 /* the template's tokens back to back, then COPY_SLACK bytes */
    uint32_t offset[N_FIELDS + 1];  /* token t: literals[offset[t]] .. + length[t] */
    uint32_t length[N_FIELDS + 1];
    Py_ssize_t tokens_bytes;
    Py_ssize_t count, next; /* rows in the group; the next row's place while they are sorted */
    Py_ssize_t text_end;    /* where the group's lines end in the text */
};

struct row {
    uint64_t value[N_FIELDS];
    uint32_t shape;
};

static int column_open(struct column *column, PyObject *data, PyObject *valid, Py_ssize_t rows, int index)
{
    if (PyObject_GetBuffer(data, &column->view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    column->held = 1;
    const char *format = column->view.format ? column->view.format : "B";
    if (*format == '<' || *format == '=' || *format == '@')
        format++;
    if (strlen(format) != 1 || !strchr("bBhHiIlLqQ", *format) || column->view.ndim != 1) {
        PyErr_Format(PyExc_TypeError, "column %d: an integer array is needed, not format %s", index, format);
        return -1;
    }
    column->is_signed = strchr("bhilq", *format) != NULL;
    if (column->view.len != rows * column->view.itemsize) {
        PyErr_Format(PyExc_ValueError, "column %d holds %zd bytes, not %zd rows", index, column->view.len, rows);
        return -1;
    }
    column->valid = NULL;
    if (valid != Py_None) {
        if (PyObject_GetBuffer(valid, &column->valid_view, PyBUF_C_CONTIGUOUS) < 0)
            return -1;
        column->valid_held = 1;
        if (column->valid_view.len != rows) {
            PyErr_Format(PyExc_ValueError, "column %d: %zd validity bytes for %zd rows", index, column->valid_view.len, rows);
            return -1;
        }
        column->valid = column->valid_view.buf;
    }
    return 0;
}

static void column_close(struct column *column)
{
    if (column->held)
        PyBuffer_Release(&column->view);
    if (column->valid_held)
        PyBuffer_Release(&column->valid_view);
}

/* Row `i`'s value as 64 bits (sign-extended for signed columns); 0 when not valid. */
static inline int column_get(const struct column *column, Py_ssize_t i, uint64_t *value)
{
    if (column->valid && !column->valid[i])
        return 0;
    const char *at = (const char *)column->view.buf + i * column->view.itemsize;
    switch (column->view.itemsize) {
    case 1: *value = column->is_signed ? (uint64_t)(int64_t)*(const int8_t *)at : *(const uint8_t *)at; break;
    case 2: *value = column->is_signed ? (uint64_t)(int64_t)*(const int16_t *)at : *(const uint16_t *)at; break;
    case 4: *value = column->is_signed ? (uint64_t)(int64_t)*(const int32_t *)at : *(const uint32_t *)at; break;
    default: *value = *(const uint64_t *)at; break;
    }
    return 1;
}

/* The fields of row `i` as written, and which are present (its shape). */
static void row_fields(const struct column *in, Py_ssize_t i, int precision_ns, struct row *row)
{
    uint64_t v, *out = row->value;
    uint32_t shape = 0;
#define PRESENT(field, val) do { out[field] = (val); shape |= 1u << (field); } while (0)
    if (column_get(&in[IN_OP], i, &v) && v != NO_CODE)
        PRESENT(F_NAME, v);
    if (column_get(&in[IN_PID], i, &v))
        PRESENT(F_PID, v);
    if (column_get(&in[IN_TID], i, &v))
        PRESENT(F_TID, v);
    uint64_t ts = 0, dur = 0, flags = 0;
    int has_ts = column_get(&in[IN_TS], i, &ts), has_flags = column_get(&in[IN_FLAGS], i, &flags);
    if (has_ts)
        PRESENT(F_TS, ts / 1000);
    if (column_get(&in[IN_DUR], i, &dur))
        PRESENT(F_DUR, dur / 1000);
    else
        dur = 0;
    if (column_get(&in[IN_FILE], i, &v))
        PRESENT(F_FHASH, v);
    if (column_get(&in[IN_FILE2], i, &v))
        PRESENT(F_FHASH2, v);
    if (column_get(&in[IN_RET], i, &v) && v != 0)
        PRESENT(F_RET, v);
    if (column_get(&in[IN_COUNT], i, &v) && v != 0)
        PRESENT(F_COUNT, v);
    if (column_get(&in[IN_OFFSET], i, &v) && v != (uint64_t)-1)
        PRESENT(F_OFFSET, v);
    if (column_get(&in[IN_FD], i, &v) && v != (uint64_t)-1)
        PRESENT(F_FD, v);
    if (column_get(&in[IN_ARG], i, &v) && v != 0)
        PRESENT(F_ARG, v);
    if (column_get(&in[IN_UID], i, &v))
        PRESENT(F_UID, v);
    if (column_get(&in[IN_CGROUP], i, &v))
        PRESENT(F_CGROUP, v);
    if (has_flags && flags != 0)
        PRESENT(F_EVFLAGS, flags);
    if (has_ts) {
        if (precision_ns) {
            if (ts % 1000)
                PRESENT(F_TNS, ts % 1000);
        } else if (has_flags && (flags & CORE_F_PARENT)) {
            /* a parent's key never equals another event's whole-µs time (lines.py) */
            PRESENT(F_TNS, ts % 1000 ? ts % 1000 : 1);
        }
    }
    if (precision_ns && dur % 1000)
        PRESENT(F_DNS, dur % 1000);
    if (column_get(&in[IN_PTS], i, &v))
        PRESENT(F_PTS, !precision_ns && v % 1000 == 0 ? v + 1 : v);
    if (column_get(&in[IN_PYSTACK], i, &v))
        PRESENT(F_PYSTACK, v);
    if (column_get(&in[IN_PYFRAME], i, &v) && v != 0)
        PRESENT(F_PYFRAME, v);
    if (column_get(&in[IN_MODULE], i, &v) && v != NO_CODE)
        PRESENT(F_MODULE, v);
    if (column_get(&in[IN_STATUS], i, &v) && v != 0)
        PRESENT(F_STATUS, v);
#undef PRESENT
    row->shape = shape;
}

static const char DIGIT_PAIRS[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

static inline int decimal_digits(uint64_t value)
{
    int digits = 1;
    while (value >= 10000) {
        value /= 10000;
        digits += 4;
    }
    return digits + (value >= 10) + (value >= 100) + (value >= 1000);
}

/* Written from the last digit back, straight into the text. */
static inline char *write_unsigned(char *at, uint64_t value)
{
    char *end = at + decimal_digits(value), *p = end;
    while (value >= 100) {
        unsigned pair = (unsigned)(value % 100) * 2;
        value /= 100;
        *--p = DIGIT_PAIRS[pair + 1];
        *--p = DIGIT_PAIRS[pair];
    }
    if (value >= 10) {
        *--p = DIGIT_PAIRS[value * 2 + 1];
        *--p = DIGIT_PAIRS[value * 2];
    } else {
        *--p = (char)('0' + value);
    }
    return end;
}

/* A copy of `length` bytes that may read and write up to COPY_SLACK bytes past them (both
 * buffers have that slack): fixed-size copies are a few vector moves, not a call. */
static inline char *copy_short(char *at, const char *from, size_t length)
{
    if (length <= 16)
        memcpy(at, from, 16);
    else if (length <= COPY_SLACK)
        memcpy(at, from, COPY_SLACK);
    else
        memcpy(at, from, length);
    return at + length;
}

static inline char *write_signed(char *at, uint64_t value)
{
    if ((int64_t)value < 0) {
        *at++ = '-';
        return write_unsigned(at, (uint64_t)0 - value);
    }
    return write_unsigned(at, value);
}

static inline char *write_hex(char *at, uint64_t value)
{
    char digits[16];
    int n = 0;
    do {
        digits[n++] = "0123456789abcdef"[value & 15];
        value >>= 4;
    } while (value);
    while (n)
        *at++ = digits[--n];
    return at;
}

struct strings {
    PyObject *list; /* a list of bytes */
    Py_ssize_t longest;
};

static int strings_open(struct strings *strings, PyObject *list, const char *what)
{
    if (!PyList_Check(list)) {
        PyErr_Format(PyExc_TypeError, "%s: a list of bytes is needed", what);
        return -1;
    }
    strings->list = list;
    strings->longest = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        PyObject *item = PyList_GET_ITEM(list, i);
        if (!PyBytes_Check(item)) {
            PyErr_Format(PyExc_TypeError, "%s[%zd]: bytes are needed", what, i);
            return -1;
        }
        if (PyBytes_GET_SIZE(item) > strings->longest)
            strings->longest = PyBytes_GET_SIZE(item);
    }
    return 0;
}

static inline char *write_string(char *at, const struct strings *strings, uint64_t code)
{
    PyObject *item = PyList_GET_ITEM(strings->list, (Py_ssize_t)code);
    *at++ = '"';
    at = (char *)memcpy(at, PyBytes_AS_STRING(item), (size_t)PyBytes_GET_SIZE(item)) + PyBytes_GET_SIZE(item);
    *at++ = '"';
    return at;
}

static int check_code(const struct row *row, int field, const struct strings *strings, Py_ssize_t i)
{
    if ((row->shape & (1u << field)) && row->value[field] >= (uint64_t)PyList_GET_SIZE(strings->list)) {
        PyErr_Format(PyExc_ValueError, "row %zd: string code %llu past the %zd strings", i,
                     (unsigned long long)row->value[field], PyList_GET_SIZE(strings->list));
        return -1;
    }
    return 0;
}

/* The group of (layer, shape), made on first sight with the template callback. */
static Py_ssize_t group_of(struct group *groups, Py_ssize_t *count, uint32_t layer, uint32_t shape, PyObject *template,
                           Py_ssize_t *last)
{
    if (*last >= 0 && groups[*last].layer == layer && groups[*last].shape == shape)
        return *last;
    for (Py_ssize_t g = 0; g < *count; g++) {
        if (groups[g].layer == layer && groups[g].shape == shape)
            return *last = g;
    }
    if (*count == MAX_GROUPS) {
        PyErr_SetString(PyExc_ValueError, "more than 4096 (layer, shape) groups in one batch");
        return -1;
    }
    PyObject *tokens = PyObject_CallFunction(template, "II", layer, shape);
    if (!tokens)
        return -1;
    int fields = __builtin_popcount(shape);
    if (!PyTuple_Check(tokens) || PyTuple_GET_SIZE(tokens) != fields + 1) {
        PyErr_Format(PyExc_ValueError, "template(%u, %u) must give a tuple of %d bytes", layer, shape, fields + 1);
        Py_DECREF(tokens);
        return -1;
    }
    Py_ssize_t total = 0;
    for (int t = 0; t <= fields; t++) {
        PyObject *token = PyTuple_GET_ITEM(tokens, t);
        if (!PyBytes_Check(token) || PyBytes_GET_SIZE(token) > 4096) {
            PyErr_Format(PyExc_TypeError, "template(%u, %u)[%d] is not bytes of at most 4096", layer, shape, t);
            Py_DECREF(tokens);
            return -1;
        }
        total += PyBytes_GET_SIZE(token);
    }
    struct group *group = &groups[*count];
    group->literals = PyMem_Calloc((size_t)(total + COPY_SLACK), 1);
    if (!group->literals) {
        Py_DECREF(tokens);
        PyErr_NoMemory();
        return -1;
    }
    uint32_t at = 0;
    for (int t = 0; t <= fields; t++) {
        PyObject *token = PyTuple_GET_ITEM(tokens, t);
        group->offset[t] = at;
        group->length[t] = (uint32_t)PyBytes_GET_SIZE(token);
        memcpy(group->literals + at, PyBytes_AS_STRING(token), group->length[t]);
        at += group->length[t];
    }
    Py_DECREF(tokens);
    group->layer = layer;
    group->shape = shape;
    group->tokens_bytes = total;
    group->count = group->next = 0;
    return *last = (*count)++;
}

static const uint8_t SIGNED_FIELD[N_FIELDS] = {[F_RET] = 1, [F_OFFSET] = 1, [F_FD] = 1};

/* One line into `at` (room checked by the caller: line_bound). */
static char *write_line(char *at, const struct row *row, const struct group *group, const struct strings *ops,
                        const struct strings *modules, const char *prefix, Py_ssize_t prefix_len)
{
    int token = 0;
    for (int field = 0; field < N_FIELDS; field++) {
        if (!(row->shape & (1u << field)))
            continue;
        at = copy_short(at, group->literals + group->offset[token], group->length[token]);
        token++;
        uint64_t value = row->value[field];
        if (field == F_NAME) {
            at = write_string(at, ops, value);
        } else if (field == F_MODULE) {
            at = write_string(at, modules, value);
        } else if (field == F_FHASH || field == F_FHASH2) {
            *at++ = '"';
            at = write_hex(copy_short(at, prefix, (size_t)prefix_len), value);
            *at++ = '"';
        } else if (SIGNED_FIELD[field]) {
            at = write_signed(at, value);
        } else {
            at = write_unsigned(at, value);
        }
    }
    at = copy_short(at, group->literals + group->offset[token], group->length[token]);
    *at++ = '\n';
    return at;
}

PyObject *core_event_lines(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *order_obj, *columns, *valid, *ops_list, *modules_list, *template;
    int precision_ns;
    const char *prefix;
    Py_ssize_t prefix_len;
    if (!PyArg_ParseTuple(args, "OO!O!O!O!py#O:event_lines", &order_obj, &PyTuple_Type, &columns, &PyTuple_Type, &valid,
                          &PyList_Type, &ops_list, &PyList_Type, &modules_list, &precision_ns, &prefix, &prefix_len,
                          &template))
        return NULL;
    if (PyTuple_GET_SIZE(columns) != N_INPUTS || PyTuple_GET_SIZE(valid) != N_INPUTS) {
        PyErr_Format(PyExc_ValueError, "%d columns and %d validity entries are needed", N_INPUTS, N_INPUTS);
        return NULL;
    }
    if (prefix_len > 64) {
        PyErr_SetString(PyExc_ValueError, "the file id prefix is at most 64 bytes");
        return NULL;
    }
    char prefix_padded[64 + COPY_SLACK] = {0}; /* read COPY_SLACK past its end by copy_short */
    memcpy(prefix_padded, prefix, (size_t)prefix_len);
    prefix = prefix_padded;
    struct strings ops, modules;
    if (strings_open(&ops, ops_list, "ops") < 0 || strings_open(&modules, modules_list, "modules") < 0)
        return NULL;

    PyObject *result = NULL, *text = NULL, *group_list = NULL, *written = NULL, *pids = NULL;
    struct column in[N_INPUTS] = {0};
    struct group *groups = NULL;
    uint16_t *row_group = NULL;
    Py_ssize_t *placed = NULL, n_groups = 0;
    Py_buffer order;
    if (PyObject_GetBuffer(order_obj, &order, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    Py_ssize_t rows = order.len / 8;
    if (order.itemsize != 8 || order.ndim != 1) {
        PyErr_SetString(PyExc_TypeError, "order: an array of 64-bit row numbers is needed");
        goto done;
    }
    for (int c = 0; c < N_INPUTS; c++) {
        if (column_open(&in[c], PyTuple_GET_ITEM(columns, c), PyTuple_GET_ITEM(valid, c), rows, c) < 0)
            goto done;
    }
    const int64_t *order_rows = order.buf;
    groups = PyMem_Calloc(MAX_GROUPS, sizeof *groups);
    row_group = PyMem_Malloc((size_t)(rows ? rows : 1) * sizeof *row_group);
    placed = PyMem_Malloc((size_t)(rows ? rows : 1) * sizeof *placed);
    if (!groups || !row_group || !placed) {
        PyErr_NoMemory();
        goto done;
    }

    /* Pass 1: each row's group, and the text's bound. */
    Py_ssize_t bound = 0, last = -1;
    const Py_ssize_t value_room = NUMBER_MAX + 2 + (prefix_len > ops.longest ? prefix_len : ops.longest);
    for (Py_ssize_t k = 0; k < rows; k++) {
        int64_t i = order_rows[k];
        if (i < 0 || i >= rows) {
            PyErr_Format(PyExc_ValueError, "order[%zd] = %lld is not a row of %zd", k, (long long)i, rows);
            goto done;
        }
        struct row row;
        row_fields(in, i, precision_ns, &row);
        if (check_code(&row, F_NAME, &ops, i) < 0 || check_code(&row, F_MODULE, &modules, i) < 0)
            goto done;
        uint64_t layer = 0;
        if (!column_get(&in[IN_LAYER], i, &layer) || layer > UINT32_MAX) {
            PyErr_Format(PyExc_ValueError, "row %lld has no layer", (long long)i);
            goto done;
        }
        Py_ssize_t g = group_of(groups, &n_groups, (uint32_t)layer, row.shape, template, &last);
        if (g < 0)
            goto done;
        row_group[k] = (uint16_t)g;
        groups[g].count++;
        bound += groups[g].tokens_bytes + 1 + __builtin_popcount(row.shape) * value_room + modules.longest;
    }
    /* Rows in group order, time order within a group (a counting sort: stable). */
    Py_ssize_t start = 0;
    for (Py_ssize_t g = 0; g < n_groups; g++) {
        groups[g].next = start;
        start += groups[g].count;
    }
    for (Py_ssize_t k = 0; k < rows; k++)
        placed[groups[row_group[k]].next++] = (Py_ssize_t)order_rows[k];

    /* Pass 2: the lines. */
    bound += COPY_SLACK; /* the last copy_short may write this far past the last line */
    text = PyBytes_FromStringAndSize(NULL, bound);
    written = PyBytes_FromStringAndSize(NULL, rows * (Py_ssize_t)sizeof(uint64_t));
    pids = PyBytes_FromStringAndSize(NULL, rows * (Py_ssize_t)sizeof(uint32_t));
    group_list = PyList_New(n_groups);
    if (!text || !written || !pids || !group_list)
        goto done;
    char *base = PyBytes_AS_STRING(text), *at = base;
    uint64_t *written_ts = (uint64_t *)PyBytes_AS_STRING(written);
    uint32_t *row_pid = (uint32_t *)PyBytes_AS_STRING(pids);
    Py_ssize_t k = 0;
    /* Without the GIL: only memory we hold is read and written here (the string lists and
     * their bytes stay alive through the call's arguments), so the recorder's other threads
     * run meanwhile. Each group's lines start where the previous group's end. */
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t g = 0; g < n_groups; g++) {
        for (Py_ssize_t r = 0; r < groups[g].count; r++, k++) {
            Py_ssize_t i = placed[k];
            struct row row;
            row_fields(in, i, precision_ns, &row);
            at = write_line(at, &row, &groups[g], &ops, &modules, prefix, prefix_len);
            written_ts[k] = row.value[F_TS] * 1000 + ((row.shape & (1u << F_TNS)) ? row.value[F_TNS] : 0);
            row_pid[k] = (uint32_t)row.value[F_PID];
        }
        groups[g].text_end = at - base;
    }
    Py_END_ALLOW_THREADS
    for (Py_ssize_t g = 0; g < n_groups; g++) {
        Py_ssize_t text_start = g ? groups[g - 1].text_end : 0;
        PyObject *entry = Py_BuildValue("(IInnn)", groups[g].layer, groups[g].shape, text_start, groups[g].text_end,
                                        groups[g].count);
        if (!entry)
            goto done;
        PyList_SET_ITEM(group_list, g, entry);
    }
    if (at - base > bound) /* cannot happen: each line is within its share of the bound */
        Py_FatalError("event_lines wrote past its bound");
    if (_PyBytes_Resize(&text, at - base) < 0)
        goto done;
    result = Py_BuildValue("(NNNN)", text, group_list, written, pids);
    text = group_list = written = pids = NULL;
done:
    Py_XDECREF(text);
    Py_XDECREF(group_list);
    Py_XDECREF(written);
    Py_XDECREF(pids);
    if (groups) {
        for (Py_ssize_t g = 0; g < n_groups; g++)
            PyMem_Free(groups[g].literals);
        PyMem_Free(groups);
    }
    PyMem_Free(row_group);
    PyMem_Free(placed);
    for (int c = 0; c < N_INPUTS; c++)
        column_close(&in[c]);
    PyBuffer_Release(&order);
    return result;
}
