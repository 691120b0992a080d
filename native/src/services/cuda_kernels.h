/* The library's CUDA kernels (the .cu files of native/kernels, embedded as PTX in cuda_kernels_ptx.h): loaded once per
 * GPU with cuModuleLoadData in its primary context, launched on a caller's stream (cuda_kernels.c). */
#ifndef KVT_CUDA_KERNELS_H
#define KVT_CUDA_KERNELS_H

#include "services/cuda_driver.h"

#include <stdbool.h>
#include <stdint.h>

/* One piece for kvt_gather, as kernels/gather.cu reads it from device memory. */
typedef struct {
    uint64_t source, destination, bytes;
} kvt_gather_piece;
_Static_assert(sizeof(kvt_gather_piece) == 24, "kvt_gather_piece matches kernels/gather.cu");

/* A route of a template for kvt_gather_routes, as kernels/gather.cu reads it from device memory: its bases
 * (block 0, row 0) where this process reaches them, its strides, and its tiling (kvt_gather_route_tile). */
typedef struct {
    uint64_t source, destination, source_block_stride, destination_block_stride, source_row_stride,
        destination_row_stride, row_bytes, first_tile;
    uint32_t rows, rows_per_tile, chunks_per_row, chunk_bytes;
} kvt_gather_route;
_Static_assert(sizeof(kvt_gather_route) == 80, "kvt_gather_route matches kernels/gather.cu");

/* One block of a template post for kvt_gather_routes: the source's block and the destination's. */
typedef struct {
    uint32_t source, destination;
} kvt_gather_block_pair;

/* One piece for kvt_block_checksum: its bytes count into sums[group] as the group's ordinal-th piece; a tile
 * of a larger piece says where it starts in that piece (first_word, in 16-byte words), so that its words
 * are mixed with their places in the whole piece and the sums are those of the uncut piece. */
typedef struct {
    uint64_t address, bytes, first_word;
    uint32_t group, ordinal;
} kvt_checksum_piece;
_Static_assert(sizeof(kvt_checksum_piece) == 32, "kvt_checksum_piece matches kernels/checksum.cu");

/* A route on one side for kvt_block_checksum_routes, as kernels/checksum.cu reads it from device memory: its base
 * (block 0, row 0) where this process reaches it, its strides, its tiling (kvt_route_tiling_of) and the ordinal of
 * its first row among a block's pieces. */
typedef struct {
    uint64_t address, block_stride, row_stride, row_bytes, first_tile;
    uint32_t first_ordinal, rows, rows_per_tile, chunks_per_row, chunk_bytes, reserved;
} kvt_checksum_route;
_Static_assert(sizeof(kvt_checksum_route) == 64, "kvt_checksum_route matches kernels/checksum.cu");

/* The most bytes of one piece any kernel gives a block of threads (kvt_xfer_post and kvt_mem_checksums cut larger
 * pieces into such tiles, the route kernels cut rows alike; a multiple of 16): a kernel takes a piece per block of
 * threads, so 42 pieces of 7 MiB would keep 42 of an H200's 132 multiprocessors busy, while 2,352 tiles of 128 KiB
 * copy at about the speed of one device-to-device copy (on an H200: 0.162 ms against 0.150 ms for the same 308 MB). */
#define KVT_KERNEL_TILE_BYTES (128u << 10)

/* The bytes of the tile that starts `at` bytes into a piece of `length` bytes (at < length). */
static inline uint64_t kvt_tile_bytes(uint64_t length, uint64_t at) {
    return length - at < KVT_KERNEL_TILE_BYTES ? length - at : KVT_KERNEL_TILE_BYTES;
}

/* Threads per block of every kernel. */
#define KVT_KERNEL_THREADS 256u

/* How a route's rows are cut into tiles for a block of threads each: rows of at most a tile go rows_per_tile to a
 * tile, longer rows are cut into chunks_per_row chunks of chunk_bytes. */
typedef struct {
    uint32_t rows_per_tile, chunks_per_row, chunk_bytes;
} kvt_route_tiling;

