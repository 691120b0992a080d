/* Loads the library's kernels (PTX embedded from native/kernels) into a GPU's primary context once, and
 * launches them on a caller's stream. */
#include "services/cuda_kernels.h"
#include "services/cuda_kernels_ptx.h"
#include "services/status.h"

#include <pthread.h>
#include <stdbool.h>

#define KVT_KERNEL_DEVICES 64
/* The most blocks one launch asks for; each loops over the pieces past it. */
#define KVT_KERNEL_MAX_BLOCKS 65535u

typedef struct {
    bool loaded;
    CUmodule gather_module, checksum_module;
    CUfunction gather, gather_routes, checksum, checksum_routes;
} device_kernels;

static pthread_mutex_t kernels_lock = PTHREAD_MUTEX_INITIALIZER;
static device_kernels kernels[KVT_KERNEL_DEVICES];

static CUresult load_function(const char *image, const char *name, CUmodule *module, CUfunction *function) {
    CUresult result = kvt_cuda.ModuleLoadData(module, image);
    if (result == KVT_CUDA_SUCCESS) result = kvt_cuda.ModuleGetFunction(function, *module, name);
    return result;
}

/* The kernels of `device`, loaded on first use (its context current on the calling thread). */
static kvt_status device_kernels_of(const char *call, uint32_t device, const device_kernels **out) {
    kvt_status status = kvt_cuda_use_device(call, device);
    if (status != KVT_OK) return status;
    if (device >= KVT_KERNEL_DEVICES)
        return kvt_fail(KVT_ERR_NOT_SUPPORTED, "%s: kernels are loaded on GPUs 0-%u only", call,
                        KVT_KERNEL_DEVICES - 1);
    pthread_mutex_lock(&kernels_lock);
    device_kernels *entry = &kernels[device];
    CUresult result = KVT_CUDA_SUCCESS;
    const char *failed = NULL;
    if (!entry->loaded) {
        result = load_function(kvt_ptx_gather, "kvt_gather", &entry->gather_module, &entry->gather);
        failed = "kvt_gather";
        if (result == KVT_CUDA_SUCCESS) {
            result = kvt_cuda.ModuleGetFunction(&entry->gather_routes, entry->gather_module, "kvt_gather_routes");
            failed = "kvt_gather_routes";
        }
        if (result == KVT_CUDA_SUCCESS) {
            result = load_function(kvt_ptx_checksum, "kvt_block_checksum", &entry->checksum_module, &entry->checksum);
            failed = "kvt_block_checksum";
        }
        if (result == KVT_CUDA_SUCCESS) {
            result = kvt_cuda.ModuleGetFunction(&entry->checksum_routes, entry->checksum_module,
                                                "kvt_block_checksum_routes");
            failed = "kvt_block_checksum_routes";
        }
        entry->loaded = result == KVT_CUDA_SUCCESS; /* kept until the process ends, like the context */
    }
    pthread_mutex_unlock(&kernels_lock);
    if (result != KVT_CUDA_SUCCESS) {
        char text[256];
        return kvt_fail(KVT_ERR_BACKEND, "%s: the kernel %s cannot be loaded on GPU %u (PTX for %s): %s", call, failed,
                        device, "compute_90", kvt_cuda_error_text(result, text, sizeof text));
    }
    *out = entry;
    return KVT_OK;
}

/* Launches `function` over `count` tiles (a block of threads each, looping past KVT_KERNEL_MAX_BLOCKS). */
static kvt_status launch(const char *call, CUfunction function, const char *name, uint64_t count, void **parameters,
                         CUstream stream) {
    if (count == 0) return KVT_OK;
    unsigned int blocks = count < KVT_KERNEL_MAX_BLOCKS ? (unsigned int)count : KVT_KERNEL_MAX_BLOCKS;
    CUresult result =
        kvt_cuda.LaunchKernel(function, blocks, 1, 1, KVT_KERNEL_THREADS, 1, 1, 0, stream, parameters, NULL);
    if (result == KVT_CUDA_SUCCESS) return KVT_OK;
    char text[256];
    return kvt_fail(KVT_ERR_BACKEND, "%s: launching %s over %llu pieces failed: %s", call, name,
                    (unsigned long long)count, kvt_cuda_error_text(result, text, sizeof text));
}

kvt_status kvt_cuda_gather(const char *call, uint32_t device, CUdeviceptr pieces, uint32_t count, CUstream stream) {
    const device_kernels *loaded = NULL;
    kvt_status status = device_kernels_of(call, device, &loaded);
    if (status != KVT_OK) return status;
    void *parameters[] = {&pieces, &count};
    return launch(call, loaded->gather, "kvt_gather", count, parameters, stream);
}

kvt_status kvt_cuda_gather_routes(const char *call, uint32_t device, CUdeviceptr routes, uint32_t route_count,
                                  CUdeviceptr pairs, uint32_t pair_count, uint64_t tiles_per_pair, CUstream stream) {
    const device_kernels *loaded = NULL;
    kvt_status status = device_kernels_of(call, device, &loaded);
    if (status != KVT_OK) return status;
    void *parameters[] = {&routes, &route_count, &pairs, &pair_count, &tiles_per_pair};
    return launch(call, loaded->gather_routes, "kvt_gather_routes", (uint64_t)pair_count * tiles_per_pair, parameters,
                  stream);
}

kvt_status kvt_cuda_block_checksum(const char *call, uint32_t device, CUdeviceptr pieces, uint32_t count,
                                   CUdeviceptr sums, CUstream stream) {
    const device_kernels *loaded = NULL;
    kvt_status status = device_kernels_of(call, device, &loaded);
    if (status != KVT_OK) return status;
    void *parameters[] = {&pieces, &count, &sums};
    return launch(call, loaded->checksum, "kvt_block_checksum", count, parameters, stream);
}

kvt_status kvt_cuda_block_checksum_routes(const char *call, uint32_t device, CUdeviceptr routes, uint32_t route_count,
                                          CUdeviceptr blocks, uint32_t block_count, uint64_t tiles_per_block,
                                          CUdeviceptr sums, CUstream stream) {
    const device_kernels *loaded = NULL;
    kvt_status status = device_kernels_of(call, device, &loaded);
    if (status != KVT_OK) return status;
    void *parameters[] = {&routes, &route_count, &blocks, &block_count, &tiles_per_block, &sums};
    return launch(call, loaded->checksum_routes, "kvt_block_checksum_routes", (uint64_t)block_count * tiles_per_block,
                  parameters, stream);
}
