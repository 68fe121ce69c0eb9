/* Python stacks: the kernel's chain and code-object records kept in hash tables, and the
 * chains of a batch resolved into stack ids in one call (ioobserve.python.stacks wraps it).
 *
 * A chain record is a thread's frames as the kernel walked them: (code object, instruction)
 * pairs, innermost first. A code record is a code object's names and line table. A frame is
 * numbered by its content (function, file, line), so that every process running the same
 * code shares its numbers, and a stack is the numbers of its frames and whether the walk was
 * cut: identical stacks of any process share one id. Stack ids count from 1.
 *
 * Kept by last use, as the Python class they replace kept them (ioobserve.python.stacks):
 * resolved chains and stack keys, `kept` of each; chain records not resolved yet, `kept`;
 * the stacks by id (the Python objects the sinks get), twice `kept`. Frame numbers start over
 * past `max_frames` distinct frames. Tables are trimmed in bulk once they pass an eighth over
 * their bound, so that a trim (a sort of last-use stamps) is paid once per many chains.
 *
 * The records come in through stack_records.c; the tables are laid out in stacks.h. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#include "stacks.h"

/* ---- keys ---- */

static uint64_t known_hash(uint32_t pid, uint64_t address, uint32_t instr)
{
    uint64_t words[2] = {(uint64_t)pid << 32 | instr, address};
    return hash_words(words, 2);
}

static int same_known(const void *entry, const void *key)
{
    const struct known_entry *known = entry, *wanted = key;
    return known->address == wanted->address && known->pid == wanted->pid && known->instr == wanted->instr;
}

static uint64_t stack_hash(const uint32_t *numbers, uint32_t depth, uint32_t truncated)
{
    uint64_t words[ev_PY_MAX_FRAMES / 2 + 1];
    size_t count = 0;
    for (uint32_t i = 0; i < depth; i += 2)
        words[count++] = (uint64_t)numbers[i] << 32 | (i + 1 < depth ? numbers[i + 1] : 0xFFFFFFFFu);
    words[count++] = truncated;
    return hash_words(words, count);
}

static int same_stack(const void *entry, const void *key)
{
    const struct stack_entry *stack = entry;
    const struct stack_key *wanted = key;
    return stack->depth == wanted->depth && stack->truncated == wanted->truncated
        && memcmp(stack->numbers, wanted->numbers, wanted->depth * sizeof *wanted->numbers) == 0;
}

/* ---- releasing entries (table_keep's callbacks) ---- */

static int drop_all_codes(void *entry, void *context)
{
    (void)context;
    code_release(entry);
    return 0;
}

static int drop_all_pending(void *entry, void *context)
{
    (void)context;
    PyMem_RawFree(((struct pending_entry *)entry)->frames);
    return 0;
}

static int drop_all_stack_keys(void *entry, void *context)
{
    (void)context;
    PyMem_RawFree(((struct stack_entry *)entry)->numbers);
    return 0;
}

static int drop_all(void *entry, void *context)
{
    (void)entry;
    (void)context;
    return 0;
}

/* ---- the type ---- */

