/* A hash table of fixed-size entries kept dense in insertion order, found through an
 * open-addressing index (ioobserve._core's Python stacks keep theirs in it). Each entry
 * starts with its key's 64-bit hash; what follows is the user's. Entries are only added one
 * by one and dropped in bulk (table_keep), which compacts them and rebuilds the index. */
#ifndef IOOBSERVE_TABLE_H
#define IOOBSERVE_TABLE_H

#include <stddef.h>
#include <stdint.h>

struct table {
    size_t entry_size; /* bytes per entry, its uint64_t hash first */
    size_t count;      /* entries in use */
    size_t room;       /* entries allocated */
    char *entries;
    uint32_t *slots;   /* entry index + 1, or 0 for an empty slot */
    size_t mask;       /* number of slots - 1 (a power of two) */
};

/* Whether `entry` holds `key` (its hash already matched). */
typedef int (*table_same)(const void *entry, const void *key);
/* Whether to keep `entry`; an entry not kept must have released what it owns. */
typedef int (*table_keeps)(void *entry, void *context);

int table_init(struct table *table, size_t entry_size);
void table_free(struct table *table);
void *table_find(const struct table *table, uint64_t hash, const void *key, table_same same);
void *table_add(struct table *table, uint64_t hash);
void table_keep(struct table *table, table_keeps keeps, void *context);
uint64_t hash_words(const uint64_t *words, size_t count);

#define TABLE_ENTRY(table, i) ((void *)((table)->entries + (size_t)(i) * (table)->entry_size))

#endif
