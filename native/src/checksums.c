/* kvt_mem_checksums: checksums of groups of pieces of registered memory, computed where the bytes are:
 * by the checksum kernel on the GPU of vram regions (only the sums come back to the host), on the host by
 * the same function for dram. */
#include "agent.h"
#include "memory.h"
#include "services/cuda_driver.h"
#include "services/cuda_kernels.h"
#include "services/status.h"

#include <stdlib.h>
#include <string.h>

#define CALL "kvt_mem_checksums"

typedef struct {
    uint32_t piece_count;
    const uint32_t *region_index;
    const uint64_t *offset, *length;
    const uint32_t *group, *ordinal;
    uint32_t region_count;
    const uint32_t *regions;
    uint32_t group_count;
} checksum_request;

static kvt_status check_shape(const checksum_request *req, const uint64_t *out_sums) {
    if (!req->region_index || !req->offset || !req->length || !req->group || !req->ordinal || !req->regions ||
        !out_sums)
        return kvt_fail(KVT_ERR_INVALID_PARAM, CALL ": an array is NULL");
    if (req->piece_count == 0 || req->piece_count > KVT_MAX_DESCRIPTORS)
        return kvt_fail(KVT_ERR_INVALID_PARAM, CALL ": piece count %u is outside 1..%u", req->piece_count,
                        KVT_MAX_DESCRIPTORS);
    if (req->region_count == 0 || req->group_count == 0)
        return kvt_fail(KVT_ERR_INVALID_PARAM, CALL ": %u regions and %u groups (both must be at least 1)",
                        req->region_count, req->group_count);
    return KVT_OK;
}

/* Finds the request's regions and holds them for the call (agent->lock held): one kind, and one GPU for vram. */
static kvt_status hold_regions_locked(kvt_agent *agent, const checksum_request *req, kvt_region **held) {
    for (uint32_t k = 0; k < req->region_count; k++) {
        held[k] = NULL;
        for (uint32_t i = 0; i < agent->region_count; i++)
            if (agent->regions[i]->id == req->regions[k]) held[k] = agent->regions[i];
        if (!held[k])
            return kvt_fail(KVT_ERR_INVALID_PARAM, CALL ": regions[%u] = %u is not a live region of '%s'", k,
                            req->regions[k], agent->name);
        if (held[k]->kind != held[0]->kind || held[k]->device != held[0]->device)
            return kvt_fail(KVT_ERR_INVALID_PARAM,
                            CALL ": regions %u and %u are of different kinds or GPUs: one call reads one kind of "
                                 "memory (vram: one GPU)",
                            req->regions[0], req->regions[k]);
    }
    for (uint32_t k = 0; k < req->region_count; k++) held[k]->busy++;
    return KVT_OK;
}

/* The piece table at the regions' addresses, each piece checked against its region's end and its group. */
static kvt_status build_pieces(const checksum_request *req, kvt_region *const *held, kvt_checksum_piece *pieces) {
    for (uint32_t i = 0; i < req->piece_count; i++) {
        if (req->region_index[i] >= req->region_count || req->group[i] >= req->group_count)
            return kvt_fail(KVT_ERR_INVALID_PARAM,
                            CALL ": piece %u: region index %u (table %u) or group %u (of %u) out of range", i,
                            req->region_index[i], req->region_count, req->group[i], req->group_count);
        const kvt_region *region = held[req->region_index[i]];
        uint64_t end = 0;
        if (__builtin_add_overflow(req->offset[i], req->length[i], &end) || end > region->length)
            return kvt_fail(KVT_ERR_INVALID_PARAM,
                            CALL ": piece %u: offset %llu + %llu bytes exceeds region %u's %llu bytes", i,
                            (unsigned long long)req->offset[i], (unsigned long long)req->length[i], region->id,
                            (unsigned long long)region->length);
        pieces[i] =
            (kvt_checksum_piece){region->address + req->offset[i], req->length[i], req->group[i], req->ordinal[i]};
    }
    return KVT_OK;
}

