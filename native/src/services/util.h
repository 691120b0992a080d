/* Clocks, checksums, random numbers and a uint64 key → pointer map (util.c). */
#ifndef KVT_UTIL_H
#define KVT_UTIL_H

#include "kvreuse_transport.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KVT_NS_PER_MS 1000000ull

uint64_t kvt_now_ns(void);
uint32_t kvt_crc32(const uint8_t *data, size_t length);
uint64_t kvt_random64(void);

/* uint64 key → pointer map (open addressing, keys != 0). */
typedef struct {
    uint64_t *keys;
    void **values;
    size_t capacity; /* power of two or 0 */
    size_t size;
} kvt_map;
void *kvt_map_get(const kvt_map *map, uint64_t key);
bool kvt_map_put(kvt_map *map, uint64_t key, void *value); /* false when out of memory */
void kvt_map_remove(kvt_map *map, uint64_t key);
void kvt_map_free(kvt_map *map);

#endif