static void Stacks_dealloc(Stacks *self)
{
    table_keep(&self->codes, drop_all_codes, NULL);
    table_keep(&self->pending, drop_all_pending, NULL);
    table_keep(&self->stack_keys, drop_all_stack_keys, NULL);
    table_free(&self->codes);
    table_free(&self->known);
    table_free(&self->resolved);
    table_free(&self->pending);
    table_free(&self->stack_keys);
    Py_XDECREF(self->frame_type);
    Py_XDECREF(self->stack_type);
    Py_XDECREF(self->unknown_frame);
    Py_XDECREF(self->frame_numbers);
    Py_XDECREF(self->frames);
    Py_XDECREF(self->stacks);
    Py_XDECREF(self->new_stacks);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Stacks_init(Stacks *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"kept", "max_frames", "frame_type", "stack_type", NULL};
    Py_ssize_t kept, max_frames;
    PyObject *frame_type, *stack_type;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "nnOO", keywords, &kept, &max_frames, &frame_type, &stack_type))
        return -1;
    if (kept < 1 || max_frames < 1) {
        PyErr_SetString(PyExc_ValueError, "kept and max_frames must be at least 1");
        return -1;
    }
    if (self->frames) {
        PyErr_SetString(PyExc_RuntimeError, "Stacks is initialised once");
        return -1;
    }
    self->kept = (size_t)kept;
    self->max_frames = (size_t)max_frames;
    self->frame_type = Py_NewRef(frame_type);
    self->stack_type = Py_NewRef(stack_type);
    self->unknown_frame = PyObject_CallFunction(frame_type, "ssi", "<unknown>", "", NO_LINE);
    self->frame_numbers = PyDict_New();
    self->frames = PyList_New(0);
    self->stacks = PyDict_New();
    self->new_stacks = PyDict_New();
    self->next_id = 1;
    if (!self->unknown_frame || !self->frame_numbers || !self->frames || !self->stacks || !self->new_stacks)
        return -1;
    if (table_init(&self->codes, sizeof(struct code_entry)) < 0 || table_init(&self->known, sizeof(struct known_entry)) < 0
        || table_init(&self->resolved, sizeof(struct resolved_entry)) < 0
        || table_init(&self->pending, sizeof(struct pending_entry)) < 0
        || table_init(&self->stack_keys, sizeof(struct stack_entry)) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* ---- resolving chains ---- */

/* Frame numbers and the stack keys made of them start over (the stacks by id stay). */
static int start_numbering_over(Stacks *self)
{
    PyDict_Clear(self->frame_numbers);
    if (PyList_SetSlice(self->frames, 0, PyList_GET_SIZE(self->frames), NULL) < 0)
        return -1;
    table_keep(&self->known, drop_all, NULL);
    table_keep(&self->stack_keys, drop_all_stack_keys, NULL);
    return 0;
}

/* The number of this frame's content, numbered now if new; -1 on error. */
static Py_ssize_t number_of(Stacks *self, PyObject *function, PyObject *file, int64_t line, PyObject *known_frame)
{
    PyObject *key = known_frame ? Py_NewRef(known_frame) : Py_BuildValue("(OOL)", function, file, (long long)line);
    if (!key)
        return -1;
    PyObject *found = PyDict_GetItemWithError(self->frame_numbers, key);
    Py_ssize_t number = -1;
    if (found) {
        number = PyLong_AsSsize_t(found);
    } else if (!PyErr_Occurred()) {
        PyObject *frame = known_frame ? Py_NewRef(known_frame)
                                      : PyObject_CallFunction(self->frame_type, "OOL", function, file, (long long)line);
        PyObject *value = PyLong_FromSsize_t(PyList_GET_SIZE(self->frames));
        if (frame && value && PyList_Append(self->frames, frame) == 0 && PyDict_SetItem(self->frame_numbers, key, value) == 0)
            number = PyList_GET_SIZE(self->frames) - 1;
        Py_XDECREF(frame);
        Py_XDECREF(value);
    }
    Py_DECREF(key);
    return number;
}

/* The number of the frame (pid, code, instr): known, or read from its code object and kept;
 * the unknown frame (not kept) if the code's record was lost or has not come yet. */
static Py_ssize_t frame_number(Stacks *self, uint32_t pid, const struct frame_ref *ref)
{
    struct known_entry key = {0, ref->code, pid, ref->instr, 0};
    uint64_t hash = known_hash(pid, ref->code, ref->instr);
    struct known_entry *known = table_find(&self->known, hash, &key, same_known);
    if (known)
        return known->number;
    struct code_key code_key = {ref->code, pid};
    struct code_entry *code = table_find(&self->codes, code_hash(pid, ref->code), &code_key, same_code);
    if (!code)
        return number_of(self, NULL, NULL, NO_LINE, self->unknown_frame);
    if (!code->parsed) {
        int before_311 = code->version < (3 << 8 | 11);
        if (line_ranges(code->table, code->table_length, code->first, before_311, &code->ranges, &code->n_ranges) < 0) {
            PyErr_NoMemory();
            return -1;
        }
        code->parsed = 1;
    }
    int64_t line = line_at(code->ranges, code->n_ranges, (uint64_t)ref->instr * 2);
    Py_ssize_t number = number_of(self, code->function, code->file, line, NULL);
    if (number < 0)
        return -1;
    if (!(known = table_add(&self->known, hash))) {
        PyErr_NoMemory();
        return -1;
    }
    known->address = ref->code;
    known->pid = pid;
    known->instr = ref->instr;
    known->number = (uint32_t)number;
    return number;
}

/* The Stack object of a key's frames. */
static PyObject *stack_object(Stacks *self, const uint32_t *numbers, uint32_t depth, uint32_t truncated)
{
    PyObject *frames = PyTuple_New(depth);
    if (!frames)
        return NULL;
    for (uint32_t i = 0; i < depth; i++)
        PyTuple_SET_ITEM(frames, i, Py_NewRef(PyList_GET_ITEM(self->frames, numbers[i])));
    PyObject *stack = PyObject_CallFunction(self->stack_type, "OO", frames, truncated ? Py_True : Py_False);
    Py_DECREF(frames);
    return stack;
}

/* The id of the stack of a chain record's frames, made if new, and given to the sinks
 * (again, if known: a sink keeping only the stacks used last may have forgotten it); 0 on
 * error. */
static uint32_t stack_of(Stacks *self, const struct pending_entry *chain)
{
    uint32_t numbers[ev_PY_MAX_FRAMES];
    /* Chains resolved in the order the kernel sent them: a thread's next chain mostly shares
     * the last one's outer frames (innermost come first), whose numbers need no lookup. */
    uint32_t depth = chain->depth, shared = 0;
    if (chain->pid == self->last.pid) {
        while (shared < depth && shared < self->last.depth) {
            const struct frame_ref *mine = &chain->frames[depth - 1 - shared];
            const struct frame_ref *theirs = &self->last.frames[self->last.depth - 1 - shared];
            if (mine->code != theirs->code || mine->instr != theirs->instr)
                break;
            numbers[depth - 1 - shared] = self->last.numbers[self->last.depth - 1 - shared];
            shared++;
        }
    }
    for (uint32_t i = 0; i + shared < depth; i++) {
        Py_ssize_t number = frame_number(self, chain->pid, &chain->frames[i]);
        if (number < 0)
            return 0;
        numbers[i] = (uint32_t)number;
    }
    self->last.pid = chain->pid;
    self->last.depth = depth;
    memcpy(self->last.frames, chain->frames, depth * sizeof *chain->frames);
    memcpy(self->last.numbers, numbers, depth * sizeof *numbers);
    struct stack_key key = {numbers, chain->depth, chain->truncated};
    uint64_t hash = stack_hash(numbers, chain->depth, chain->truncated);
    struct stack_entry *entry = table_find(&self->stack_keys, hash, &key, same_stack);
    uint32_t id;
    if (entry) {
        entry->stamp = ++self->clock;
        id = entry->id;
    } else {
        uint32_t *copy = PyMem_RawMalloc(chain->depth * sizeof *copy);
        if (!copy || !(entry = table_add(&self->stack_keys, hash))) {
            PyMem_RawFree(copy);
            PyErr_NoMemory();
            return 0;
        }
        memcpy(copy, numbers, chain->depth * sizeof *copy);
        *entry = (struct stack_entry){hash, ++self->clock, copy, chain->depth, chain->truncated, self->next_id++};
        id = entry->id;
    }
    PyObject *key_id = PyLong_FromUnsignedLong(id);
    if (!key_id)
        return 0;
    PyObject *stack = PyDict_GetItemWithError(self->stacks, key_id);
    int failed = PyErr_Occurred() != NULL;
    if (stack) {
        Py_INCREF(stack);
    } else if (!failed) { /* new, or dropped by the bound on stacks while its key stayed */
        stack = stack_object(self, numbers, chain->depth, chain->truncated);
        failed = !stack || PyDict_SetItem(self->stacks, key_id, stack) < 0;
    }
    failed = failed || PyDict_SetItem(self->new_stacks, key_id, stack) < 0;
    Py_XDECREF(stack);
    Py_DECREF(key_id);
    return failed ? 0 : id;
}

/* ---- trimming by last use ---- */

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The stamp at and above which `table`'s `kept` entries used last lie (0: keep all), the
 * stamps read at `stamp_at` bytes into each entry; -1 out of memory. */
static int threshold(const struct table *table, size_t stamp_at, size_t kept, uint64_t *found)
{
    *found = 0;
    if (table->count <= kept)
        return 0;
    uint64_t *stamps = PyMem_RawMalloc(table->count * sizeof *stamps);
    if (!stamps)
        return -1;
    for (size_t i = 0; i < table->count; i++)
        memcpy(&stamps[i], (const char *)TABLE_ENTRY(table, i) + stamp_at, sizeof *stamps);
    qsort(stamps, table->count, sizeof *stamps, compare_u64);
    *found = stamps[table->count - kept];
    PyMem_RawFree(stamps);
    return 0;
}

struct trim {
    Stacks *self;
    uint64_t threshold;
    int failed;
};

static int keep_resolved(void *entry, void *context)
{
    return ((struct resolved_entry *)entry)->stamp >= ((struct trim *)context)->threshold;
}

static int keep_pending(void *entry, void *context)
{
    struct pending_entry *pending = entry;
    if (pending->stamp >= ((struct trim *)context)->threshold && !pending->taken)
        return 1;
    PyMem_RawFree(pending->frames);
    return 0;
}

static int keep_stack_key(void *entry, void *context)
{
    struct stack_entry *stack = entry;
    struct trim *trim = context;
    if (stack->stamp >= trim->threshold)
        return 1;
    PyObject *id = PyLong_FromUnsignedLong(stack->id);
    if (!id || (PyDict_DelItem(trim->self->stacks, id) < 0 && !PyErr_ExceptionMatches(PyExc_KeyError)))
        trim->failed = 1;
    else
        PyErr_Clear();
    Py_XDECREF(id);
    PyMem_RawFree(stack->numbers);
    return 0;
}

static int over(const Stacks *self, const struct table *table)
{
    return table->count > self->kept + self->kept / 8;
}

/* Each table back to its bound once past it by an eighth; the pending records taken. */
static int trim(Stacks *self, int any_taken)
{
    struct trim context = {self, 0, 0};
    if (over(self, &self->resolved)) {
        if (threshold(&self->resolved, offsetof(struct resolved_entry, stamp), self->kept, &context.threshold) < 0)
            goto memory;
        table_keep(&self->resolved, keep_resolved, &context);
    }
    if (over(self, &self->pending) || any_taken) {
        if (threshold(&self->pending, offsetof(struct pending_entry, stamp), self->kept, &context.threshold) < 0)
            goto memory;
        table_keep(&self->pending, keep_pending, &context);
    }
    if (over(self, &self->stack_keys)) {
        if (threshold(&self->stack_keys, offsetof(struct stack_entry, stamp), self->kept, &context.threshold) < 0)
            goto memory;
        table_keep(&self->stack_keys, keep_stack_key, &context);
        if (context.failed)
            return -1;
    }
    /* Stacks whose keys went when the numbering started over: the oldest first. */
    Py_ssize_t extra = PyDict_GET_SIZE(self->stacks) - (Py_ssize_t)(2 * self->kept);
    if (extra > 0) {
        PyObject *oldest = PyList_New(0), *key, *value;
        Py_ssize_t position = 0;
        while (oldest && PyList_GET_SIZE(oldest) < extra && PyDict_Next(self->stacks, &position, &key, &value))
            if (PyList_Append(oldest, key) < 0)
                Py_CLEAR(oldest);
        for (Py_ssize_t i = 0; oldest && i < PyList_GET_SIZE(oldest); i++)
            if (PyDict_DelItem(self->stacks, PyList_GET_ITEM(oldest, i)) < 0)
                Py_CLEAR(oldest);
        if (!oldest)
            return -1;
        Py_DECREF(oldest);
    }
    return 0;
memory:
    PyErr_NoMemory();
    return -1;
}

/* A chain record to resolve, and where its id goes. */
struct waiting {
    const struct pending_entry *pending;
    size_t at;
};

/* By process, then in the order the kernel sent them. */
static int by_arrival(const void *a, const void *b)
{
    const struct pending_entry *x = ((const struct waiting *)a)->pending, *y = ((const struct waiting *)b)->pending;
    if (x->pid != y->pid)
        return (x->pid > y->pid) - (x->pid < y->pid);
    return (x->stamp > y->stamp) - (x->stamp < y->stamp);
}

/* The stack id of each of `n` distinct non-zero chains into ids (0: unknown); -1 on error. */
static int resolve_distinct(Stacks *self, const uint64_t *asked, size_t n, uint32_t *ids)
{
    if ((size_t)PyList_GET_SIZE(self->frames) > self->max_frames && start_numbering_over(self) < 0)
        return -1;
    struct waiting *waiting = PyMem_RawMalloc((n ? n : 1) * sizeof *waiting);
    if (!waiting) {
        PyErr_NoMemory();
        return -1;
    }
    size_t n_waiting = 0;
    int any_taken = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t chain = asked[i], hash = chain_hash(chain);
        ids[i] = 0;
        struct resolved_entry *resolved = table_find(&self->resolved, hash, &chain, same_resolved);
        if (resolved) {
            resolved->stamp = ++self->clock;
            ids[i] = resolved->stack;
            continue;
        }
        struct pending_entry *pending = table_find(&self->pending, hash, &chain, same_pending);
        if (pending && !pending->taken) {
            pending->taken = any_taken = 1;
            if (pending->depth) {
                waiting[n_waiting++] = (struct waiting){pending, i};
                continue;
            }
        }
        self->unknown_chains++;
    }
    /* The pending entries stay where they are meanwhile: only other tables grow. */
    qsort(waiting, n_waiting, sizeof *waiting, by_arrival);
    self->last.depth = 0; /* numbers of an earlier call may have gone with a process */
    for (size_t w = 0; w < n_waiting && !failed; w++) {
        const struct pending_entry *pending = waiting[w].pending;
        uint64_t hash = chain_hash(pending->chain);
        struct resolved_entry *resolved;
        uint32_t id = stack_of(self, pending);
        if (!id || !(resolved = table_add(&self->resolved, hash))) {
            failed = 1;
            if (!PyErr_Occurred())
                PyErr_NoMemory();
            break;
        }
        resolved->chain = pending->chain;
        resolved->stamp = ++self->clock;
        resolved->stack = ids[waiting[w].at] = id;
    }
    PyMem_RawFree(waiting);
    return trim(self, any_taken) < 0 || failed ? -1 : 0;
}

