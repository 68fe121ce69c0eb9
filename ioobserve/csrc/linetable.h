/* Line numbers from CPython line tables (linetable.c). */
#ifndef IOOBSERVE_LINETABLE_H
#define IOOBSERVE_LINETABLE_H

#include <stddef.h>
#include <stdint.h>

#define NO_LINE (-1) /* ioobserve.python.linetable.NO_LINE: no line for this instruction */

struct line_range {
    uint64_t start, end; /* bytes of bytecode, [start, end) */
    int64_t line;
};

int line_ranges(const unsigned char *table, size_t length, int64_t first, int before_311,
                struct line_range **out, size_t *count);
int64_t line_at(const struct line_range *ranges, size_t count, uint64_t offset);

#endif
