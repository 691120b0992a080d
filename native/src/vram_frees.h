/* An owner's free of its own vram, which waits for readers in other processes that still have a region of it open
 * through its CUDA IPC handle (vram_frees.c). */
#ifndef KVT_VRAM_FREES_H
#define KVT_VRAM_FREES_H

#include "memory.h"

#include <stddef.h>
#include <stdint.h>

typedef struct kvt_agent kvt_agent;

/* A vram allocation of the agent's own (not imported) taken out of its table, whose free waits for readers. */
typedef struct kvt_vram_free {
    uint64_t address, length;
    uint32_t device;
    struct kvt_vram_free *next;
} kvt_vram_free;

/* (P) Frees the agent's own vram `allocation` (taken out of its table, every region in it withdrawn) now when no
 * reader holds a region of it (kvt_liveness_claim), else once none does: CUDA leaves a free undefined while another
 * process has the allocation open. Until then it counts in KVT_COUNTER_DEFERRED_VRAM_FREES. */
void kvt_vram_free_owned(kvt_agent *agent, const kvt_allocation *allocation);
/* (P) Frees the waiting allocations no reader holds any more, at most every VRAM_FREE_RETRY_NS. */
void kvt_vram_frees_retry(kvt_agent *agent);
/* (P, at the agent's stop) Waits for the readers until `deadline_ns`, then frees what they still hold regardless,
 * naming it in `forced` (empty when nothing was). */
void kvt_vram_frees_finish(kvt_agent *agent, uint64_t deadline_ns, char *forced, size_t forced_size);

#endif
