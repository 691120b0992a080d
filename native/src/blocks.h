/* Warm blocks of memory for operations (blocks.c). */
#ifndef KVT_BLOCKS_H
#define KVT_BLOCKS_H

#include "kvreuse_transport.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kvt_agent kvt_agent;

/* Blocks of at least this many bytes are kept for reuse (smaller ones come warm from malloc's heap). */
#define KVT_BLOCK_CACHED_MIN ((size_t)64 << 10)
/* At most this many blocks and bytes are kept per agent (the smallest are freed first). */
#define KVT_BLOCK_CACHE_COUNT 4u
#define KVT_BLOCK_CACHE_BYTES ((size_t)128 << 20)
/* Prepared when the agent starts: an operation of up to ~130,000 descriptors. */
#define KVT_BLOCK_RESERVE_BYTES ((size_t)4 << 20)
/* Bytes the progress thread writes of a block it prepares per round (commands are served between). */
#define KVT_BLOCK_PREPARE_SLICE ((size_t)256 << 10)

void kvt_blocks_init(kvt_agent *agent);
/* `bytes` of memory that is not zeroed (any thread): a cached block when one is large enough, else
 * fresh; NULL when out of memory. A large take asks the progress thread to prepare another of its size. */
void *kvt_block_take(kvt_agent *agent, size_t bytes);
/* Returns a block from kvt_block_take (NULL: nothing) to the cache, or frees it. */
void kvt_block_give(kvt_agent *agent, void *block);
/* (P) Prepares the reserve block, whole (at start, before any call can wait on the progress thread). */
void kvt_blocks_reserve(kvt_agent *agent);
/* (P) Prepares a slice of the block asked for (unless one as large is cached), writing it once so that
 * its pages are in place; cached once whole. True while it works. */
bool kvt_blocks_prepare(kvt_agent *agent);
/* Bytes cached (for tests). */
size_t kvt_blocks_cached_bytes(kvt_agent *agent);
/* Frees every cached block of a destroyed agent. */
void kvt_blocks_free_all(kvt_agent *agent);

#endif
