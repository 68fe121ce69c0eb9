/* The hash table of table.h. Its memory comes from PyMem_Raw*, as the rest of the core's. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#include "table.h"

#define FIRST_SLOTS 64

int table_init(struct table *table, size_t entry_size)
{
    memset(table, 0, sizeof *table);
    table->entry_size = entry_size;
    table->slots = PyMem_RawCalloc(FIRST_SLOTS, sizeof *table->slots);
    if (!table->slots)
        return -1;
    table->mask = FIRST_SLOTS - 1;
    return 0;
}

void table_free(struct table *table)
{
    PyMem_RawFree(table->entries);
    PyMem_RawFree(table->slots);
    table->entries = NULL;
    table->slots = NULL;
    table->count = table->room = 0;
}

/* A 64-bit mix of the words (a splitmix64 step per word). */
uint64_t hash_words(const uint64_t *words, size_t count)
{
    uint64_t hash = 0x9E3779B97F4A7C15ULL ^ count;
    for (size_t i = 0; i < count; i++) {
        uint64_t z = hash + words[i] + 0x9E3779B97F4A7C15ULL;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        hash = z ^ (z >> 31);
    }
    return hash;
}

static uint64_t entry_hash(const struct table *table, size_t index)
{
    uint64_t hash;
    memcpy(&hash, table->entries + index * table->entry_size, sizeof hash);
    return hash;
}

/* The entries placed in `slots`, n_slots of them (a power of two, zeroed), which the table
 * then owns. */
static void place(struct table *table, uint32_t *slots, size_t n_slots)
{
    size_t mask = n_slots - 1;
    for (size_t i = 0; i < table->count; i++) {
        size_t slot = (size_t)entry_hash(table, i) & mask;
        while (slots[slot])
            slot = (slot + 1) & mask;
        slots[slot] = (uint32_t)(i + 1);
    }
    if (slots != table->slots)
        PyMem_RawFree(table->slots);
    table->slots = slots;
    table->mask = mask;
}

static int grow(struct table *table)
{
    size_t n_slots = (table->mask + 1) * 2;
    uint32_t *slots = PyMem_RawCalloc(n_slots, sizeof *slots);
    if (!slots)
        return -1;
    place(table, slots, n_slots);
    return 0;
}

void *table_find(const struct table *table, uint64_t hash, const void *key, table_same same)
{
    size_t slot = (size_t)hash & table->mask;
    uint32_t at;
    while ((at = table->slots[slot]) != 0) {
        void *entry = TABLE_ENTRY(table, at - 1);
        if (entry_hash(table, at - 1) == hash && same(entry, key))
            return entry;
        slot = (slot + 1) & table->mask;
    }
    return NULL;
}

/* A new entry (zeroed but for its hash) at the end; NULL when out of memory. The pointer
 * holds until the next table_add or table_keep. */
void *table_add(struct table *table, uint64_t hash)
{
    if (table->count >= UINT32_MAX - 1)
        return NULL;
    if ((table->count + 1) * 2 > table->mask + 1 && grow(table) < 0)
        return NULL;
    if (table->count == table->room) {
        size_t room = table->room ? table->room * 2 : 32;
        char *entries = PyMem_RawRealloc(table->entries, room * table->entry_size);
        if (!entries)
            return NULL;
        table->entries = entries;
        table->room = room;
    }
    void *entry = TABLE_ENTRY(table, table->count);
    memset(entry, 0, table->entry_size);
    memcpy(entry, &hash, sizeof hash);
    size_t slot = (size_t)hash & table->mask;
    while (table->slots[slot])
        slot = (slot + 1) & table->mask;
    table->slots[slot] = (uint32_t)(table->count + 1);
    table->count++;
    return entry;
}

/* Only the entries `keeps` keeps, in their order, and the index rebuilt: smaller when the
 * memory for it can be had, else in the slots it had. */
void table_keep(struct table *table, table_keeps keeps, void *context)
{
    if (!table->slots)
        return; /* never set up */
    size_t kept = 0;
    for (size_t i = 0; i < table->count; i++) {
        void *entry = TABLE_ENTRY(table, i);
        if (keeps(entry, context)) {
            if (kept != i)
                memcpy(TABLE_ENTRY(table, kept), entry, table->entry_size);
            kept++;
        }
    }
    table->count = kept;
    size_t n_slots = FIRST_SLOTS;
    while (n_slots < kept * 2 + 2)
        n_slots *= 2;
    uint32_t *slots = n_slots < table->mask + 1 ? PyMem_RawCalloc(n_slots, sizeof *slots) : NULL;
    if (!slots) {
        slots = table->slots;
        n_slots = table->mask + 1;
        memset(slots, 0, n_slots * sizeof *slots);
    }
    place(table, slots, n_slots);
}
