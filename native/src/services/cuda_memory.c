/* Device memory as the CUDA driver describes it: the checks of memory registered as vram, the release of
 * a vram allocation, and the refusal of vram in transfers until the CUDA IPC path moves it. */
#include "services/cuda_memory.h"
#include "services/cuda_driver.h"
#include "services/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the driver says of the allocation holding a pointer; every value zero when it knows none. */
typedef struct {
    uint64_t memory_type, managed, ordinal, legacy_ipc, start, size;
} pointer_facts;

static kvt_status pointer_facts_of(const char *call, uint64_t address, pointer_facts *facts) {
    *facts = (pointer_facts){0};
    int which[] = {KVT_CU_POINTER_ATTRIBUTE_MEMORY_TYPE,      KVT_CU_POINTER_ATTRIBUTE_IS_MANAGED,
                   KVT_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,   KVT_CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
                   KVT_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, KVT_CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    /* Each is at most 8 bytes; the driver writes a bool, an int or a pointer into the low bytes. */
    void *data[] = {&facts->memory_type, &facts->managed, &facts->ordinal,
                    &facts->legacy_ipc,  &facts->start,   &facts->size};
    CUresult result = kvt_cuda.PointerGetAttributes(sizeof which / sizeof which[0], which, data, address);
    if (result == KVT_CUDA_SUCCESS) return KVT_OK;
    /* Drivers that refuse the list for memory they do not know answer INVALID_VALUE for its type alone. */
    uint32_t memory_type = 0;
    if (kvt_cuda.PointerGetAttribute(&memory_type, KVT_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address) ==
        KVT_CUDA_ERROR_INVALID_VALUE) {
        *facts = (pointer_facts){0};
        return KVT_OK;
    }
    char text[256];
    return kvt_fail(KVT_ERR_BACKEND, "%s: the CUDA driver cannot describe 0x%llx: %s", call,
                    (unsigned long long)address, kvt_cuda_error_text(result, text, sizeof text));
}

static kvt_status check_facts(const char *call, uint64_t address, uint64_t length, uint32_t device, bool imported,
                              const pointer_facts *facts) {
    unsigned long long start = address, end = address + length;
    if ((uint32_t)facts->memory_type == 0)
        return kvt_fail(KVT_ERR_INVALID_PARAM,
                        "%s: [0x%llx, +%llu) is not memory the CUDA driver allocated (host memory named as vram?); "
                        "register host memory as dram",
                        call, start, (unsigned long long)length);
    if ((uint8_t)facts->managed)
        return kvt_fail(KVT_ERR_INVALID_PARAM,
                        "%s: [0x%llx, +%llu) is managed (unified) memory, which may live on the host; register "
                        "device memory (cuMemAlloc, cudaMalloc)",
                        call, start, (unsigned long long)length);
    if ((uint32_t)facts->memory_type != KVT_CU_MEMORYTYPE_DEVICE)
        return kvt_fail(KVT_ERR_INVALID_PARAM,
                        "%s: [0x%llx, +%llu) is host memory the CUDA driver pinned or mapped (memory type %u), not "
                        "device memory; register it as dram",
                        call, start, (unsigned long long)length, (uint32_t)facts->memory_type);
    if ((uint32_t)facts->ordinal != device)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "%s: [0x%llx, +%llu) is memory of GPU %d, not of GPU %u", call, start,
                        (unsigned long long)length, (int)(uint32_t)facts->ordinal, device);
    if (start < facts->start || end > facts->start + facts->size)
        return kvt_fail(KVT_ERR_INVALID_PARAM,
                        "%s: [0x%llx, +%llu) is not inside one allocation: the allocation at 0x%llx holds %llu bytes "
                        "(ends at 0x%llx)",
                        call, start, (unsigned long long)length, (unsigned long long)facts->start,
                        (unsigned long long)facts->size, (unsigned long long)(facts->start + facts->size));
    /* A mapping opened from an IPC handle cannot be re-exported; its regions export the handle it came from. */
    if (!imported && !(uint8_t)facts->legacy_ipc)
        return kvt_fail(KVT_ERR_NOT_SUPPORTED,
                        "%s: [0x%llx, +%llu) was allocated through the virtual memory API (cuMemCreate/cuMemMap) or "
                        "a memory pool, and cannot be exported as a CUDA IPC handle, which same-node pulls need; "
                        "register memory from cuMemAlloc/cudaMalloc",
                        call, start, (unsigned long long)length);
    return KVT_OK;
}

