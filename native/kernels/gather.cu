// The gather kernel: moves many pieces (one per layer and K/V plane of a block, say) in one launch, so
// that thousands of small copies cost about what one large copy costs. The piece table lives in device
// memory (the template expanded on the GPU side; pieces larger than KVT_KERNEL_TILE_BYTES come as tiles);
// each block of threads moves one piece at a time with 16-byte loads and stores where the piece's ends
// allow, byte by byte for the rest. A thread loads four 16-byte words before it stores them, so that a
// block has 16 KiB in flight: the copy keeps the memory busy even when few blocks run (a launch's last
// wave, or a launch of few pieces).
// PTX: native/kernels/generate.mjs (nvcc -ptx -arch=compute_90) into src/services/cuda_kernels_ptx.h.

struct kvt_piece {
    unsigned long long source, destination, bytes;
};

extern "C" __global__ void kvt_gather(const kvt_piece *pieces, unsigned int count) {
    for (unsigned int p = blockIdx.x; p < count; p += gridDim.x) {
        const kvt_piece piece = pieces[p];
        const unsigned char *source = reinterpret_cast<const unsigned char *>(piece.source);
        unsigned char *destination = reinterpret_cast<unsigned char *>(piece.destination);
        unsigned long long wide = ((piece.source | piece.destination) & 15ull) == 0 ? piece.bytes / 16 : 0;
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
        for (unsigned long long k = wide * 16 + threadIdx.x; k < piece.bytes; k += step) destination[k] = source[k];
    }
}
