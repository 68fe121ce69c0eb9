/* The enrichment's joins that a hash lookup does better than a Polars join, which copies
 * every column of the batch (ioobserve.collect.enrich).
 *
 * match_names: the path arguments (name records) of a batch's events. A name record and its
 * event share the thread and the call's entry time; an event has up to three: its first path
 * argument (index 0), its second (1, a rename's target) and a label (NAME_LABEL, an import's
 * module). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#include "core.h"
#include "table.h"

#define NAME_SLOTS 3 /* indexes 0, 1 and NAME_LABEL (2) */

struct call_entry { /* a call's name records: row in the names, or -1 */
    uint64_t hash;
    uint64_t ts;
    uint32_t tid;
    int32_t row[NAME_SLOTS];
    int matched; /* an event of the batch is this call */
};

struct call_key {
    uint64_t ts;
    uint32_t tid;
};

static int same_call(const void *entry, const void *key)
{
    const struct call_entry *call = entry;
    const struct call_key *wanted = key;
    return call->ts == wanted->ts && call->tid == wanted->tid;
}

static uint64_t call_hash(uint32_t tid, uint64_t ts)
{
    uint64_t words[2] = {tid, ts};
    return hash_words(words, 2);
}

/* A column given as a buffer of `width`-byte items: its length in items, or -1. */
static Py_ssize_t items(Py_buffer *view, Py_ssize_t width, const char *what)
{
    if (view->len % width) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes is not a whole number of %zd-byte items", what, view->len, width);
        return -1;
    }
    return view->len / width;
}

/* match_names(event_tid, event_ts, name_tid, name_ts, name_index) -> (first, second, label,
 * matched): for each event (uint32 tid, uint64 ts columns), the row of its name records
 * (uint32, uint64, uint16 columns) of each index as int32 (-1: none); and for each name
 * record, whether an event of the batch is its call (bytes of 0 or 1), whatever its index.
 * Where a call has two records of one index, the later row is its. */
PyObject *core_match_names(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer views[5];
    int held = 0;
    PyObject *result = NULL, *out[NAME_SLOTS] = {NULL}, *matched = NULL;
    struct table calls = {0};
    uint32_t *call_of = NULL;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*", &views[0], &views[1], &views[2], &views[3], &views[4]))
        return NULL;
    held = 5;
    Py_ssize_t events = items(&views[0], 4, "event tids"), names = items(&views[2], 4, "name tids");
    if (events < 0 || names < 0)
        goto done;
    if (items(&views[1], 8, "event times") != events || items(&views[3], 8, "name times") != names
        || items(&views[4], 2, "name indexes") != names) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "the columns of the events, or of the names, differ in length");
        goto done;
    }
    const unsigned char *event_tid = views[0].buf, *event_ts = views[1].buf;
    const unsigned char *name_tid = views[2].buf, *name_ts = views[3].buf, *name_index = views[4].buf;
    call_of = PyMem_RawMalloc((size_t)(names ? names : 1) * sizeof *call_of); /* each name's call */
    if (!call_of || table_init(&calls, sizeof(struct call_entry)) < 0) {
        PyMem_RawFree(call_of);
        call_of = NULL;
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t row = 0; row < names; row++) {
        uint16_t index;
        struct call_key key;
        memcpy(&index, name_index + row * 2, sizeof index);
        memcpy(&key.tid, name_tid + row * 4, sizeof key.tid);
        memcpy(&key.ts, name_ts + row * 8, sizeof key.ts);
        uint64_t hash = call_hash(key.tid, key.ts);
        struct call_entry *call = table_find(&calls, hash, &key, same_call);
        if (!call) {
            if (!(call = table_add(&calls, hash))) {
                PyErr_NoMemory();
                goto done;
            }
            call->tid = key.tid;
            call->ts = key.ts;
            for (int slot = 0; slot < NAME_SLOTS; slot++)
                call->row[slot] = -1;
        }
        call_of[row] = (uint32_t)(((char *)call - calls.entries) / calls.entry_size);
        if (index < NAME_SLOTS) /* other indexes: no column takes them */
            call->row[index] = (int32_t)row;
    }
    for (int slot = 0; slot < NAME_SLOTS; slot++)
        if (!(out[slot] = PyBytes_FromStringAndSize(NULL, events * (Py_ssize_t)sizeof(int32_t))))
            goto done;
    if (!(matched = PyBytes_FromStringAndSize(NULL, names)))
        goto done;
    char *seen = PyBytes_AS_STRING(matched);
    memset(seen, 0, (size_t)names);
    for (Py_ssize_t event = 0; event < events; event++) {
        struct call_key key;
        memcpy(&key.tid, event_tid + event * 4, sizeof key.tid);
        memcpy(&key.ts, event_ts + event * 8, sizeof key.ts);
        struct call_entry *call = calls.count ? table_find(&calls, call_hash(key.tid, key.ts), &key, same_call) : NULL;
        if (call)
            call->matched = 1;
        for (int slot = 0; slot < NAME_SLOTS; slot++) {
            int32_t row = call ? call->row[slot] : -1;
            memcpy(PyBytes_AS_STRING(out[slot]) + event * 4, &row, sizeof row);
        }
    }
    for (Py_ssize_t row = 0; row < names; row++)
        seen[row] = (char)((struct call_entry *)TABLE_ENTRY(&calls, call_of[row]))->matched;
    result = PyTuple_Pack(4, out[0], out[1], out[2], matched);
