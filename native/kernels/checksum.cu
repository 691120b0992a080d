// The block checksum kernels: a 64-bit checksum per group of pieces (a KV block's rows), computed where
// the bytes are, so verification never copies device memory to the host. Order-sensitive and parallel:
// every 16-byte word (zero-padded at a piece's end) is mixed with its position in its piece and the
// piece's ordinal in its group, and the group's checksum is the sum (mod 2^64) of the mixed words.
// - kvt_block_checksum reads a table of pieces from device memory (pieces larger than a tile come as tiles).
// - kvt_block_checksum_routes reads a template's routes on one side and a list of blocks: each block of
//   threads works out its tile (block, route, rows, part of a row) as kvt_gather_routes does, so the host
//   writes one entry per route and per block. A block's pieces are its routes' rows in route order.
// Both give the same sums for the same pieces, and so does kvt_block_checksum_on_host
// (src/services/cuda_kernels.h).
// PTX: native/kernels/generate.mjs (nvcc -ptx -arch=compute_90) into src/services/cuda_kernels_ptx.h.

#include "route_tiles.cuh"

// A tile of a larger piece starts at word first_word of it: its words are mixed with their places in the
// whole piece, so cutting a piece into tiles (one per block of threads) leaves the sums as they were.
struct kvt_checksum_piece {
    unsigned long long address, bytes, first_word;
    unsigned int group, ordinal;
};

// A route on one side, its base resolved to this process's address (block 0, row 0), with its tiling as
// kvt_gather_routes tiles (rows_per_tile rows of at most a tile, or chunk_bytes of a longer row) and the
// ordinal of its first row among a block's pieces.
struct kvt_checksum_route {
    unsigned long long address, block_stride, row_stride, row_bytes, first_tile;
    unsigned int first_ordinal, rows, rows_per_tile, chunks_per_row, chunk_bytes, reserved;
};

__device__ __forceinline__ unsigned long long kvt_mix(unsigned long long x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

__device__ __forceinline__ unsigned long long kvt_piece_salt(unsigned int ordinal) {
    return kvt_mix(ordinal + 0x9e3779b97f4a7c15ull);
}

// Word w of the `bytes` bytes at `piece`, mixed with its place in its whole piece and the piece's salt.
__device__ __forceinline__ unsigned long long kvt_mixed_word(const unsigned char *piece, unsigned long long bytes,
                                                             unsigned long long w, unsigned long long place,
                                                             unsigned long long salt) {
    unsigned long long low = 0, high = 0;
    if ((reinterpret_cast<unsigned long long>(piece) & 15ull) == 0 && (w + 1) * 16 <= bytes) {
        const ulonglong2 word = reinterpret_cast<const ulonglong2 *>(piece)[w];
        low = word.x;
        high = word.y;
    } else {
        for (unsigned int b = 0; b < 16 && w * 16 + b < bytes; b++) {
            unsigned long long byte = piece[w * 16 + b];
            if (b < 8) low |= byte << (8 * b);
            else high |= byte << (8 * (b - 8));
        }
    }
    return kvt_mix(low ^ kvt_mix(high ^ (place * 0x9e3779b97f4a7c15ull + salt)));
}

// This thread's part of the sum of one piece (or tile of one, starting at word first_word).
__device__ __forceinline__ unsigned long long kvt_sum_piece(unsigned long long address, unsigned long long bytes,
                                                            unsigned long long first_word, unsigned int ordinal) {
    const unsigned char *piece = reinterpret_cast<const unsigned char *>(address);
    const unsigned long long salt = kvt_piece_salt(ordinal), words = (bytes + 15) / 16;
    unsigned long long sum = 0;
    for (unsigned long long w = threadIdx.x; w < words; w += blockDim.x)
        sum += kvt_mixed_word(piece, bytes, w, first_word + w, salt);
    return sum;
}

extern "C" __global__ void kvt_block_checksum(const kvt_checksum_piece *pieces, unsigned int count,
                                              unsigned long long *sums) {
    for (unsigned int p = blockIdx.x; p < count; p += gridDim.x) {
        const kvt_checksum_piece piece = pieces[p];
        atomicAdd(&sums[piece.group], kvt_sum_piece(piece.address, piece.bytes, piece.first_word, piece.ordinal));
    }
}

extern "C" __global__ void kvt_block_checksum_routes(const kvt_checksum_route *routes, unsigned int route_count,
                                                     const unsigned int *blocks, unsigned int block_count,
                                                     unsigned long long tiles_per_block, unsigned long long *sums) {
    const unsigned long long tiles = block_count * tiles_per_block;
    for (unsigned long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        const kvt_route_tile found = kvt_find_route_tile(routes, route_count, t, tiles_per_block);
        const kvt_checksum_route route = routes[found.route];
        const unsigned long long block_index = found.item, at = found.at;
        const unsigned int row = found.row, rows = found.rows;
        const unsigned long long first =
            route.address + blocks[block_index] * route.block_stride + row * route.row_stride;
        unsigned long long sum = 0;
        if (rows == 1) {
            const unsigned long long left = route.row_bytes - at;
            sum = kvt_sum_piece(first + at, left < route.chunk_bytes ? left : route.chunk_bytes, at / 16,
                                route.first_ordinal + row);
        } else {
            // Rows of at most a tile: the threads spread over every row's words at once (fewer than 2^32 of them
            // in a tile, so 32-bit arithmetic); a thread makes a row's salt when it reaches the row.
            const unsigned int per_row = (unsigned int)((route.row_bytes + 15) / 16), total = rows * per_row;
            unsigned int salted = rows;
            unsigned long long salt = 0;
            for (unsigned int i = threadIdx.x; i < total; i += blockDim.x) {
                const unsigned int k = i / per_row, w = i - k * per_row;
                if (k != salted) salt = kvt_piece_salt(route.first_ordinal + row + (salted = k));
                sum += kvt_mixed_word(reinterpret_cast<const unsigned char *>(first + k * route.row_stride),
                                      route.row_bytes, w, w, salt);
            }
        }
        atomicAdd(&sums[block_index], sum);
    }
}
