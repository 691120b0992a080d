/* kvt_mem_checksums: checksums of groups of pieces of registered memory, computed where the bytes are:
 * by the checksum kernel on the GPU of vram regions (only the sums come back to the host), on the host by
 * the same function for dram. */
#include "checksums.h"

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

/* How many tiles (KVT_KERNEL_TILE_BYTES at most) the request's pieces make, each piece checked against its
 * region's end and its group. */
static kvt_status count_tiles(const checksum_request *req, kvt_region *const *held, uint32_t *out_tiles) {
    uint64_t tiles = 0;
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
        tiles += (req->length[i] + KVT_KERNEL_TILE_BYTES - 1) / KVT_KERNEL_TILE_BYTES;
    }
    if (tiles > UINT32_MAX)
        return kvt_fail(KVT_ERR_INVALID_PARAM,
                        CALL ": the pieces make %llu tiles of at most %u bytes; one call sums at most %u",
                        (unsigned long long)tiles, KVT_KERNEL_TILE_BYTES, UINT32_MAX);
    *out_tiles = (uint32_t)tiles;
    return KVT_OK;
}

/* The piece table at the regions' addresses (pieces checked by count_tiles), each piece cut into tiles. */
static void build_tiles(const checksum_request *req, kvt_region *const *held, kvt_checksum_piece *tiles) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < req->piece_count; i++) {
        uint64_t address = held[req->region_index[i]]->address + req->offset[i];
        for (uint64_t at = 0; at < req->length[i]; at += KVT_KERNEL_TILE_BYTES) {
            tiles[n++] = (kvt_checksum_piece){.address = address + at,
                                              .bytes = kvt_tile_bytes(req->length[i], at),
                                              .first_word = at / 16,
                                              .group = req->group[i],
                                              .ordinal = req->ordinal[i]};
        }
    }
}

/* What kvt_mem_checksums keeps of its work on a GPU, made on its first vram call and kept until the agent is
 * destroyed: a stream, and one buffer in device memory and one in pinned host memory, laid out alike (the
 * tiles, then the sums), grown as needed. A call then allocates nothing — cuMemFree waits for the whole
 * device, a pull's copies included — and uploads its table and zeroed sums in one DMA. */
typedef struct kvt_checksum_gpu {
    uint32_t device;
    CUstream stream;
    CUdeviceptr buffer;
    void *pinned;
    uint64_t capacity; /* bytes of each buffer */
} kvt_checksum_gpu;

static void gpu_free(kvt_checksum_gpu *gpu) {
    if (kvt_cuda_use_device(CALL, gpu->device) == KVT_OK) {
        if (gpu->stream) kvt_cuda.StreamSynchronize(gpu->stream);
        if (gpu->buffer) kvt_cuda.MemFree(gpu->buffer);
        if (gpu->pinned) kvt_cuda.MemFreeHost(gpu->pinned);
        if (gpu->stream) kvt_cuda.StreamDestroy(gpu->stream);
    }
    free(gpu);
}

void kvt_checksums_agent_free(kvt_agent *agent) {
    if (agent->checksum_gpu) gpu_free(agent->checksum_gpu);
    agent->checksum_gpu = NULL;
}

/* The agent's resources on `device` with room for `bytes` in each buffer (checksum_lock held): those of
 * another GPU are given back first. */
static kvt_status gpu_of(kvt_agent *agent, uint32_t device, uint64_t bytes, kvt_checksum_gpu **out) {
    kvt_checksum_gpu *gpu = agent->checksum_gpu;
    if (gpu && gpu->device != device) {
        kvt_checksums_agent_free(agent);
        gpu = NULL;
    }
    kvt_status status = kvt_cuda_use_device(CALL, device);
    if (status != KVT_OK) return status;
    CUresult result = KVT_CUDA_SUCCESS;
    if (!gpu) {
        gpu = calloc(1, sizeof *gpu);
        if (!gpu) return kvt_fail(KVT_ERR_NO_MEMORY, CALL ": out of memory");
        gpu->device = device;
        result = kvt_cuda.StreamCreate(&gpu->stream, KVT_CU_STREAM_NON_BLOCKING);
        if (result != KVT_CUDA_SUCCESS) gpu->stream = NULL;
        agent->checksum_gpu = gpu;
    }
    if (result == KVT_CUDA_SUCCESS && gpu->capacity < bytes) {
        uint64_t capacity = gpu->capacity ? gpu->capacity : 64u << 10;
        while (capacity < bytes) capacity *= 2;
        if (gpu->buffer) kvt_cuda.MemFree(gpu->buffer);
        if (gpu->pinned) kvt_cuda.MemFreeHost(gpu->pinned);
        gpu->buffer = 0;
        gpu->pinned = NULL;
        gpu->capacity = 0;
        result = kvt_cuda.MemAlloc(&gpu->buffer, capacity);
        if (result == KVT_CUDA_SUCCESS) result = kvt_cuda.MemHostAlloc(&gpu->pinned, capacity, 0);
        if (result == KVT_CUDA_SUCCESS) gpu->capacity = capacity;
    }
    if (result != KVT_CUDA_SUCCESS) {
        char text[256];
        kvt_cuda_error_text(result, text, sizeof text);
        kvt_checksums_agent_free(agent); /* the next call starts over */
        return kvt_fail(KVT_ERR_BACKEND, CALL ": GPU %u refused memory or a stream for the checksums (%llu bytes): %s",
                        device, (unsigned long long)bytes, text);
    }
    *out = gpu;
    return KVT_OK;
}

