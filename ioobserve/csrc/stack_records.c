/* The Python stacks' records taken in (chain and code records in the ring's format) and the
 * processes gone forgotten (stacks.c has the tables' story). The kernel copies process memory
 * that another thread may be changing: every length is checked against the record, and a
 * record too short for its head is skipped. */

#define PY_SSIZE_T_CLEAN
#include "stacks.h"

void code_release(struct code_entry *code)
{
    Py_CLEAR(code->function);
    Py_CLEAR(code->file);
    PyMem_RawFree(code->table);
    PyMem_RawFree(code->ranges);
    code->table = NULL;
    code->ranges = NULL;
}

/* ---- adding records ---- */

static const char *py_encoding(unsigned kind)
{
    return kind == 2 ? "utf-16-le" : kind == 4 ? "utf-32-le" : "latin-1";
}

/* A name of the record: `length` bytes at `at`, no more than `room` nor past the record. */
static PyObject *record_text(const unsigned char *record, size_t size, size_t at, uint32_t length, size_t room,
                             unsigned kind)
{
    size_t end = at + (length < room ? length : room);
    if (end > size)
        end = size;
    return PyUnicode_Decode((const char *)record + at, end > at ? (Py_ssize_t)(end - at) : 0, py_encoding(kind), "replace");
}

static int add_code(Stacks *self, const unsigned char *record, size_t size)
{
    if (size < CODE_HEAD_BYTES)
        return 0; /* too short to be one: skipped */
    struct code_key key = {read_u64(record + CODE_AT_CODE), read_u32(record + CODE_AT_PID)};
    int32_t first;
    memcpy(&first, record + CODE_AT_FIRSTLINENO, sizeof first);
    uint16_t version;
    memcpy(&version, record + CODE_AT_VERSION, sizeof version);
    PyObject *function = record_text(record, size, CODE_AT_NAME, read_u32(record + CODE_AT_NAME_LEN), ev_PY_NAME_BYTES,
                                     record[CODE_AT_NAME_KIND]);
    PyObject *file = record_text(record, size, CODE_AT_FILE, read_u32(record + CODE_AT_FILE_LEN), ev_PY_FILE_BYTES,
                                 record[CODE_AT_FILE_KIND]);
    if (function && PyUnicode_GET_LENGTH(function) == 0)
        Py_SETREF(function, PyUnicode_FromString("<unknown>"));
    size_t table_length = read_u32(record + CODE_AT_TABLE_LEN);
    if (table_length > ev_PY_TABLE_BYTES)
        table_length = ev_PY_TABLE_BYTES;
    if (CODE_AT_TABLE + table_length > size)
        table_length = size > CODE_AT_TABLE ? size - CODE_AT_TABLE : 0;
    unsigned char *table = PyMem_RawMalloc(table_length ? table_length : 1);
    if (!function || !file || !table) {
        Py_XDECREF(function);
        Py_XDECREF(file);
        PyMem_RawFree(table);
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        return -1;
    }
    memcpy(table, record + CODE_AT_TABLE, table_length);
    uint64_t hash = code_hash(key.pid, key.address);
    struct code_entry *code = table_find(&self->codes, hash, &key, same_code);
    if (code)
        code_release(code); /* a code object at an address it had freed: the newer one */
    else if (!(code = table_add(&self->codes, hash))) {
        Py_DECREF(function);
        Py_DECREF(file);
        PyMem_RawFree(table);
        PyErr_NoMemory();
        return -1;
    }
    code->address = key.address;
    code->pid = key.pid;
    code->version = version;
    code->first = first;
    code->function = function;
    code->file = file;
    code->table = table;
    code->table_length = table_length;
    code->parsed = 0;
    code->n_ranges = 0;
    return 0;
}

