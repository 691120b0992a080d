/* kvt_mem_checksums and kvt_mem_block_checksums: checksums of groups of pieces of registered memory, computed
 * where the bytes are: by a checksum kernel on the GPU of vram regions (only the sums come back to the host), on
 * the host by the same function for dram. The first call names its pieces one by one; the second names blocks
 * and the routes of their rows, which the kernel expands itself. */
#include "checksums.h"

#include "agent.h"
#include "memory.h"
#include "services/cuda_driver.h"
#include "services/cuda_kernels.h"
#include "services/status.h"
#include "template.h"

#include <stdlib.h>
#include <string.h>

/* One call's request, as the code both calls share sees it: the regions it reads, how many sums it makes, and its
 * own steps. */
typedef struct checksum_call checksum_call;
struct checksum_call {
    const char *name;
    uint32_t region_count;
    const uint32_t *regions;
    uint32_t group_count;
    /* Checks the request against its held regions; sets table_bytes (a multiple of 8) and tiles (0: nothing to sum
     * on a GPU). */
    kvt_status (*check)(checksum_call *call, kvt_region *const *held);
    /* Writes the table the kernel reads (table_bytes) at `table`. */
    void (*write_table)(const checksum_call *call, kvt_region *const *held, void *table);
    kvt_status (*launch)(const checksum_call *call, uint32_t device, CUdeviceptr table, CUdeviceptr sums,
                         CUstream stream);
    void (*sum_on_host)(const checksum_call *call, kvt_region *const *held, uint64_t *sums);
    uint64_t table_bytes, tiles;
};

/* Finds the call's regions and holds them for it (agent->lock held): one kind, and one GPU for vram. */
static kvt_status hold_regions_locked(kvt_agent *agent, const checksum_call *call, kvt_region **held) {
    for (uint32_t k = 0; k < call->region_count; k++) {
        held[k] = NULL;
        for (uint32_t i = 0; i < agent->region_count; i++)
            if (agent->regions[i]->id == call->regions[k]) held[k] = agent->regions[i];
        if (!held[k])
            return kvt_fail(KVT_ERR_INVALID_PARAM, "%s: regions[%u] = %u is not a live region of '%s'", call->name, k,
                            call->regions[k], agent->name);
        if (held[k]->kind != held[0]->kind || held[k]->device != held[0]->device)
            return kvt_fail(KVT_ERR_INVALID_PARAM,
                            "%s: regions %u and %u are of different kinds or GPUs: one call reads one kind of "
                            "memory (vram: one GPU)",
                            call->name, call->regions[0], call->regions[k]);
    }
    for (uint32_t k = 0; k < call->region_count; k++) held[k]->busy++;
    return KVT_OK;
}

/* What the checksum calls keep of their work on a GPU, made on their first vram call and kept until the agent is
 * destroyed: a stream, and one buffer in device memory and one in pinned host memory, laid out alike (the
 * table, then the sums), grown as needed. A call then allocates nothing — cuMemFree waits for the whole
 * device, a pull's copies included — and uploads its table and zeroed sums in one DMA. */
typedef struct kvt_checksum_gpu {
    uint32_t device;
    CUstream stream;
    CUdeviceptr buffer;
    void *pinned;
    uint64_t capacity; /* bytes of each buffer */
} kvt_checksum_gpu;

