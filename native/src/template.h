/* Transfer templates and their posts by block lists (template.c). */
#ifndef KVT_TEMPLATE_H
#define KVT_TEMPLATE_H

#include "kvreuse_transport.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kvt_agent kvt_agent;

/* The end of a route's segment of block `block` (its last row's end) on one side, or false when it overflows 64
 * bits (rows at least 1). */
static inline bool kvt_route_segment_end(uint64_t base, uint64_t block, uint64_t block_stride, uint32_t rows,
                                         uint64_t row_stride, uint64_t row_bytes, uint64_t *out) {
    uint64_t block_offset, row_offset, end;
    return !__builtin_mul_overflow(block, block_stride, &block_offset) &&
           !__builtin_mul_overflow((uint64_t)(rows - 1), row_stride, &row_offset) &&
           !__builtin_add_overflow(base, block_offset, &end) && !__builtin_add_overflow(end, row_offset, &end) &&
           !__builtin_add_overflow(end, row_bytes, out);
}

/* Frees every registered template of a destroyed agent. */
void kvt_templates_free_all(kvt_agent *agent);

#endif
