/* GPU memory of an agent: owned (kvt_mem_alloc_vram) or another process's opened through its CUDA IPC handle
 * (kvt_mem_open_vram_ipc), released by kvt_mem_free (memory.c); filled from the host by kvt_mem_write_vram. */
#include "agent.h"
#include "memory.h"
#include "services/cuda_driver.h"
#include "services/cuda_memory.h"
#include "services/status.h"

#include <string.h>

kvt_status kvt_mem_alloc_vram(uint32_t agent_id, uint32_t device, uint64_t length, uint64_t *out_address) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_mem_alloc_vram", &agent);
    if (status != KVT_OK) return status;
    if (!out_address)
        status = kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_mem_alloc_vram: out_address is NULL");
    else if (length == 0)
        status = kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_mem_alloc_vram: length must be > 0");
    if (status == KVT_OK) status = kvt_cuda_use_device("kvt_mem_alloc_vram", device);
    CUdeviceptr pointer = 0;
    if (status == KVT_OK) {
        char text[256];
        CUresult result = kvt_cuda.MemAlloc(&pointer, (size_t)length);
        if (result != KVT_CUDA_SUCCESS)
            status = kvt_fail(result == KVT_CUDA_ERROR_OUT_OF_MEMORY ? KVT_ERR_NO_MEMORY : KVT_ERR_BACKEND,
                              "kvt_mem_alloc_vram: cuMemAlloc of %llu bytes on GPU %u failed: %s",
                              (unsigned long long)length, device, kvt_cuda_error_text(result, text, sizeof text));
    }
    if (status == KVT_OK) {
        kvt_allocation allocation = {.address = pointer, .length = length, .kind = KVT_MEM_VRAM, .device = device};
        pthread_mutex_lock(&agent->config_lock);
        pthread_mutex_lock(&agent->lock);
        status = kvt_allocation_record_locked(agent, &allocation);
        pthread_mutex_unlock(&agent->lock);
        pthread_mutex_unlock(&agent->config_lock);
        if (status == KVT_OK)
            *out_address = pointer;
        else
            kvt_vram_release(device, pointer);
    }
    return kvt_agent_finish(agent, status);
}

/* Opens `handle` on `device` and measures the mapping: *out_base and *out_length, or the refusal (named). */
static kvt_status open_ipc_handle(uint32_t device, const uint8_t *handle, uint64_t *out_base, uint64_t *out_length) {
    kvt_vram_key key = {.device = device};
    memcpy(key.handle, handle, sizeof key.handle);
    kvt_status status = kvt_vram_open("kvt_mem_open_vram_ipc", &key, out_base);
    if (status != KVT_OK) return status;
    CUdeviceptr start = 0;
    size_t size = 0;
    CUresult result = kvt_cuda.MemGetAddressRange(&start, &size, *out_base);
    if (result == KVT_CUDA_SUCCESS && start == *out_base && size > 0) {
        *out_length = size;
        return KVT_OK;
    }
    char text[256];
    kvt_vram_close(device, *out_base);
    return kvt_fail(KVT_ERR_BACKEND, "kvt_mem_open_vram_ipc: the CUDA driver cannot measure the opened mapping: %s",
                    result == KVT_CUDA_SUCCESS ? "it does not start where it was opened"
                                               : kvt_cuda_error_text(result, text, sizeof text));
}

kvt_status kvt_mem_open_vram_ipc(uint32_t agent_id, uint32_t device, const uint8_t *handle, uint64_t *out_address,
                                 uint64_t *out_length) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_mem_open_vram_ipc", &agent);
    if (status != KVT_OK) return status;
    if (!handle || !out_address || !out_length)
        status = kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_mem_open_vram_ipc: handle, out_address or out_length is NULL");
    const char *unavailable = status == KVT_OK ? kvt_cuda_unavailable() : NULL;
    if (unavailable)
        status = kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_mem_open_vram_ipc: vram is unavailable: %s", unavailable);
    else if (status == KVT_OK && device >= kvt_cuda_device_count())
        status =
            kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_mem_open_vram_ipc: there is no GPU %u (the CUDA driver counts %u)",
                     device, kvt_cuda_device_count());
    uint64_t base = 0, length = 0;
    if (status == KVT_OK) status = open_ipc_handle(device, handle, &base, &length);
    if (status == KVT_OK) {
        kvt_allocation allocation = {
            .address = base, .length = length, .kind = KVT_MEM_VRAM, .device = device, .imported = true};
        memcpy(allocation.ipc_handle, handle, sizeof allocation.ipc_handle);
        pthread_mutex_lock(&agent->config_lock);
        pthread_mutex_lock(&agent->lock);
        status = kvt_allocation_record_locked(agent, &allocation);
        pthread_mutex_unlock(&agent->lock);
        pthread_mutex_unlock(&agent->config_lock);
        if (status == KVT_OK) {
            *out_address = base;
            *out_length = length;
        } else {
            kvt_vram_close(device, base);
        }
    }
    return kvt_agent_finish(agent, status);
}

