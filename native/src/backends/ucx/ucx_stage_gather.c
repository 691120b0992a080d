/* A chunk of many vram pieces crosses PCIe as one copy: a source packs its pieces into a GPU chunk buffer with one
 * kvt_gather launch and copies the chunk down; a destination copies the chunk up and unpacks it into its pieces
 * alike. The launch's table is written into the bounce buffer's tail (pinned, so its upload stays asynchronous)
 * and goes up into the GPU chunk buffer's tail. */
#include "backends/ucx/ucx_staging.h"

#include "services/status.h"

kvt_status ucx_stage_gather(const char *call, ucx_bounce *bounce, const ucx_gpu_chunk *chunk,
                            const stage_gpu_piece *pieces, uint32_t count, bool packing, CUstream stream) {
    kvt_gather_piece *table = (kvt_gather_piece *)(bounce->host + STAGE_CHUNK_BYTES);
    uint32_t tiles = 0;
    for (uint32_t i = 0; i < count; i++)
        for (uint64_t at = 0; at < pieces[i].length; at += KVT_KERNEL_TILE_BYTES) {
            uint64_t vram = pieces[i].vram + at, in_chunk = chunk->address + pieces[i].at + at;
            table[tiles++] = (kvt_gather_piece){.source = packing ? vram : in_chunk,
                                                .destination = packing ? in_chunk : vram,
                                                .bytes = kvt_tile_bytes(pieces[i].length, at)};
        }
    CUdeviceptr on_device = chunk->address + STAGE_CHUNK_BYTES;
    CUresult result = kvt_cuda.MemcpyHtoDAsync(on_device, table, tiles * sizeof *table, stream);
    if (result != KVT_CUDA_SUCCESS) {
        char text[256];
        return kvt_fail(KVT_ERR_BACKEND, "%s: the GPU refused a staged chunk's gather table: %s", call,
                        kvt_cuda_error_text(result, text, sizeof text));
    }
    return kvt_cuda_gather(call, chunk->device, on_device, tiles, stream);
}