/* The kernel's sums of the request's `tile_count` tiles on GPU `device` into `sums` (host, group_count of
 * them), with the agent's resources. */
static kvt_status sums_on_gpu(kvt_agent *agent, uint32_t device, const checksum_request *req, kvt_region *const *held,
                              uint32_t tile_count, uint64_t *sums) {
    uint64_t table_bytes = (uint64_t)tile_count * sizeof(kvt_checksum_piece),
             sums_bytes = req->group_count * sizeof *sums;
    pthread_mutex_lock(&agent->checksum_lock);
    kvt_checksum_gpu *gpu = NULL;
    kvt_status status = gpu_of(agent, device, table_bytes + sums_bytes, &gpu);
    CUresult result = KVT_CUDA_SUCCESS;
    if (status == KVT_OK) {
        build_tiles(req, held, gpu->pinned);
        memset((uint8_t *)gpu->pinned + table_bytes, 0, sums_bytes); /* the kernel adds into them */
        result = kvt_cuda.MemcpyHtoDAsync(gpu->buffer, gpu->pinned, table_bytes + sums_bytes, gpu->stream);
    }
    if (status == KVT_OK && result == KVT_CUDA_SUCCESS)
        status = kvt_cuda_block_checksum(CALL, device, gpu->buffer, tile_count, gpu->buffer + table_bytes, gpu->stream);
    if (status == KVT_OK && result == KVT_CUDA_SUCCESS)
        result = kvt_cuda.MemcpyDtoHAsync((uint8_t *)gpu->pinned + table_bytes, gpu->buffer + table_bytes, sums_bytes,
                                          gpu->stream);
    /* Also after a refusal: nothing reuses the buffers while the stream may still read them. */
    if (status == KVT_OK && result == KVT_CUDA_SUCCESS)
        result = kvt_cuda.StreamSynchronize(gpu->stream);
    else if (gpu)
        kvt_cuda.StreamSynchronize(gpu->stream);
    if (status == KVT_OK && result == KVT_CUDA_SUCCESS) {
        memcpy(sums, (uint8_t *)gpu->pinned + table_bytes, sums_bytes);
    } else if (status == KVT_OK) {
        char text[256];
        status = kvt_fail(KVT_ERR_BACKEND, CALL ": GPU %u refused the checksum's work: %s", device,
                          kvt_cuda_error_text(result, text, sizeof text));
    }
    pthread_mutex_unlock(&agent->checksum_lock);
    return status;
}

static kvt_status checksums(kvt_agent *agent, const checksum_request *req, uint64_t *out_sums) {
    kvt_region **held = calloc(req->region_count, sizeof *held);
    uint64_t *sums = calloc(req->group_count, sizeof *sums);
    kvt_checksum_piece *tiles = NULL;
    uint32_t tile_count = 0;
    kvt_status status = held && sums ? KVT_OK : kvt_fail(KVT_ERR_NO_MEMORY, CALL ": out of memory");
    bool holding = false;
    if (status == KVT_OK) {
        pthread_mutex_lock(&agent->lock);
        status = hold_regions_locked(agent, req, held);
        pthread_mutex_unlock(&agent->lock);
        holding = status == KVT_OK;
    }
    if (status == KVT_OK) status = count_tiles(req, held, &tile_count);
    bool on_gpu = status == KVT_OK && held[0]->kind == KVT_MEM_VRAM;
    if (on_gpu && tile_count > 0) {
        status = sums_on_gpu(agent, held[0]->device, req, held, tile_count, sums);
    } else if (status == KVT_OK && !on_gpu) {
        if (tile_count > 0 && !(tiles = malloc((size_t)tile_count * sizeof *tiles)))
            status = kvt_fail(KVT_ERR_NO_MEMORY, CALL ": out of memory for %u pieces", tile_count);
        if (status == KVT_OK) {
            build_tiles(req, held, tiles);
            kvt_block_checksum_on_host(tiles, tile_count, sums);
        }
    }
    if (status == KVT_OK) memcpy(out_sums, sums, req->group_count * sizeof *sums);
    if (holding) {
        pthread_mutex_lock(&agent->lock);
        for (uint32_t k = 0; k < req->region_count; k++) held[k]->busy--;
        pthread_mutex_unlock(&agent->lock);
    }
    free(held);
    free(tiles);
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
