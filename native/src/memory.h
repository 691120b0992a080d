/* Allocations and registered regions (memory.c). */
#ifndef KVT_MEMORY_H
#define KVT_MEMORY_H

#include "kvreuse_transport.h"

#include "services/mapping.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kvt_agent kvt_agent;

typedef struct kvt_allocation {
    uint64_t address, length;
    uint32_t kind, device; /* KVT_MEM_*: vram allocations are the CUDA driver's (vram.c), without a backend part */
    void *backend;         /* UCX: ucp_mem_h of the UCP_MEM_MAP_ALLOCATE mapping */
    /* The shared memory the backend may have placed it in (UCX: the kinds UCX_TLS leaves in); none for private
     * memory. */
    kvt_shared_memory_kinds shared_memory;
    bool locked;
    bool populating; /* kvt_mem_alloc_begin: its pages are being backed on the progress thread */
    /* kvt_mem_open_vram_ipc: another process's vram mapped here through its CUDA IPC handle (kept: regions
     * inside it export it, as this mapping cannot be re-exported), closed instead of freed. */
    bool imported;
    uint8_t ipc_handle[64];
} kvt_allocation;

typedef struct kvt_region {
    uint32_t id, kind, device;
    uint64_t address, length;
    uint32_t busy;         /* references from non-terminal operations */
    void *backend;         /* UCX: ucp_mem_h */
    bool backend_borrowed; /* the handle belongs to an allocation */
    uint8_t *rkey;         /* packed remote key (may be empty) */
    uint32_t rkey_length;
    int file_fd; /* kvt_mem_register_fd: the library's duplicate of the file's fd, else -1 */
    uint64_t file_offset;
    uint32_t liveness_slot; /* its slot in the agent's liveness table (file-backed and vram regions) */
} kvt_region;

/* Records an allocation in the agent's table and counters (agent->lock held). */
kvt_status kvt_allocation_record_locked(kvt_agent *agent, const kvt_allocation *allocation);

#endif
