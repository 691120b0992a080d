// The block checksum kernel: a 64-bit checksum per group of pieces (a KV block's rows), computed where
// the bytes are, so verification never copies device memory to the host. Order-sensitive and parallel:
// every 16-byte word (zero-padded at a piece's end) is mixed with its position in its piece and the
// piece's ordinal in its group, and the group's checksum is the sum (mod 2^64) of the mixed words.
// The same function on the host: kvt_block_checksum_on_host (src/services/cuda_kernels.h).
// PTX: native/kernels/generate.mjs (nvcc -ptx -arch=compute_90) into src/services/cuda_kernels_ptx.h.

// A tile of a larger piece starts at word first_word of it: its words are mixed with their places in the
// whole piece, so cutting a piece into tiles (one per block of threads) leaves the sums as they were.
struct kvt_checksum_piece {
    unsigned long long address, bytes, first_word;
    unsigned int group, ordinal;
};

__device__ __forceinline__ unsigned long long kvt_mix(unsigned long long x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

extern "C" __global__ void kvt_block_checksum(const kvt_checksum_piece *pieces, unsigned int count,
                                              unsigned long long *sums) {
    for (unsigned int p = blockIdx.x; p < count; p += gridDim.x) {
        const kvt_checksum_piece piece = pieces[p];
        const unsigned char *bytes = reinterpret_cast<const unsigned char *>(piece.address);
        const unsigned long long salt = kvt_mix(piece.ordinal + 0x9e3779b97f4a7c15ull);
        const unsigned long long words = (piece.bytes + 15) / 16;
        const bool aligned = (piece.address & 15ull) == 0;
        unsigned long long sum = 0;
        for (unsigned long long w = threadIdx.x; w < words; w += blockDim.x) {
            unsigned long long low = 0, high = 0;
            if (aligned && (w + 1) * 16 <= piece.bytes) {
                const ulonglong2 word = reinterpret_cast<const ulonglong2 *>(bytes)[w];
                low = word.x;
                high = word.y;
            } else {
                for (unsigned int b = 0; b < 16 && w * 16 + b < piece.bytes; b++) {
                    unsigned long long byte = bytes[w * 16 + b];
                    if (b < 8) low |= byte << (8 * b);
                    else high |= byte << (8 * (b - 8));
                }
            }
            sum += kvt_mix(low ^ kvt_mix(high ^ ((piece.first_word + w) * 0x9e3779b97f4a7c15ull + salt)));
        }
        atomicAdd(&sums[piece.group], sum);
    }
}
