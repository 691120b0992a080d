/* The owner's side of its vram that readers in other processes hold through its CUDA IPC handle (vram_holds.c): a
 * free waits until no reader has the allocation open, a withdrawal until no reader's WRITE into it is in flight. */
#ifndef KVT_VRAM_HOLDS_H
#define KVT_VRAM_HOLDS_H

#include "memory.h"

#include <stddef.h>
#include <stdint.h>

typedef struct kvt_agent kvt_agent;

/* (P) Frees the agent's own vram `allocation` (taken out of its table, every region in it withdrawn) now when no
 * reader holds a region of it (kvt_liveness_claim), else once none does: CUDA leaves a free undefined while another
 * process has the allocation open. Until then it counts in KVT_COUNTER_DEFERRED_VRAM_FREES. */
void kvt_vram_free_owned(kvt_agent *agent, const kvt_allocation *allocation);
/* (P) Frees the waiting allocations no reader holds any more, at most every VRAM_FREE_RETRY_NS. */
void kvt_vram_frees_retry(kvt_agent *agent);
/* (P, at the agent's stop) Waits for the readers until `deadline_ns`, then frees what they still hold regardless,
 * naming it in `forced` (empty when nothing was). */
void kvt_vram_frees_finish(kvt_agent *agent, uint64_t deadline_ns, char *forced, size_t forced_size);

/* How long a withdrawal waits for readers' WRITEs in flight (a reader that does not let go by then is stopped or
 * hung: its GPU work itself ends on its own). */
#define KVT_WRITES_WAIT_NS 1000000000ull
/* (the thread that withdrew `region`, after its slot was cleared) Waits until no reader in another process has a WRITE
 * through CUDA IPC into the vram `region` in flight (each holds the region from before its launch until its work
 * completed), at most KVT_WRITES_WAIT_NS; meanwhile counted in KVT_COUNTER_WITHDRAWALS_AWAITING_WRITES. A WRITE
 * launched before the withdrawal then lands before the memory can go to other use. */
void kvt_vram_await_writes(kvt_agent *agent, const kvt_region *region);

#endif