static void gpu_free(kvt_checksum_gpu *gpu) {
    if (kvt_cuda_use_device("kvt_mem_checksums", gpu->device) == KVT_OK) {
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
static kvt_status gpu_of(kvt_agent *agent, const char *name, uint32_t device, uint64_t bytes, kvt_checksum_gpu **out) {
    kvt_checksum_gpu *gpu = agent->checksum_gpu;
    if (gpu && gpu->device != device) {
        kvt_checksums_agent_free(agent);
        gpu = NULL;
    }
    kvt_status status = kvt_cuda_use_device(name, device);
    if (status != KVT_OK) return status;
    CUresult result = KVT_CUDA_SUCCESS;
    if (!gpu) {
        gpu = calloc(1, sizeof *gpu);
        if (!gpu) return kvt_fail(KVT_ERR_NO_MEMORY, "%s: out of memory", name);
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
        return kvt_fail(KVT_ERR_BACKEND, "%s: GPU %u refused memory or a stream for the checksums (%llu bytes): %s",
                        name, device, (unsigned long long)bytes, text);
    }
    *out = gpu;
    return KVT_OK;
}

/* The kernel's sums of the call on GPU `device` into `sums` (host, group_count of them), with the agent's
 * resources. */
static kvt_status sums_on_gpu(kvt_agent *agent, uint32_t device, const checksum_call *call, kvt_region *const *held,
                              uint64_t *sums) {
    uint64_t table_bytes = call->table_bytes, sums_bytes = call->group_count * sizeof *sums;
    pthread_mutex_lock(&agent->checksum_lock);
    kvt_checksum_gpu *gpu = NULL;
    kvt_status status = gpu_of(agent, call->name, device, table_bytes + sums_bytes, &gpu);
    CUresult result = KVT_CUDA_SUCCESS;
    if (status == KVT_OK) {
        call->write_table(call, held, gpu->pinned);
        memset((uint8_t *)gpu->pinned + table_bytes, 0, sums_bytes); /* the kernel adds into them */
        result = kvt_cuda.MemcpyHtoDAsync(gpu->buffer, gpu->pinned, table_bytes + sums_bytes, gpu->stream);
    }
    if (status == KVT_OK && result == KVT_CUDA_SUCCESS)
        status = call->launch(call, device, gpu->buffer, gpu->buffer + table_bytes, gpu->stream);
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
        status = kvt_fail(KVT_ERR_BACKEND, "%s: GPU %u refused the checksum's work: %s", call->name, device,
                          kvt_cuda_error_text(result, text, sizeof text));
    }
    pthread_mutex_unlock(&agent->checksum_lock);
    return status;
}

/* Runs `call` with its regions held: on their GPU for vram, on the host for dram. */
static kvt_status run_call(kvt_agent *agent, checksum_call *call, uint64_t *out_sums) {
    kvt_region **held = calloc(call->region_count, sizeof *held);
    uint64_t *sums = calloc(call->group_count, sizeof *sums);
    kvt_status status = held && sums ? KVT_OK : kvt_fail(KVT_ERR_NO_MEMORY, "%s: out of memory", call->name);
    bool holding = false;
    if (status == KVT_OK) {
        pthread_mutex_lock(&agent->lock);
        status = hold_regions_locked(agent, call, held);
        pthread_mutex_unlock(&agent->lock);
        holding = status == KVT_OK;
    }
    if (status == KVT_OK) status = call->check(call, held);
    if (status == KVT_OK && held[0]->kind == KVT_MEM_VRAM) {
        if (call->tiles > 0) status = sums_on_gpu(agent, held[0]->device, call, held, sums);
    } else if (status == KVT_OK) {
        call->sum_on_host(call, held, sums);
    }
    if (status == KVT_OK) memcpy(out_sums, sums, call->group_count * sizeof *sums);
    if (holding) {
        pthread_mutex_lock(&agent->lock);
        for (uint32_t k = 0; k < call->region_count; k++) held[k]->busy--;
        pthread_mutex_unlock(&agent->lock);
    }
    free(held);
    free(sums);
    return status;
}

/* ---- kvt_mem_checksums: pieces one by one ------------------------------------------------------------ */

typedef struct {
    checksum_call call; /* first: the shared code's view */
    uint32_t piece_count;
    const uint32_t *region_index;
    const uint64_t *offset, *length;
    const uint32_t *group, *ordinal;
} pieces_call;

/* Checks each piece against its region's end and its group, and counts the tiles (KVT_KERNEL_TILE_BYTES at most)
 * the pieces make. */
static kvt_status check_pieces(checksum_call *call, kvt_region *const *held) {
    const pieces_call *req = (const pieces_call *)call;
    uint64_t tiles = 0;
    for (uint32_t i = 0; i < req->piece_count; i++) {
        if (req->region_index[i] >= call->region_count || req->group[i] >= call->group_count)
            return kvt_fail(KVT_ERR_INVALID_PARAM,
                            "%s: piece %u: region index %u (table %u) or group %u (of %u) out of range", call->name, i,
                            req->region_index[i], call->region_count, req->group[i], call->group_count);
        const kvt_region *region = held[req->region_index[i]];
        uint64_t end = 0;
        if (__builtin_add_overflow(req->offset[i], req->length[i], &end) || end > region->length)
            return kvt_fail(KVT_ERR_INVALID_PARAM,
                            "%s: piece %u: offset %llu + %llu bytes exceeds region %u's %llu bytes", call->name, i,
                            (unsigned long long)req->offset[i], (unsigned long long)req->length[i], region->id,
                            (unsigned long long)region->length);
        tiles += (req->length[i] + KVT_KERNEL_TILE_BYTES - 1) / KVT_KERNEL_TILE_BYTES;
    }
    if (tiles > UINT32_MAX)
        return kvt_fail(KVT_ERR_INVALID_PARAM,
                        "%s: the pieces make %llu tiles of at most %u bytes; one call sums at most %u", call->name,
                        (unsigned long long)tiles, KVT_KERNEL_TILE_BYTES, UINT32_MAX);
    call->tiles = tiles;
    call->table_bytes = tiles * sizeof(kvt_checksum_piece);
    return KVT_OK;
}

/* The piece table at the regions' addresses, each piece cut into tiles. */
static void write_pieces(const checksum_call *call, kvt_region *const *held, void *table) {
    const pieces_call *req = (const pieces_call *)call;
    kvt_checksum_piece *tiles = table;
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

static kvt_status launch_pieces(const checksum_call *call, uint32_t device, CUdeviceptr table, CUdeviceptr sums,
                                CUstream stream) {
    return kvt_cuda_block_checksum(call->name, device, table, (uint32_t)call->tiles, sums, stream);
}

static void sum_pieces_on_host(const checksum_call *call, kvt_region *const *held, uint64_t *sums) {
    const pieces_call *req = (const pieces_call *)call;
    for (uint32_t i = 0; i < req->piece_count; i++) {
        const kvt_checksum_piece piece = {.address = held[req->region_index[i]]->address + req->offset[i],
                                          .bytes = req->length[i],
                                          .group = req->group[i],
                                          .ordinal = req->ordinal[i]};
        kvt_block_checksum_on_host(&piece, 1, sums);
    }
}

kvt_status kvt_mem_checksums(uint32_t agent_id, uint32_t piece_count, const uint32_t *region_index,
                             const uint64_t *offset, const uint64_t *length, const uint32_t *group,
                             const uint32_t *ordinal, uint32_t region_count, const uint32_t *regions,
                             uint32_t group_count, uint64_t *out_sums) {
    kvt_agent *agent;
    const char *name = "kvt_mem_checksums";
    kvt_status status = kvt_enter(agent_id, name, &agent);
    if (status != KVT_OK) return status;
    pieces_call req = {.call = {.name = name,
                                .region_count = region_count,
                                .regions = regions,
                                .group_count = group_count,
                                .check = check_pieces,
                                .write_table = write_pieces,
                                .launch = launch_pieces,
                                .sum_on_host = sum_pieces_on_host},
                       .piece_count = piece_count,
                       .region_index = region_index,
                       .offset = offset,
                       .length = length,
                       .group = group,
                       .ordinal = ordinal};
    if (!region_index || !offset || !length || !group || !ordinal || !regions || !out_sums)
        status = kvt_fail(KVT_ERR_INVALID_PARAM, "%s: an array is NULL", name);
    else if (piece_count == 0 || piece_count > KVT_MAX_DESCRIPTORS)
        status = kvt_fail(KVT_ERR_INVALID_PARAM, "%s: piece count %u is outside 1..%u", name, piece_count,
                          KVT_MAX_DESCRIPTORS);
    else if (region_count == 0 || group_count == 0)
        status = kvt_fail(KVT_ERR_INVALID_PARAM, "%s: %u regions and %u groups (both must be at least 1)", name,
                          region_count, group_count);
    if (status == KVT_OK) status = run_call(agent, &req.call, out_sums);
    return kvt_agent_finish(agent, status);
}

/* ---- kvt_mem_block_checksums: blocks by routes ---------------------------------------------------------- */

typedef struct {
    checksum_call call; /* first: the shared code's view */
    const kvt_block_routes *routes;
    const uint32_t *blocks;
    uint32_t largest_block;
    uint64_t tiles_per_block;
} routes_call;

/* The table's bytes before the blocks (the routes), and before the sums (the blocks, padded to 8 bytes). */
static uint64_t routes_bytes(const routes_call *req) { return req->routes->route_count * sizeof(kvt_checksum_route); }

/* Checks each route at the largest block against its region and counts a block's rows and tiles. */
static kvt_status check_routes(checksum_call *call, kvt_region *const *held) {
    routes_call *req = (routes_call *)call;
    const kvt_block_routes *routes = req->routes;
    uint64_t rows = 0, tiles = 0;
    for (uint32_t r = 0; r < routes->route_count; r++) {
        if (routes->region_index[r] >= routes->region_count || routes->rows[r] == 0 || routes->row_bytes[r] == 0)
            return kvt_fail(KVT_ERR_INVALID_PARAM,
                            "%s: route %u: region index %u (table %u), %u rows of %llu bytes (rows and bytes must be "
                            "at least 1)",
                            call->name, r, routes->region_index[r], routes->region_count, routes->rows[r],
                            (unsigned long long)routes->row_bytes[r]);
        const kvt_region *region = held[routes->region_index[r]];
        uint64_t end = 0;
        bool fits = kvt_route_segment_end(routes->base[r], req->largest_block, routes->block_stride[r], routes->rows[r],
                                          routes->row_stride[r], routes->row_bytes[r], &end);
        if (!fits || end > region->length)
            return kvt_fail(KVT_ERR_INVALID_PARAM,
                            "%s: route %u: block %u ends at byte %llu%s, past region %u's %llu bytes", call->name, r,
                            req->largest_block, (unsigned long long)end, fits ? "" : " (overflows 64 bits)", region->id,
                            (unsigned long long)region->length);
        kvt_route_tiling tiling;
        rows += routes->rows[r];
        tiles += kvt_route_tiling_of(routes->rows[r], routes->row_bytes[r], &tiling);
    }
    if (rows > UINT32_MAX)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "%s: a block has %llu rows; its ordinals count at most %u", call->name,
                        (unsigned long long)rows, UINT32_MAX);
    req->tiles_per_block = tiles;
    call->tiles = tiles * call->group_count;
    call->table_bytes = routes_bytes(req) + (call->group_count * sizeof(uint32_t) + 7) / 8 * 8;
    return KVT_OK;
}

/* The routes at the regions' addresses with their tiling and first ordinals, then the blocks. */
static void write_routes(const checksum_call *call, kvt_region *const *held, void *table) {
    const routes_call *req = (const routes_call *)call;
    const kvt_block_routes *routes = req->routes;
    kvt_checksum_route *out = table;
    uint64_t first_tile = 0;
    uint32_t first_ordinal = 0;
    for (uint32_t r = 0; r < routes->route_count; r++) {
        kvt_route_tiling tiling;
        uint64_t tiles = kvt_route_tiling_of(routes->rows[r], routes->row_bytes[r], &tiling);
        out[r] = (kvt_checksum_route){.address = held[routes->region_index[r]]->address + routes->base[r],
                                      .block_stride = routes->block_stride[r],
                                      .row_stride = routes->row_stride[r],
                                      .row_bytes = routes->row_bytes[r],
                                      .first_tile = first_tile,
                                      .first_ordinal = first_ordinal,
                                      .rows = routes->rows[r],
                                      .rows_per_tile = tiling.rows_per_tile,
                                      .chunks_per_row = tiling.chunks_per_row,
                                      .chunk_bytes = tiling.chunk_bytes};
        first_tile += tiles;
        first_ordinal += routes->rows[r];
    }
    memcpy((uint8_t *)table + routes_bytes(req), req->blocks, call->group_count * sizeof(uint32_t));
}

static kvt_status launch_routes(const checksum_call *call, uint32_t device, CUdeviceptr table, CUdeviceptr sums,
                                CUstream stream) {
    const routes_call *req = (const routes_call *)call;
    return kvt_cuda_block_checksum_routes(call->name, device, table, req->routes->route_count,
                                          table + routes_bytes(req), call->group_count, req->tiles_per_block, sums,
                                          stream);
}

static void sum_routes_on_host(const checksum_call *call, kvt_region *const *held, uint64_t *sums) {
    const routes_call *req = (const routes_call *)call;
    const kvt_block_routes *routes = req->routes;
    for (uint32_t i = 0; i < call->group_count; i++) {
        kvt_checksum_piece row = {.group = i, .ordinal = 0};
        for (uint32_t r = 0; r < routes->route_count; r++) {
            row.address =
                held[routes->region_index[r]]->address + routes->base[r] + req->blocks[i] * routes->block_stride[r];
            row.bytes = routes->row_bytes[r];
            for (uint32_t k = 0; k < routes->rows[r]; k++, row.ordinal++, row.address += routes->row_stride[r])
                kvt_block_checksum_on_host(&row, 1, sums);
        }
    }
}

/* Checks what can be checked before the regions are found: the arrays and the counts. */
static kvt_status check_routes_shape(const char *name, const kvt_block_routes *routes, uint32_t block_count,
                                     const uint32_t *blocks, const uint64_t *out_sums) {
    if (!routes || !blocks || !out_sums)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "%s: routes, blocks or out_sums is NULL", name);
    if (!routes->region_index || !routes->base || !routes->block_stride || !routes->rows || !routes->row_bytes ||
        !routes->row_stride || !routes->regions)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "%s: a route array or the region table is NULL", name);
    if (routes->route_count == 0 || routes->route_count > KVT_MAX_DESCRIPTORS || block_count == 0 ||
        block_count > KVT_MAX_DESCRIPTORS || routes->region_count == 0)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "%s: %u routes and %u blocks (each 1..%u), %u regions (at least 1)",
                        name, routes->route_count, block_count, KVT_MAX_DESCRIPTORS, routes->region_count);
    return KVT_OK;
}

kvt_status kvt_mem_block_checksums(uint32_t agent_id, const kvt_block_routes *routes, uint32_t block_count,
                                   const uint32_t *blocks, uint64_t *out_sums) {
    kvt_agent *agent;
    const char *name = "kvt_mem_block_checksums";
    kvt_status status = kvt_enter(agent_id, name, &agent);
    if (status != KVT_OK) return status;
    status = check_routes_shape(name, routes, block_count, blocks, out_sums);
    if (status == KVT_OK) {
        routes_call req = {.call = {.name = name,
                                    .region_count = routes->region_count,
                                    .regions = routes->regions,
                                    .group_count = block_count,
                                    .check = check_routes,
                                    .write_table = write_routes,
                                    .launch = launch_routes,
                                    .sum_on_host = sum_routes_on_host},
                           .routes = routes,
                           .blocks = blocks};
        for (uint32_t i = 0; i < block_count; i++)
            if (blocks[i] > req.largest_block) req.largest_block = blocks[i];
        status = run_call(agent, &req.call, out_sums);
    }
    return kvt_agent_finish(agent, status);
}
