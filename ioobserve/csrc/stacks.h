/* The Python stacks' tables, shared by stacks.c (resolving chains) and stack_records.c
 * (taking the kernel's records in and forgetting processes). */
#ifndef IOOBSERVE_STACKS_H
#define IOOBSERVE_STACKS_H

#include <Python.h>
#include <string.h>

#include "core.h"
#include "linetable.h"
#include "table.h"

struct code_entry {
    uint64_t hash;
    uint64_t address;
    uint32_t pid;
    uint32_t version; /* major << 8 | minor */
    int64_t first;    /* co_firstlineno */
    PyObject *function, *file;
    unsigned char *table;
    size_t table_length;
    struct line_range *ranges; /* parsed on first use */
    size_t n_ranges;
    int parsed;
};

struct code_key {
    uint64_t address;
    uint32_t pid;
};

struct known_entry { /* a frame met before: (pid, code, instruction) -> number */
    uint64_t hash;
    uint64_t address;
    uint32_t pid, instr, number;
};

struct resolved_entry {
    uint64_t hash;
    uint64_t chain;
    uint64_t stamp;
    uint32_t stack;
};

struct frame_ref {
    uint64_t code;
    uint32_t instr;
};

struct pending_entry { /* a chain record not resolved yet */
    uint64_t hash;
    uint64_t chain;
    uint64_t stamp;
    uint32_t pid, depth, truncated, taken;
    struct frame_ref *frames;
};

struct stack_entry {
    uint64_t hash;
    uint64_t stamp;
    uint32_t *numbers;
    uint32_t depth, truncated, id;
};

struct stack_key {
    const uint32_t *numbers;
    uint32_t depth, truncated;
};

typedef struct {
    PyObject_HEAD
    size_t kept, max_frames;
    PyObject *frame_type, *stack_type;
    PyObject *unknown_frame;
    struct table codes, known, resolved, pending, stack_keys;
    PyObject *frame_numbers; /* (function, file, line) -> number */
    PyObject *frames;        /* number -> Frame */
    PyObject *stacks;        /* id -> Stack */
    PyObject *new_stacks;    /* id -> Stack, resolved since take_new */
    uint64_t clock;          /* last-use stamps */
    struct {                 /* the chain resolved last: its outer frames are the next one's, often */
        uint32_t pid, depth;
        struct frame_ref frames[ev_PY_MAX_FRAMES];
        uint32_t numbers[ev_PY_MAX_FRAMES];
    } last;
    uint32_t next_id;
    unsigned long long unknown_chains;
} Stacks;

static inline uint32_t read_u32(const unsigned char *at)
{
    uint32_t value;
    memcpy(&value, at, sizeof value);
    return value;
}

static inline uint64_t read_u64(const unsigned char *at)
{
    uint64_t value;
    memcpy(&value, at, sizeof value);
    return value;
}

static inline uint64_t code_hash(uint32_t pid, uint64_t address)
{
    uint64_t words[2] = {pid, address};
    return hash_words(words, 2);
}

static inline int same_code(const void *entry, const void *key)
{
    const struct code_entry *code = entry;
    const struct code_key *wanted = key;
    return code->address == wanted->address && code->pid == wanted->pid;
}

static inline uint64_t chain_hash(uint64_t chain)
{
    return hash_words(&chain, 1);
}

static inline int same_resolved(const void *entry, const void *key)
{
    return ((const struct resolved_entry *)entry)->chain == *(const uint64_t *)key;
}

static inline int same_pending(const void *entry, const void *key)
{
    return ((const struct pending_entry *)entry)->chain == *(const uint64_t *)key;
}

/* What a code entry holds, released (its entry is dropped or replaced). */
void code_release(struct code_entry *code);
PyObject *Stacks_add(Stacks *self, PyObject *arg);
PyObject *Stacks_forget(Stacks *self, PyObject *arg);

#endif