/* The handle of the vram allocation starting at `address` into `out` (agent->config_lock held). */
static kvt_status ipc_handle_locked(kvt_agent *agent, uint64_t address, uint8_t *out) {
    pthread_mutex_lock(&agent->lock);
    kvt_allocation allocation = {0};
    for (uint32_t i = 0; i < agent->allocation_count && !allocation.address; i++)
        if (agent->allocations[i].kind == KVT_MEM_VRAM && agent->allocations[i].address == address)
            allocation = agent->allocations[i];
    pthread_mutex_unlock(&agent->lock);
    if (!allocation.address)
        return kvt_fail(KVT_ERR_NOT_FOUND,
                        "kvt_mem_vram_ipc_handle: 0x%llx is not the start of a vram allocation of "
                        "agent '%s'",
                        (unsigned long long)address, agent->name);
    if (allocation.imported) {
        memcpy(out, allocation.ipc_handle, sizeof allocation.ipc_handle);
        return KVT_OK;
    }
    kvt_status status = kvt_cuda_use_device("kvt_mem_vram_ipc_handle", allocation.device);
    if (status != KVT_OK) return status;
    CUipcMemHandle handle;
    CUresult result = kvt_cuda.IpcGetMemHandle(&handle, address);
    if (result == KVT_CUDA_SUCCESS) {
        memcpy(out, &handle, sizeof handle);
        return KVT_OK;
    }
    char text[256];
    return kvt_fail(KVT_ERR_BACKEND, "kvt_mem_vram_ipc_handle: the CUDA driver cannot export 0x%llx on GPU %u: %s",
                    (unsigned long long)address, allocation.device, kvt_cuda_error_text(result, text, sizeof text));
}

kvt_status kvt_mem_vram_ipc_handle(uint32_t agent_id, uint64_t address, uint8_t *out_handle) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_mem_vram_ipc_handle", &agent);
    if (status != KVT_OK) return status;
    if (!out_handle) status = kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_mem_vram_ipc_handle: out_handle is NULL");
    if (status == KVT_OK) {
        pthread_mutex_lock(&agent->config_lock);
        status = ipc_handle_locked(agent, address, out_handle);
        pthread_mutex_unlock(&agent->config_lock);
    }
    return kvt_agent_finish(agent, status);
}

/* The vram allocation of `agent` that holds [address, +length), or NULL (agent->lock held). */
static const kvt_allocation *vram_allocation_locked(const kvt_agent *agent, uint64_t address, uint64_t length) {
    for (uint32_t i = 0; i < agent->allocation_count; i++) {
        const kvt_allocation *allocation = &agent->allocations[i];
        uint64_t offset = address - allocation->address;
        if (allocation->kind == KVT_MEM_VRAM && address >= allocation->address && offset < allocation->length &&
            length <= allocation->length - offset)
            return allocation;
    }
    return NULL;
}

/* Copies host bytes up on the legacy stream and waits: the agent's config lock, held throughout, keeps the
 * allocation from being freed under the copy. */
static kvt_status write_vram_locked(kvt_agent *agent, uint64_t address, const void *source, uint64_t length) {
    pthread_mutex_lock(&agent->lock);
    const kvt_allocation *allocation = vram_allocation_locked(agent, address, length);
    uint32_t device = allocation ? allocation->device : 0;
    pthread_mutex_unlock(&agent->lock);
    if (!allocation)
        return kvt_fail(KVT_ERR_INVALID_PARAM,
                        "kvt_mem_write_vram: [0x%llx, +%llu) is not inside a vram allocation of agent '%s'",
                        (unsigned long long)address, (unsigned long long)length, agent->name);
    kvt_status status = kvt_cuda_use_device("kvt_mem_write_vram", device);
    if (status != KVT_OK) return status;
    CUresult result = kvt_cuda.MemcpyHtoDAsync(address, source, (size_t)length, NULL);
    if (result == KVT_CUDA_SUCCESS) result = kvt_cuda.StreamSynchronize(NULL);
    if (result == KVT_CUDA_SUCCESS) return KVT_OK;
    char text[256];
    return kvt_fail(KVT_ERR_BACKEND, "kvt_mem_write_vram: copying %llu bytes up to GPU %u failed: %s",
                    (unsigned long long)length, device, kvt_cuda_error_text(result, text, sizeof text));
}

kvt_status kvt_mem_write_vram(uint32_t agent_id, uint64_t address, const uint8_t *source, uint64_t length) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_mem_write_vram", &agent);
    if (status != KVT_OK) return status;
    if (!source || length == 0)
        status = kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_mem_write_vram: source is NULL or length is 0");
    const char *unavailable = status == KVT_OK ? kvt_cuda_unavailable() : NULL;
    if (unavailable)
        status = kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_mem_write_vram: vram is unavailable: %s", unavailable);
    if (status == KVT_OK) {
        pthread_mutex_lock(&agent->config_lock);
        status = write_vram_locked(agent, address, source, length);
        pthread_mutex_unlock(&agent->config_lock);
    }
    return kvt_agent_finish(agent, status);
}