/* The tiling of `rows` rows of `row_bytes` (at least 1 each); answers how many tiles they make. */
static inline uint64_t kvt_route_tiling_of(uint32_t rows, uint64_t row_bytes, kvt_route_tiling *tiling) {
    bool long_rows = row_bytes > KVT_KERNEL_TILE_BYTES;
    uint64_t per_tile = long_rows ? 1 : KVT_KERNEL_TILE_BYTES / row_bytes;
    tiling->rows_per_tile = per_tile < rows ? (uint32_t)per_tile : rows;
    tiling->chunk_bytes = long_rows ? KVT_KERNEL_TILE_BYTES : (uint32_t)row_bytes;
    tiling->chunks_per_row = (uint32_t)((row_bytes + tiling->chunk_bytes - 1) / tiling->chunk_bytes);
    return ((uint64_t)rows + tiling->rows_per_tile - 1) / tiling->rows_per_tile * tiling->chunks_per_row;
}

/* Tiles `route` (rows, row_bytes and first_tile set) as kvt_gather_routes reads them; answers how many tiles the
 * route has per block pair. */
static inline uint64_t kvt_gather_route_tile(kvt_gather_route *route) {
    kvt_route_tiling tiling;
    uint64_t tiles = kvt_route_tiling_of(route->rows, route->row_bytes, &tiling);
    route->rows_per_tile = tiling.rows_per_tile;
    route->chunks_per_row = tiling.chunks_per_row;
    route->chunk_bytes = tiling.chunk_bytes;
    return tiles;
}

/* Copies `count` pieces whose table is at `pieces` (device memory) on `stream`, GPU `device` (its context
 * is made current). BACKEND naming `call` when the module cannot be loaded or the launch is refused. */
kvt_status kvt_cuda_gather(const char *call, uint32_t device, CUdeviceptr pieces, uint32_t count, CUstream stream);
/* Copies `pair_count` blocks of a template (its `route_count` routes at `routes`, the pairs at `pairs`: device
 * memory; `tiles_per_pair` the routes' tiles) on `stream`, GPU `device`. Errors as kvt_cuda_gather. */
kvt_status kvt_cuda_gather_routes(const char *call, uint32_t device, CUdeviceptr routes, uint32_t route_count,
                                  CUdeviceptr pairs, uint32_t pair_count, uint64_t tiles_per_pair, CUstream stream);
/* Adds each piece's checksum into sums[group] (device memory, uint64 each, zeroed by the caller). */
kvt_status kvt_cuda_block_checksum(const char *call, uint32_t device, CUdeviceptr pieces, uint32_t count,
                                   CUdeviceptr sums, CUstream stream);

/* Adds the checksum of each block of `blocks` (`block_count` of them, device memory) over the `route_count` routes at
 * `routes` (device memory, `tiles_per_block` tiles a block) into sums[i] (device memory, zeroed by the caller). */
kvt_status kvt_cuda_block_checksum_routes(const char *call, uint32_t device, CUdeviceptr routes, uint32_t route_count,
                                          CUdeviceptr blocks, uint32_t block_count, uint64_t tiles_per_block,
                                          CUdeviceptr sums, CUstream stream);

/* kernels/checksum.cu on the host, over memory this process reads: the same sums, for tests and for
 * checking a GPU's answer. */
static inline uint64_t kvt_checksum_mix(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static inline void kvt_block_checksum_on_host(const kvt_checksum_piece *pieces, uint32_t count, uint64_t *sums) {
    for (uint32_t p = 0; p < count; p++) {
        const uint8_t *bytes = (const uint8_t *)(uintptr_t)pieces[p].address;
        uint64_t salt = kvt_checksum_mix(pieces[p].ordinal + 0x9e3779b97f4a7c15ull), sum = 0;
        for (uint64_t w = 0; w * 16 < pieces[p].bytes; w++) {
            uint64_t place = pieces[p].first_word + w;
            uint64_t low = 0, high = 0;
            for (uint32_t b = 0; b < 16 && w * 16 + b < pieces[p].bytes; b++) {
                if (b < 8)
                    low |= (uint64_t)bytes[w * 16 + b] << (8 * b);
                else
                    high |= (uint64_t)bytes[w * 16 + b] << (8 * (b - 8));
            }
            sum += kvt_checksum_mix(low ^ kvt_checksum_mix(high ^ (place * 0x9e3779b97f4a7c15ull + salt)));
        }
        sums[pieces[p].group] += sum;
    }
}

#endif
