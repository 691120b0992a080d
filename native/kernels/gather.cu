// The gather kernels: move many pieces (one per layer and K/V plane of a block, say) in one launch, so that
// thousands of small copies cost about what one large copy costs. Each block of threads moves one tile (at
// most KVT_KERNEL_TILE_BYTES) at a time with 16-byte loads and stores where the tile's ends allow, byte by
// byte for the rest. A thread loads four 16-byte words before it stores them, so that a block has 16 KiB in
// flight: the copy keeps the memory busy even when few blocks run (a launch's last wave, or a launch of few
// pieces).
// - kvt_gather reads a table of pieces from device memory (pieces larger than a tile come as tiles).
// - kvt_gather_routes expands a template on the GPU: it reads the template's routes and a post's block
//   pairs, and each block of threads works out its tile (block pair, route, rows, part of a row) itself, so
//   the host writes one entry per route and per block instead of one per piece.
// PTX: native/kernels/generate.mjs (nvcc -ptx -arch=compute_90) into src/services/cuda_kernels_ptx.h.

#include "route_tiles.cuh"

struct kvt_piece {
    unsigned long long source, destination, bytes;
};

// A route of a template, its bases resolved to the addresses this process reaches (block 0, row 0), with
// its tiling: a tile is rows_per_tile rows (rows of at most a tile) or chunk_bytes of one row (longer rows,
// chunks_per_row chunks each); first_tile is the route's first tile among one block pair's tiles.
struct kvt_route {
    unsigned long long source, destination, source_block_stride, destination_block_stride, source_row_stride,
        destination_row_stride, row_bytes, first_tile;
    unsigned int rows, rows_per_tile, chunks_per_row, chunk_bytes;
};

struct kvt_block_pair {
    unsigned int source, destination;
};

__device__ __forceinline__ void kvt_copy_piece(unsigned long long from, unsigned long long to,
                                               unsigned long long bytes) {
    const unsigned char *source = reinterpret_cast<const unsigned char *>(from);
    unsigned char *destination = reinterpret_cast<unsigned char *>(to);
    unsigned long long wide = ((from | to) & 15ull) == 0 ? bytes / 16 : 0;
    const uint4 *source16 = reinterpret_cast<const uint4 *>(source);
    uint4 *destination16 = reinterpret_cast<uint4 *>(destination);
    const unsigned long long step = blockDim.x;
    unsigned long long i = threadIdx.x;
    for (; i + 3 * step < wide; i += 4 * step) {
        const uint4 a = source16[i], b = source16[i + step], c = source16[i + 2 * step], d = source16[i + 3 * step];
        destination16[i] = a;
        destination16[i + step] = b;
        destination16[i + 2 * step] = c;
        destination16[i + 3 * step] = d;
    }
    for (; i < wide; i += step) destination16[i] = source16[i];
    for (unsigned long long k = wide * 16 + threadIdx.x; k < bytes; k += step) destination[k] = source[k];
}

// `rows` rows of `bytes` (all of them at most a tile), the threads spread over every row's words at once.
__device__ __forceinline__ void kvt_copy_rows(unsigned long long from, unsigned long long to,
                                              unsigned long long from_stride, unsigned long long to_stride,
                                              unsigned int rows, unsigned int bytes) {
    const bool wide = ((from | to | from_stride | to_stride | bytes) & 15ull) == 0;
    const unsigned int unit = wide ? 16 : 1, per_row = bytes / unit, total = rows * per_row;
    for (unsigned int i = threadIdx.x; i < total; i += blockDim.x) {
        const unsigned int row = i / per_row, at = (i - row * per_row) * unit;
        const unsigned long long source = from + row * from_stride + at, destination = to + row * to_stride + at;
        if (wide)
            *reinterpret_cast<uint4 *>(destination) = *reinterpret_cast<const uint4 *>(source);
        else
            *reinterpret_cast<unsigned char *>(destination) = *reinterpret_cast<const unsigned char *>(source);
    }
}

extern "C" __global__ void kvt_gather(const kvt_piece *pieces, unsigned int count) {
    for (unsigned int p = blockIdx.x; p < count; p += gridDim.x) {
        const kvt_piece piece = pieces[p];
        kvt_copy_piece(piece.source, piece.destination, piece.bytes);
    }
}

extern "C" __global__ void kvt_gather_routes(const kvt_route *routes, unsigned int route_count,
                                             const kvt_block_pair *pairs, unsigned int pair_count,
                                             unsigned long long tiles_per_pair) {
    const unsigned long long tiles = pair_count * tiles_per_pair;
    for (unsigned long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        const kvt_route_tile found = kvt_find_route_tile(routes, route_count, t, tiles_per_pair);
        const kvt_route route = routes[found.route];
        const kvt_block_pair pair = pairs[found.item];
        const unsigned long long at = found.at;
        const unsigned int row = found.row, rows = found.rows;
        const unsigned long long source =
            route.source + pair.source * route.source_block_stride + row * route.source_row_stride + at;
        const unsigned long long destination = route.destination + pair.destination * route.destination_block_stride +
                                               row * route.destination_row_stride + at;
        if (rows == 1)
            kvt_copy_piece(source, destination,
                           route.row_bytes - at < route.chunk_bytes ? route.row_bytes - at : route.chunk_bytes);
        else
            kvt_copy_rows(source, destination, route.source_row_stride, route.destination_row_stride, rows,
                          (unsigned int)route.row_bytes);
    }
}