/* The kernel's sums of `count` pieces on GPU `device` into `sums` (host, group_count of them). */
static kvt_status sums_on_gpu(uint32_t device, const kvt_checksum_piece *pieces, uint32_t count, uint32_t group_count,
                              uint64_t *sums) {
    kvt_status status = kvt_cuda_use_device(CALL, device);
    if (status != KVT_OK) return status;
    CUstream stream = NULL;
    CUdeviceptr table = 0, device_sums = 0;
    CUresult result = kvt_cuda.StreamCreate(&stream, KVT_CU_STREAM_NON_BLOCKING);
    if (result == KVT_CUDA_SUCCESS) result = kvt_cuda.MemAlloc(&table, count * sizeof *pieces);
    if (result == KVT_CUDA_SUCCESS) result = kvt_cuda.MemAlloc(&device_sums, group_count * sizeof *sums);
    if (result == KVT_CUDA_SUCCESS) /* sums is zeroed: the kernel adds into the device's copy of it */
        result = kvt_cuda.MemcpyHtoDAsync(device_sums, sums, group_count * sizeof *sums, stream);
    if (result == KVT_CUDA_SUCCESS) result = kvt_cuda.MemcpyHtoDAsync(table, pieces, count * sizeof *pieces, stream);
    if (result == KVT_CUDA_SUCCESS) status = kvt_cuda_block_checksum(CALL, device, table, count, device_sums, stream);
    if (result == KVT_CUDA_SUCCESS && status == KVT_OK)
        result = kvt_cuda.MemcpyDtoHAsync(sums, device_sums, group_count * sizeof *sums, stream);
    if (result == KVT_CUDA_SUCCESS && status == KVT_OK) result = kvt_cuda.StreamSynchronize(stream);
    if (result != KVT_CUDA_SUCCESS && status == KVT_OK) {
        char text[256];
        status = kvt_fail(KVT_ERR_BACKEND, CALL ": GPU %u refused the checksum's work: %s", device,
                          kvt_cuda_error_text(result, text, sizeof text));
    }
    if (stream) kvt_cuda.StreamSynchronize(stream); /* nothing is freed under the kernel */
    if (device_sums) kvt_cuda.MemFree(device_sums);
    if (table) kvt_cuda.MemFree(table);
    if (stream) kvt_cuda.StreamDestroy(stream);
    return status;
}

static kvt_status checksums(kvt_agent *agent, const checksum_request *req, uint64_t *out_sums) {
    kvt_region **held = calloc(req->region_count, sizeof *held);
    kvt_checksum_piece *pieces = malloc((size_t)req->piece_count * sizeof *pieces);
    uint64_t *sums = calloc(req->group_count, sizeof *sums);
    kvt_status status = held && pieces && sums ? KVT_OK : kvt_fail(KVT_ERR_NO_MEMORY, CALL ": out of memory");
    bool holding = false;
    if (status == KVT_OK) {
        pthread_mutex_lock(&agent->lock);
        status = hold_regions_locked(agent, req, held);
        pthread_mutex_unlock(&agent->lock);
        holding = status == KVT_OK;
    }
    if (status == KVT_OK) status = build_pieces(req, held, pieces);
    if (status == KVT_OK && held[0]->kind == KVT_MEM_VRAM)
        status = sums_on_gpu(held[0]->device, pieces, req->piece_count, req->group_count, sums);
    else if (status == KVT_OK)
        kvt_block_checksum_on_host(pieces, req->piece_count, sums);
    if (status == KVT_OK) memcpy(out_sums, sums, req->group_count * sizeof *sums);
    if (holding) {
        pthread_mutex_lock(&agent->lock);
        for (uint32_t k = 0; k < req->region_count; k++) held[k]->busy--;
        pthread_mutex_unlock(&agent->lock);
    }
    free(held);
    free(pieces);
    free(sums);
    return status;
}

kvt_status kvt_mem_checksums(uint32_t agent_id, uint32_t piece_count, const uint32_t *region_index,
                             const uint64_t *offset, const uint64_t *length, const uint32_t *group,
                             const uint32_t *ordinal, uint32_t region_count, const uint32_t *regions,
                             uint32_t group_count, uint64_t *out_sums) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, CALL, &agent);
    if (status != KVT_OK) return status;
    const checksum_request req = {.piece_count = piece_count,
                                  .region_index = region_index,
                                  .offset = offset,
                                  .length = length,
                                  .group = group,
                                  .ordinal = ordinal,
                                  .region_count = region_count,
                                  .regions = regions,
                                  .group_count = group_count};
    status = check_shape(&req, out_sums);
    if (status == KVT_OK) status = checksums(agent, &req, out_sums);
    return kvt_agent_finish(agent, status);
}
