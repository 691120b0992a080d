/* GPU memory owned by an agent: kvt_mem_alloc_vram (freed by kvt_mem_free, memory.c). */
#include "agent.h"
#include "memory.h"
#include "services/cuda_driver.h"
#include "services/cuda_memory.h"
#include "services/status.h"

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
