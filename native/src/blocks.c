/* Warm memory for operations: the blocks that hold an operation's descriptor table (or a template
 * post's block lists) are reused rather than freed, and the progress thread prepares one ahead.
 *
 * Memory a process has not written yet costs far more on its first write than reused memory: every
 * page faults, and on a virtual machine the host faults too. Measured on the development VM: writing
 * 4 MB of fresh memory 11–12 ms (MAP_POPULATE does not help: 0.5 ms, then 6 ms on the first write),
 * the same 4 MB reused 0.05 ms. A post of 100,000 descriptors builds a 3.2 MB table on the calling
 * thread, so without reuse the first posts of an agent held that thread for 10–20 ms. */
#include "agent.h"

#include "blocks.h"

#include <stdlib.h>
#include <string.h>

typedef struct kvt_block {
    size_t capacity;
    struct kvt_block *next;
    _Alignas(max_align_t) unsigned char data[];
} kvt_block;

static kvt_block *block_of(void *data) { return (kvt_block *)((unsigned char *)data - offsetof(kvt_block, data)); }

void kvt_blocks_init(kvt_agent *agent) { pthread_mutex_init(&agent->blocks_lock, NULL); }

/* Unlinks the smallest cached block of at least `bytes` (blocks_lock held), or NULL. */
static kvt_block *take_cached_locked(kvt_agent *agent, size_t bytes) {
    kvt_block **best = NULL;
    for (kvt_block **link = &agent->blocks_cached; *link; link = &(*link)->next)
        if ((*link)->capacity >= bytes && (!best || (*link)->capacity < (*best)->capacity)) best = link;
    if (!best) return NULL;
    kvt_block *block = *best;
    *best = block->next;
    agent->blocks_cached_count--;
    agent->blocks_cached_bytes -= block->capacity;
    return block;
}

static void want(kvt_agent *agent, size_t bytes) {
    size_t wanted = atomic_load_explicit(&agent->blocks_wanted, memory_order_relaxed);
    while (wanted < bytes && !atomic_compare_exchange_weak_explicit(&agent->blocks_wanted, &wanted, bytes,
                                                                    memory_order_relaxed, memory_order_relaxed)) {
    }
}

void *kvt_block_take(kvt_agent *agent, size_t bytes) {
    if (bytes >= KVT_BLOCK_CACHED_MIN) {
        pthread_mutex_lock(&agent->blocks_lock);
        kvt_block *block = take_cached_locked(agent, bytes);
        pthread_mutex_unlock(&agent->blocks_lock);
        want(agent, bytes); /* the next post of this size finds one too */
        if (block) return block->data;
    }
    kvt_block *block = malloc(sizeof(kvt_block) + bytes);
    if (!block) return NULL;
    block->capacity = bytes;
    return block->data;
}

void kvt_block_give(kvt_agent *agent, void *data) {
    if (!data) return;
    kvt_block *block = block_of(data);
    if (block->capacity < KVT_BLOCK_CACHED_MIN || block->capacity > KVT_BLOCK_CACHE_BYTES) {
        free(block);
        return;
    }
    kvt_block *evicted = NULL;
    pthread_mutex_lock(&agent->blocks_lock);
    block->next = agent->blocks_cached;
    agent->blocks_cached = block;
    agent->blocks_cached_count++;
    agent->blocks_cached_bytes += block->capacity;
    /* Over the bounds: the smallest go first (the largest serve every smaller post). */
    while (agent->blocks_cached_count > KVT_BLOCK_CACHE_COUNT || agent->blocks_cached_bytes > KVT_BLOCK_CACHE_BYTES) {
        kvt_block *smallest = take_cached_locked(agent, 0);
        smallest->next = evicted;
        evicted = smallest;
    }
    pthread_mutex_unlock(&agent->blocks_lock);
    while (evicted) {
        kvt_block *next = evicted->next;
        free(evicted);
        evicted = next;
    }
}

void kvt_blocks_reserve(kvt_agent *agent) {
    want(agent, KVT_BLOCK_RESERVE_BYTES);
    while (kvt_blocks_prepare(agent)) {
    }
}

bool kvt_blocks_prepare(kvt_agent *agent) {
    kvt_block *block = agent->blocks_preparing;
    if (!block) {
        size_t wanted = atomic_exchange_explicit(&agent->blocks_wanted, 0, memory_order_relaxed);
        if (wanted == 0) return false;
        pthread_mutex_lock(&agent->blocks_lock);
        bool cached = false;
        for (const kvt_block *b = agent->blocks_cached; b && !cached; b = b->next) cached = b->capacity >= wanted;
        pthread_mutex_unlock(&agent->blocks_lock);
        if (cached) return false;
        block = malloc(sizeof(kvt_block) + wanted);
        if (!block) return false; /* a post then allocates for itself */
        block->capacity = wanted;
        agent->blocks_preparing = block;
        agent->blocks_prepared = 0;
    }
    /* The first write, here rather than on a caller's thread; a slice per round, so that commands queued
     * meanwhile wait for one slice at most. */
    size_t slice = block->capacity - agent->blocks_prepared;
    if (slice > KVT_BLOCK_PREPARE_SLICE) slice = KVT_BLOCK_PREPARE_SLICE;
    memset(block->data + agent->blocks_prepared, 0, slice);
    agent->blocks_prepared += slice;
    if (agent->blocks_prepared == block->capacity) {
        agent->blocks_preparing = NULL;
        kvt_block_give(agent, block->data);
    }
    return true;
}

size_t kvt_blocks_cached_bytes(kvt_agent *agent) {
    pthread_mutex_lock(&agent->blocks_lock);
    size_t bytes = agent->blocks_cached_bytes;
    pthread_mutex_unlock(&agent->blocks_lock);
    return bytes;
}

void kvt_blocks_free_all(kvt_agent *agent) {
    free(agent->blocks_preparing);
    agent->blocks_preparing = NULL;
    kvt_block *block = agent->blocks_cached;
    while (block) {
        kvt_block *next = block->next;
        free(block);
        block = next;
    }
    agent->blocks_cached = NULL;
    agent->blocks_cached_count = 0;
    agent->blocks_cached_bytes = 0;
    pthread_mutex_destroy(&agent->blocks_lock);
}