/* A chain of the batch asked about: which of its distinct chains it is. */
struct seen_entry {
    uint64_t hash;
    uint64_t chain;
    uint32_t index;
};

static int same_seen(const void *entry, const void *key)
{
    return ((const struct seen_entry *)entry)->chain == *(const uint64_t *)key;
}

/* resolve(chains) -> bytes of uint32: the stack id of each event's chain, 0 where it has
 * none or its record was lost. `chains`: a batch's py_chain column (uint64, 0: no stack);
 * each distinct chain is resolved once, each event given its id without a join. */
static PyObject *Stacks_resolve(Stacks *self, PyObject *arg)
{
    Py_buffer chains;
    if (PyObject_GetBuffer(arg, &chains, PyBUF_SIMPLE) < 0)
        return NULL;
    size_t n = (size_t)chains.len / sizeof(uint64_t), n_distinct = 0;
    const unsigned char *column = chains.buf;
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * sizeof(uint32_t)));
    uint32_t *which = PyMem_RawMalloc((n ? n : 1) * sizeof *which);     /* each event's distinct chain */
    uint64_t *distinct = PyMem_RawMalloc((n ? n : 1) * sizeof *distinct);
    uint32_t *distinct_ids = PyMem_RawMalloc((n ? n : 1) * sizeof *distinct_ids);
    struct table seen;
    int failed = !out || !which || !distinct || !distinct_ids || table_init(&seen, sizeof(struct seen_entry)) < 0;
    if (failed) {
        if (out)
            PyErr_NoMemory();
        seen.slots = NULL;
    }
    uint64_t previous = 0;
    uint32_t previous_index = 0;
    for (size_t i = 0; i < n && !failed; i++) {
        uint64_t chain = read_u64(column + i * sizeof chain);
        if (!chain) {
            which[i] = UINT32_MAX;
        } else if (chain == previous) { /* runs: a loop's calls */
            which[i] = previous_index;
        } else {
            uint64_t hash = chain_hash(chain);
            struct seen_entry *entry = table_find(&seen, hash, &chain, same_seen);
            if (!entry) {
                if (!(entry = table_add(&seen, hash))) {
                    failed = 1;
                    PyErr_NoMemory();
                    break;
                }
                entry->chain = chain;
                entry->index = (uint32_t)n_distinct;
                distinct[n_distinct++] = chain;
            }
            which[i] = previous_index = entry->index;
            previous = chain;
        }
    }
    failed = failed || resolve_distinct(self, distinct, n_distinct, distinct_ids) < 0;
    if (!failed) {
        uint32_t *ids = (uint32_t *)PyBytes_AS_STRING(out);
        for (size_t i = 0; i < n; i++)
            ids[i] = which[i] == UINT32_MAX ? 0 : distinct_ids[which[i]];
    }
    if (seen.slots)
        table_free(&seen);
    PyMem_RawFree(which);
    PyMem_RawFree(distinct);
    PyMem_RawFree(distinct_ids);
    PyBuffer_Release(&chains);
    if (failed)
        Py_CLEAR(out);
    return out;
}