static int add_chain(Stacks *self, const unsigned char *record, size_t size)
{
    if (size < CHAIN_FRAMES_AT)
        return 0; /* too short to be one: skipped */
    uint64_t chain = read_u64(record + CHAIN_AT_CHAIN);
    uint64_t hash = chain_hash(chain);
    if (table_find(&self->resolved, hash, &chain, same_resolved))
        return 0; /* the kernel forgot it before we did */
    size_t depth = read_u32(record + CHAIN_AT_DEPTH);
    size_t room = (size - CHAIN_FRAMES_AT) / FRAME_BYTES;
    if (depth > ev_PY_MAX_FRAMES)
        depth = ev_PY_MAX_FRAMES;
    if (depth > room)
        depth = room;
    struct frame_ref *frames = PyMem_RawMalloc((depth ? depth : 1) * sizeof *frames);
    if (!frames) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < depth; i++) {
        const unsigned char *frame = record + CHAIN_FRAMES_AT + i * FRAME_BYTES;
        frames[i].code = read_u64(frame + FRAME_AT_CODE);
        frames[i].instr = read_u32(frame + FRAME_AT_INSTR);
    }
    struct pending_entry *pending = table_find(&self->pending, hash, &chain, same_pending);
    if (pending) {
        PyMem_RawFree(pending->frames); /* sent again: the newer record, in its place */
    } else if ((pending = table_add(&self->pending, hash))) {
        pending->chain = chain;
        pending->stamp = ++self->clock;
    } else {
        PyMem_RawFree(frames);
        PyErr_NoMemory();
        return -1;
    }
    pending->pid = read_u32(record + CHAIN_AT_PID);
    pending->truncated = read_u32(record + CHAIN_AT_FLAGS) & ev_PY_TRUNCATED;
    pending->depth = (uint32_t)depth;
    pending->taken = 0;
    pending->frames = frames;
    return 0;
}

PyObject *Stacks_add(Stacks *self, PyObject *arg)
{
    Py_buffer blob;
    if (PyObject_GetBuffer(arg, &blob, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *data = blob.buf;
    size_t size = (size_t)blob.len, at = 0;
    int failed = 0;
    while (!failed && at + RING_HEADER_BYTES <= size) {
        uint32_t header = read_u32(data + at);
        size_t length = header & ~(RING_BUSY | RING_DISCARD);
        if (header & RING_BUSY || length > size - at - RING_HEADER_BYTES) {
            PyErr_Format(PyExc_ValueError, "a Python stack record at byte %zu runs past the %zu given", at, size);
            failed = 1;
            break;
        }
        const unsigned char *record = data + at + RING_HEADER_BYTES;
        if (!(header & RING_DISCARD) && length >= 4) {
            uint32_t kind = read_u32(record);
            if (kind == ev_AUX_PY_CHAIN)
                failed = add_chain(self, record, length) < 0;
            else if (kind == ev_AUX_PY_CODE)
                failed = add_code(self, record, length) < 0;
        }
        at += (RING_HEADER_BYTES + length + 7) & ~(size_t)7;
    }
    PyBuffer_Release(&blob);
    if (failed)
        return NULL;
    Py_RETURN_NONE;
}

/* ---- forgetting processes ---- */

struct pid_set {
    uint32_t *pids;
    size_t count;
};

static int has_pid(const struct pid_set *set, uint32_t pid)
{
    size_t low = 0, high = set->count;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (set->pids[middle] == pid)
            return 1;
        if (set->pids[middle] < pid)
            low = middle + 1;
        else
            high = middle;
    }
    return 0;
}

static int keep_code_of_others(void *entry, void *context)
{
    struct code_entry *code = entry;
    if (!has_pid(context, code->pid))
        return 1;
    code_release(code);
    return 0;
}

static int keep_known_of_others(void *entry, void *context)
{
    return !has_pid(context, ((struct known_entry *)entry)->pid);
}

static int keep_pending_of_others(void *entry, void *context)
{
    struct pending_entry *pending = entry;
    if (!has_pid(context, pending->pid))
        return 1;
    PyMem_RawFree(pending->frames);
    return 0;
}

static int compare_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

PyObject *Stacks_forget(Stacks *self, PyObject *arg)
{
    PyObject *sequence = PySequence_Fast(arg, "pids must be a sequence");
    if (!sequence)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(sequence);
    struct pid_set set = {PyMem_RawMalloc((size_t)(n ? n : 1) * sizeof(uint32_t)), (size_t)n};
    if (!set.pids) {
        Py_DECREF(sequence);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned long pid = PyLong_AsUnsignedLong(PySequence_Fast_GET_ITEM(sequence, i));
        if (pid == (unsigned long)-1 && PyErr_Occurred()) {
            PyMem_RawFree(set.pids);
            Py_DECREF(sequence);
            return NULL;
        }
        set.pids[i] = (uint32_t)pid;
    }
    Py_DECREF(sequence);
    qsort(set.pids, set.count, sizeof *set.pids, compare_u32);
    if (set.count) {
        table_keep(&self->codes, keep_code_of_others, &set);
        table_keep(&self->known, keep_known_of_others, &set);
        table_keep(&self->pending, keep_pending_of_others, &set);
    }
    PyMem_RawFree(set.pids);
    Py_RETURN_NONE;
}
