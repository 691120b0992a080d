/* The library's kernels (the .cu files of native/kernels) compiled for the host: the fake driver runs their own source
 * over host memory, each block of threads and each thread of it one after another, so that a kernel's
 * indexing, its aligned and unaligned paths and its sums are tested without a GPU. No kernel shares
 * memory between threads or waits for another, so one thread after another computes what the GPU does; their
 * speed and their concurrency are not tested here. */
#include <cstdint>

struct dim3 {
    unsigned int x, y, z;
};
static thread_local dim3 blockIdx, threadIdx, blockDim, gridDim;

struct uint4 {
    unsigned int x, y, z, w;
};
struct ulonglong2 {
    unsigned long long x, y;
};

static unsigned long long atomicAdd(unsigned long long *address, unsigned long long value) {
    return __atomic_fetch_add(address, value, __ATOMIC_RELAXED);
}

#define __global__
#define __device__
#define __forceinline__ inline
#include "../../kernels/checksum.cu"
#include "../../kernels/gather.cu"

/* Runs the kernel `name` (kvt_gather, kvt_gather_routes, kvt_block_checksum or kvt_block_checksum_routes) as a
 * launch of `blocks` blocks of `threads` threads with cuLaunchKernel's `parameters`; false for another name. */
extern "C" bool fake_cuda_run_kernel(const char *name, unsigned int blocks, unsigned int threads, void **parameters);
extern "C" bool fake_cuda_run_kernel(const char *name, unsigned int blocks, unsigned int threads, void **parameters) {
    enum { GATHER, ROUTES, CHECKSUM, CHECKSUM_ROUTES } kernel;
    if (__builtin_strcmp(name, "kvt_gather") == 0)
        kernel = GATHER;
    else if (__builtin_strcmp(name, "kvt_gather_routes") == 0)
        kernel = ROUTES;
    else if (__builtin_strcmp(name, "kvt_block_checksum") == 0)
        kernel = CHECKSUM;
    else if (__builtin_strcmp(name, "kvt_block_checksum_routes") == 0)
        kernel = CHECKSUM_ROUTES;
    else
        return false;
    gridDim = {blocks, 1, 1};
    blockDim = {threads, 1, 1};
    unsigned int count = *static_cast<const unsigned int *>(parameters[1]);
    for (unsigned int block = 0; block < blocks; block++) {
        for (unsigned int thread = 0; thread < threads; thread++) {
            blockIdx = {block, 0, 0};
            threadIdx = {thread, 0, 0};
            if (kernel == GATHER)
                kvt_gather(*static_cast<const kvt_piece *const *>(parameters[0]), count);
            else if (kernel == ROUTES)
                kvt_gather_routes(*static_cast<const kvt_route *const *>(parameters[0]), count,
                                  *static_cast<const kvt_block_pair *const *>(parameters[2]),
                                  *static_cast<const unsigned int *>(parameters[3]),
                                  *static_cast<const unsigned long long *>(parameters[4]));
            else if (kernel == CHECKSUM)
                kvt_block_checksum(*static_cast<const kvt_checksum_piece *const *>(parameters[0]), count,
                                   *static_cast<unsigned long long *const *>(parameters[2]));
            else
                kvt_block_checksum_routes(*static_cast<const kvt_checksum_route *const *>(parameters[0]), count,
                                          *static_cast<const unsigned int *const *>(parameters[2]),
                                          *static_cast<const unsigned int *>(parameters[3]),
                                          *static_cast<const unsigned long long *>(parameters[4]),
                                          *static_cast<unsigned long long *const *>(parameters[5]));
        }
    }
    return true;
}
