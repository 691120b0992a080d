/* The owner's side of vram readers hold. A reader in another process opens the owner's allocation through its CUDA
 * IPC handle, and CUDA leaves undefined what a cuMemFree of it does before every importer closed it. So a reader
 * holds each vram region it has open (a read lock on the region's first byte in the owner's liveness table's file,
 * file_regions.c), and closes it once it finds the region withdrawn and unused (vram_xfer.c); the owner frees an
 * allocation only once it can claim the allocation's whole range (a write lock), which no hold then overlaps. The
 * owner never sees a reader's moves either: a reader holds a region it WRITEs into from before the launch until the
 * work completed, so a withdrawal waits for WRITEs already launched. A reader's holds end with its process, so a
 * reader that dies holding one delays nothing. */
#include "vram_holds.h"

#include "agent.h"
#include "file_regions.h"
#include "services/cuda_memory.h"
#include "services/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define VRAM_FREE_RETRY_NS 20000000ull
#define WRITES_POLL_NS 200000L

/* A vram allocation of the agent's own (not imported) taken out of its table, whose free waits for readers. */
typedef struct kvt_vram_free {
    uint64_t address, length;
    uint32_t device;
    struct kvt_vram_free *next;
} kvt_vram_free;

/* Frees `allocation` when no reader holds it; whether it did. */
static bool free_unheld(kvt_agent *agent, uint64_t address, uint64_t length, uint32_t device) {
    if (!kvt_liveness_claim(agent, KVT_HOLD_MAPPING, address, length)) return false;
    kvt_vram_release(device, address);
    kvt_liveness_unclaim(agent, KVT_HOLD_MAPPING, address, length);
    return true;
}

void kvt_vram_free_owned(kvt_agent *agent, const kvt_allocation *allocation) {
    if (free_unheld(agent, allocation->address, allocation->length, allocation->device)) return;
    kvt_vram_free *waiting = malloc(sizeof *waiting);
    if (!waiting) { /* out of memory to wait in: freed at once rather than never */
        kvt_vram_release(allocation->device, allocation->address);
        return;
    }
    *waiting = (kvt_vram_free){.address = allocation->address,
                               .length = allocation->length,
                               .device = allocation->device,
                               .next = agent->vram_frees};
    agent->vram_frees = waiting;
    kvt_counter_add(&agent->counters, KVT_COUNTER_DEFERRED_VRAM_FREES, 1);
}

/* Frees every waiting allocation that `force` says to (or that no reader holds any more), writing what was forced
 * into `forced`. */
static void free_waiting(kvt_agent *agent, bool force, char *forced, size_t forced_size) {
    for (kvt_vram_free **link = &agent->vram_frees; *link;) {
        kvt_vram_free *waiting = *link;
        bool freed = free_unheld(agent, waiting->address, waiting->length, waiting->device);
        if (!freed && !force) {
            link = &waiting->next;
            continue;
        }
        if (!freed) {
            size_t used = strlen(forced);
            snprintf(forced + used, forced_size - used, "%s0x%llx (%llu bytes, GPU %u)", used ? ", " : "",
                     (unsigned long long)waiting->address, (unsigned long long)waiting->length, waiting->device);
            kvt_vram_release(waiting->device, waiting->address);
        }
        *link = waiting->next;
        free(waiting);
        kvt_counter_add(&agent->counters, KVT_COUNTER_DEFERRED_VRAM_FREES, -1);
    }
}

void kvt_vram_frees_retry(kvt_agent *agent) {
    if (!agent->vram_frees) return;
    uint64_t now = kvt_now_ns();
    if (now < agent->vram_frees_retry_ns) return;
    agent->vram_frees_retry_ns = now + VRAM_FREE_RETRY_NS;
    free_waiting(agent, false, NULL, 0);
}

void kvt_vram_frees_finish(kvt_agent *agent, uint64_t deadline_ns, char *forced, size_t forced_size) {
    forced[0] = '\0';
    struct timespec pause = {.tv_nsec = (long)VRAM_FREE_RETRY_NS};
    for (free_waiting(agent, false, NULL, 0); agent->vram_frees && kvt_now_ns() < deadline_ns;
         free_waiting(agent, false, NULL, 0))
        nanosleep(&pause, NULL);
    free_waiting(agent, true, forced, forced_size);
}

/* Whether no reader holds a WRITE into [address, +length) now (the range claimed, and let go at once: a WRITE held
 * after it finds the region withdrawn). */
static bool no_writes(kvt_agent *agent, uint64_t address, uint64_t length) {
    if (!kvt_liveness_claim(agent, KVT_HOLD_WRITE, address, length)) return false;
    kvt_liveness_unclaim(agent, KVT_HOLD_WRITE, address, length);
    return true;
}

void kvt_vram_await_writes(kvt_agent *agent, const kvt_region *region) {
    if (no_writes(agent, region->address, region->length)) return;
    kvt_counter_add(&agent->counters, KVT_COUNTER_WITHDRAWALS_AWAITING_WRITES, 1);
    struct timespec pause = {.tv_nsec = WRITES_POLL_NS};
    uint64_t deadline_ns = kvt_now_ns() + KVT_WRITES_WAIT_NS;
    do nanosleep(&pause, NULL);
    while (!no_writes(agent, region->address, region->length) && kvt_now_ns() < deadline_ns);
    kvt_counter_add(&agent->counters, KVT_COUNTER_WITHDRAWALS_AWAITING_WRITES, -1);
}