kvt_status kvt_vram_check_register(const char *call, uint64_t address, uint64_t length, uint32_t device,
                                   bool imported) {
    const char *unavailable = kvt_cuda_unavailable();
    if (unavailable)
        return kvt_fail(KVT_ERR_NOT_SUPPORTED, "%s: vram (GPU %u) cannot be registered: %s", call, device, unavailable);
    if (device >= kvt_cuda_device_count())
        return kvt_fail(KVT_ERR_INVALID_PARAM, "%s: there is no GPU %u (the CUDA driver counts %u)", call, device,
                        kvt_cuda_device_count());
    pointer_facts facts;
    kvt_status status = pointer_facts_of(call, address, &facts);
    return status == KVT_OK ? check_facts(call, address, length, device, imported, &facts) : status;
}

void kvt_vram_release(uint32_t device, uint64_t address) {
    /* A failure leaves nothing the caller could do: the allocation is gone from the agent either way. */
    if (kvt_cuda_use_device("kvt_mem_free", device) == KVT_OK) kvt_cuda.MemFree(address);
}

kvt_status kvt_vram_key_make(const uint8_t handle[64], uint64_t allocation_base, uint32_t device, uint8_t **out_key,
                             uint32_t *out_length, char *detail, size_t detail_size) {
    kvt_vram_key *key = calloc(1, sizeof *key);
    if (!key) {
        snprintf(detail, detail_size, "kvt_mem_register: out of memory for the key of vram on GPU %u", device);
        return KVT_ERR_NO_MEMORY;
    }
    memcpy(key->handle, handle, sizeof key->handle);
    key->allocation_base = allocation_base;
    key->device = device;
    *out_key = (uint8_t *)key;
    *out_length = sizeof *key;
    return KVT_OK;
}

kvt_status kvt_vram_export(uint32_t device, uint64_t address, uint8_t **out_key, uint32_t *out_length, char *detail,
                           size_t detail_size) {
    char text[256];
    CUresult result = KVT_CUDA_SUCCESS;
    if (kvt_cuda_use_device("kvt_mem_register", device) != KVT_OK) result = KVT_CUDA_ERROR_INVALID_VALUE;
    CUdeviceptr base = 0;
    if (result == KVT_CUDA_SUCCESS)
        result = kvt_cuda.PointerGetAttribute(&base, KVT_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, address);
    CUipcMemHandle handle;
    /* Of the allocation's start, which is what a peer opens (a region may begin inside it). */
    if (result == KVT_CUDA_SUCCESS) result = kvt_cuda.IpcGetMemHandle(&handle, base);
    if (result != KVT_CUDA_SUCCESS) {
        snprintf(detail, detail_size, "kvt_mem_register: vram at 0x%llx on GPU %u cannot be exported: %s",
                 (unsigned long long)address, device, kvt_cuda_error_text(result, text, sizeof text));
        return KVT_ERR_BACKEND;
    }
    _Static_assert(sizeof handle == 64, "a CUDA IPC handle is 64 bytes");
    return kvt_vram_key_make((const uint8_t *)&handle, base, device, out_key, out_length, detail, detail_size);
}

kvt_status kvt_vram_open(const char *call, const kvt_vram_key *key, uint64_t *out_base) {
    kvt_status status = kvt_cuda_use_device(call, key->device);
    if (status != KVT_OK) return status;
    CUipcMemHandle handle;
    memcpy(&handle, key->handle, sizeof handle);
    CUdeviceptr base = 0;
    CUresult result = kvt_cuda.IpcOpenMemHandle(&base, handle, KVT_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    if (result != KVT_CUDA_SUCCESS) {
        char text[256];
        return kvt_fail(KVT_ERR_BACKEND, "%s: the peer's CUDA IPC handle (GPU %u) cannot be opened: %s", call,
                        key->device, kvt_cuda_error_text(result, text, sizeof text));
    }
    *out_base = base;
    return KVT_OK;
}

void kvt_vram_close(uint32_t device, uint64_t base) {
    if (kvt_cuda_use_device("kvt_peer_unload", device) == KVT_OK) kvt_cuda.IpcCloseMemHandle(base);
}