static PyObject *Stacks_take_new(Stacks *self, PyObject *unused)
{
    (void)unused;
    PyObject *fresh = PyDict_New();
    if (!fresh)
        return NULL;
    PyObject *taken = self->new_stacks;
    self->new_stacks = fresh;
    return taken;
}

static PyObject *Stacks_get_stacks(Stacks *self, void *closure)
{
    (void)closure;
    return Py_NewRef(self->stacks);
}

static PyObject *Stacks_get_unknown(Stacks *self, void *closure)
{
    (void)closure;
    return PyLong_FromUnsignedLongLong(self->unknown_chains);
}

static PyObject *Stacks_get_pending(Stacks *self, void *closure)
{
    (void)closure;
    size_t count = 0;
    for (size_t i = 0; i < self->pending.count; i++)
        count += !((struct pending_entry *)TABLE_ENTRY(&self->pending, i))->taken;
    return PyLong_FromSize_t(count);
}

static PyMethodDef Stacks_methods[] = {
    {"add", (PyCFunction)Stacks_add, METH_O,
     "add(records): chain and code records in the ring's format (8-byte headers); other kinds are skipped."},
    {"forget", (PyCFunction)Stacks_forget, METH_O, "forget(pids): the code objects and chains of processes gone."},
    {"resolve", (PyCFunction)Stacks_resolve, METH_O,
     "resolve(chains) -> bytes: the uint32 stack id of each event's uint64 chain (0: none, or unknown)."},
    {"take_new", (PyCFunction)Stacks_take_new, METH_NOARGS, "take_new() -> {id: Stack}: stacks resolved since the last call."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Stacks_getset[] = {
    {"stacks", (getter)Stacks_get_stacks, NULL, "{id: Stack}: the stacks kept, for their levels.", NULL},
    {"unknown_chains", (getter)Stacks_get_unknown, NULL, "Chains asked for whose record was lost.", NULL},
    {"pending", (getter)Stacks_get_pending, NULL, "Chain records kept, not resolved yet.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject StacksType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ioobserve._core.Stacks",
    .tp_doc = "Stacks(kept, max_frames, frame_type, stack_type): Python chain and code records, resolved into stack ids.",
    .tp_basicsize = sizeof(Stacks),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Stacks_init,
    .tp_dealloc = (destructor)Stacks_dealloc,
    .tp_methods = Stacks_methods,
    .tp_getset = Stacks_getset,
};
