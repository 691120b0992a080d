/* The metadata blob an agent exports and its peers load (metadata.c). */
#ifndef KVT_METADATA_H
#define KVT_METADATA_H

#include "kvreuse_transport.h"

#include "liveness.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kvt_agent kvt_agent;

/* One region a peer advertised. */
typedef struct kvt_remote_region {
    uint32_t id, kind, device;
    uint64_t address, length;
    uint8_t *rkey;
    uint32_t rkey_length;
    void *backend;      /* UCX: ucp_rkey_h */
    uint8_t *mapped;    /* UCX: where this process maps the whole region through shared memory, or NULL */
    uint64_t vram_base; /* vram: where this process opened the peer's allocation (CUDA IPC, vram_xfer.c), or 0 */
    /* vram (P, vram_xfer.c): the launch of this agent that last listed it for its liveness check (or 0), the
     * ops in flight that listed it, and whether a check found it withdrawn (its mapping is then closed once
     * no op uses it, and not opened again). */
    uint64_t vram_noted;
    uint32_t vram_users;
    bool vram_withdrawn;
    uint32_t vram_writes; /* (P) WRITEs into it through CUDA IPC in flight, which hold it (vram_xfer.c) */
    /* A file-backed region (kvt_mem_register_fd): the fd number in the peer's process (KVT_NO_FILE_FD when
     * none) and the region's offset in that file; its slot in the peer's liveness table, as a vram region's. */
    uint32_t file_fd;
    uint64_t file_offset;
    uint32_t liveness_slot;
    uint8_t *file_view; /* UCX: where this process maps the region's file for READs (file_regions.c), or NULL */
    void *file_mapping; /* the mapping file_view lies in (page-aligned), and its length */
    uint64_t file_mapping_length;
} kvt_remote_region;

#define KVT_NO_FILE_FD UINT32_MAX

/* A peer's parsed metadata blob. */
typedef struct kvt_metadata {
    uint32_t backend;
    char name[KVT_MAX_NAME + 1];
    uint64_t incarnation, generation;
    uint8_t *worker_address;
    uint32_t worker_address_length;
    uint8_t *network_address; /* the worker's network devices alone (ucx); length 0 when none */
    uint32_t network_address_length;
    kvt_process_identity process;
    uint32_t liveness_fd; /* the fd number of its liveness table in its process, KVT_NO_FILE_FD when none */
    uint32_t region_count;
    kvt_remote_region *regions;
} kvt_metadata;

kvt_status kvt_metadata_encode_locked(kvt_agent *agent, uint8_t *buffer, uint64_t capacity, uint64_t *out_length);
kvt_status kvt_metadata_parse(const uint8_t *blob, uint64_t length, kvt_metadata *out);
void kvt_metadata_free(kvt_metadata *meta);

#endif