done:
    PyMem_RawFree(call_of);
    if (calls.slots)
        table_free(&calls);
    for (int slot = 0; slot < NAME_SLOTS; slot++)
        Py_XDECREF(out[slot]);
    Py_XDECREF(matched);
    for (int i = 0; i < held; i++)
        PyBuffer_Release(&views[i]);
    return result;
}

/* A row's key as rows_by_file numbers it. */
struct key_entry {
    uint64_t hash; /* the key itself: keys are hashes already */
    uint32_t index;
};

static int same_key(const void *entry, const void *key)
{
    return ((const struct key_entry *)entry)->hash == *(const uint64_t *)key;
}

/* Column `i` of `views` as `width`-byte items, `rows` of them (a NULL buffer: none given). */
static int column_of(Py_buffer *view, Py_ssize_t width, Py_ssize_t rows, const char *what)
{
    if (!view->buf || view->len == rows * width)
        return 0;
    PyErr_Format(PyExc_ValueError, "%s: %zd bytes, not %zd rows of %zd", what, view->len, rows, width);
    return -1;
}

/* rows_by_file(opened, kdev, kdev_valid, dev, ino, name_hash, name_valid) -> (which, firsts):
 * the rows of a batch grouped by the file they name (FileIds.assign): the same key for the
 * same (opened, kdev, dev, ino, path argument), from an opened flag (bytes of 0 or 1), the
 * kernel's dev (uint32) of an open file, the file's dev and inode (uint64) and the path
 * argument's hash (uint64), each with its validity (bytes of 0 or 1, or None: all valid).
 * which: each row's group (uint32), in order of first appearance; firsts: each group's first
 * row (uint32). */
PyObject *core_rows_by_file(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer views[7] = {{0}};
    PyObject *given[7], *result = NULL, *which = NULL, *firsts = NULL;
    static const Py_ssize_t widths[7] = {1, 4, 1, 8, 8, 8, 1};
    static const char *names[7] = {"opened", "kdev", "kdev_valid", "dev", "ino", "name_hash", "name_valid"};
    struct table keys = {0};
    int held = 0;
    if (!PyArg_ParseTuple(args, "OOOOOOO", &given[0], &given[1], &given[2], &given[3], &given[4], &given[5], &given[6]))
        return NULL;
    for (; held < 7; held++) {
        if (given[held] == Py_None && (held == 2 || held == 6))
            continue; /* views[held].buf stays NULL: every row valid */
        if (PyObject_GetBuffer(given[held], &views[held], PyBUF_SIMPLE) < 0)
            goto done;
    }
    Py_ssize_t rows = views[0].len;
    for (int i = 1; i < 7; i++)
        if (column_of(&views[i], widths[i], rows, names[i]) < 0)
            goto done;
    if (!(which = PyBytes_FromStringAndSize(NULL, rows * 4)) || table_init(&keys, sizeof(struct key_entry)) < 0) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto done;
    }
    uint32_t *group = (uint32_t *)PyBytes_AS_STRING(which), *first = PyMem_RawMalloc((size_t)(rows ? rows : 1) * 4);
    if (!first) {
        PyErr_NoMemory();
        goto done;
    }
    const unsigned char *opened = views[0].buf, *kdev = views[1].buf, *kdev_valid = views[2].buf, *dev = views[3].buf;
    const unsigned char *ino = views[4].buf, *name = views[5].buf, *name_valid = views[6].buf;
    uint64_t previous[5] = {0};
    uint32_t previous_group = 0, groups = 0;
    for (Py_ssize_t row = 0; row < rows; row++) {
        uint64_t words[5] = {opened[row] != 0, 1ULL << 63, 0, 0, 1ULL << 63}; /* a null: a value no column holds */
        if (!kdev_valid || kdev_valid[row]) {
            uint32_t value;
            memcpy(&value, kdev + row * 4, sizeof value);
            words[1] = value;
        }
        memcpy(&words[2], dev + row * 8, 8);
        memcpy(&words[3], ino + row * 8, 8);
        if (!name_valid || name_valid[row])
            memcpy(&words[4], name + row * 8, 8);
        if (row && memcmp(words, previous, sizeof words) == 0) { /* runs: one file's reads */
            group[row] = previous_group;
            continue;
        }
        uint64_t key = hash_words(words, 5);
        struct key_entry *entry = table_find(&keys, key, &key, same_key);
        if (!entry) {
            if (!(entry = table_add(&keys, key))) {
                PyMem_RawFree(first);
                PyErr_NoMemory();
                goto done;
            }
            entry->index = groups;
            first[groups++] = (uint32_t)row;
        }
        group[row] = previous_group = entry->index;
        memcpy(previous, words, sizeof words);
    }
    firsts = PyBytes_FromStringAndSize((const char *)first, (Py_ssize_t)groups * 4);
    PyMem_RawFree(first);
    if (firsts)
        result = PyTuple_Pack(2, which, firsts);
done:
    if (keys.slots)
        table_free(&keys);
    Py_XDECREF(which);
    Py_XDECREF(firsts);
    for (int i = 0; i < held; i++)
        if (views[i].buf || views[i].obj)
            PyBuffer_Release(&views[i]);
    return result;
}
