/* Counters: one set per agent and one for the process (counters.c). */
#ifndef KVT_COUNTERS_H
#define KVT_COUNTERS_H

#include "kvreuse_transport.h"

#include <stdatomic.h>
#include <stdint.h>

typedef struct kvt_counter_set {
    _Atomic uint64_t values[KVT_COUNTER_COUNT];
} kvt_counter_set;

/* Adds `delta` to counter `index` of `set` (NULL: none) and of the process. */
void kvt_counter_add(kvt_counter_set *set, uint32_t index, int64_t delta);
/* Counts `status` when it is an error (in `set`, if any, and process-wide) and returns it. */
kvt_status kvt_count_result(kvt_counter_set *set, kvt_status status);
/* Copies up to `capacity` counters of `set` (NULL: the process's) into `values`; returns how many. */
uint32_t kvt_counters_copy(const kvt_counter_set *set, uint64_t *values, uint32_t capacity);

#endif
