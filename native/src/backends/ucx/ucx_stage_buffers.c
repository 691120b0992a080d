/* An agent's staging resources: bounce buffers of one chunk each, registered with UCX (pinned host memory
 * while the agent keeps fewer than STAGE_PINNED_BUFFERS, else pageable), GPU chunk buffers (at most
 * STAGE_GPU_CHUNKS), and a CUDA stream per GPU. Made on first use, kept until the agent stops, but for a bounce
 * buffer retired (a source may still write it), freed when it is next given up. Progress thread only. */
#include "backends/ucx/ucx_staging.h"

#include "services/status.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

ucx_staging *ucx_staging_of(ucx_state *state) {
    if (!state->staging) state->staging = calloc(1, sizeof *state->staging);
    return state->staging;
}

/* Makes the bounce buffer a sealed memfd (STAGE_BUFFER_FILE_BYTES, mapped whole) whose chunk and gather table
 * the driver pins (portable to every context, so any GPU's copies DMA from it): a source on this host may then
 * write chunks into it in place. False, with nothing left, when any step fails. */
static bool shared_memory(ucx_bounce *bounce) {
    uint64_t token = 0;
    if (getrandom(&token, sizeof token, 0) != (ssize_t)sizeof token) return false;
    int fd = memfd_create("kvreuse-bounce", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return false;
    void *file = MAP_FAILED;
    if (ftruncate(fd, STAGE_BUFFER_FILE_BYTES) == 0 &&
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0) /* a writer's mapping cannot fault */
        file = mmap(NULL, STAGE_BUFFER_FILE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    uint8_t *host = file == MAP_FAILED ? NULL : (uint8_t *)file + STAGE_BUFFER_HEADER_BYTES;
    if (host && kvt_cuda.MemHostRegister(host, STAGE_CHUNK_BYTES + STAGE_TABLE_BYTES,
                                         KVT_CU_MEMHOSTREGISTER_PORTABLE) == KVT_CUDA_SUCCESS) {
        stage_buffer_header header = {.token = token};
        memcpy(header.magic, STAGE_BUFFER_MAGIC, sizeof header.magic);
        memcpy(file, &header, sizeof header);
        *bounce = (ucx_bounce){.host = host, .pinned = true, .fd = fd, .file = file};
        return true;
    }
    if (host) munmap(file, STAGE_BUFFER_FILE_BYTES);
    close(fd);
    return false;
}

/* Host memory for a chunk and its gather table: pinned when allowed (a shared memfd, else the driver's), else
 * malloc's. */
static bool bounce_memory(ucx_bounce *bounce, bool want_pinned) {
    *bounce = (ucx_bounce){.fd = -1};
    if (want_pinned && !kvt_cuda_unavailable() && kvt_cuda_use_device("kvt_xfer_post", 0) == KVT_OK) {
        if (shared_memory(bounce)) return true;
        void *host = NULL;
        if (kvt_cuda.MemHostAlloc(&host, STAGE_CHUNK_BYTES + STAGE_TABLE_BYTES, KVT_CU_MEMHOSTALLOC_PORTABLE) ==
            KVT_CUDA_SUCCESS) {
            *bounce = (ucx_bounce){.host = host, .pinned = true, .fd = -1};
            return true;
        }
    }
    kvt_detail_clear(); /* a refusal above only means pageable memory */
    bounce->host = malloc(STAGE_CHUNK_BYTES + STAGE_TABLE_BYTES);
    return bounce->host != NULL;
}

static void bounce_free(ucx_state *state, ucx_bounce *bounce) {
    if (bounce->memh) ucp_mem_unmap(state->context, bounce->memh);
    if (bounce->fd >= 0) {
        if (kvt_cuda_use_device("kvt_xfer_post", 0) == KVT_OK) kvt_cuda.MemHostUnregister(bounce->host);
        munmap(bounce->file, STAGE_BUFFER_FILE_BYTES);
        close(bounce->fd); /* a source that still maps the file keeps it */
    } else if (bounce->pinned) {
        kvt_cuda.MemFreeHost(bounce->host);
    } else {
        free(bounce->host);
    }
    free(bounce);
}

ucx_bounce *ucx_bounce_take(ucx_state *state) {
    ucx_staging *staging = ucx_staging_of(state);
    if (!staging) return NULL;
    for (ucx_bounce **link = &staging->buffers; *link;) {
        ucx_bounce *bounce = *link;
        if (bounce->retired && !bounce->busy) {
            *link = bounce->next;
            staging->pinned -= bounce->pinned;
            bounce_free(state, bounce);
            continue;
        }
        if (!bounce->busy && !bounce->retired) {
            bounce->busy = true;
            return bounce;
        }
        link = &bounce->next;
    }
    ucx_bounce *bounce = calloc(1, sizeof *bounce);
    if (!bounce) return NULL;
    if (!bounce_memory(bounce, staging->pinned < STAGE_PINNED_BUFFERS)) {
        free(bounce);
        return NULL;
    }
    staging->pinned += bounce->pinned;
    ucp_mem_map_params_t params = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
        .address = bounce->host,
        .length = STAGE_CHUNK_BYTES,
    };
    if (ucp_mem_map(state->context, &params, &bounce->memh) != UCS_OK) bounce->memh = NULL;
    bounce->busy = true;
    bounce->staging = staging;
    bounce->next = staging->buffers;
    staging->buffers = bounce;
    return bounce;
}

void ucx_bounce_give(ucx_bounce *bounce) { bounce->busy = false; }

ucx_gpu_chunk *ucx_gpu_chunk_take(ucx_state *state, uint32_t device) {
    ucx_staging *staging = ucx_staging_of(state);
    if (!staging) return NULL;
    for (ucx_gpu_chunk *chunk = staging->gpu_chunks; chunk; chunk = chunk->next)
        if (!chunk->busy && chunk->device == device) {
            chunk->busy = true;
            return chunk;
        }
    if (staging->gpu_chunk_count >= STAGE_GPU_CHUNKS) return NULL;
    ucx_gpu_chunk *chunk = calloc(1, sizeof *chunk);
    if (!chunk) return NULL;
    if (kvt_cuda.MemAlloc(&chunk->address, STAGE_CHUNK_BYTES + STAGE_TABLE_BYTES) != KVT_CUDA_SUCCESS) {
        free(chunk);
        return NULL;
    }
    *chunk = (ucx_gpu_chunk){.address = chunk->address, .device = device, .busy = true, .next = staging->gpu_chunks};
    staging->gpu_chunks = chunk;
    staging->gpu_chunk_count++;
    return chunk;
}

void ucx_gpu_chunk_give(ucx_gpu_chunk *chunk) { chunk->busy = false; }

kvt_status ucx_stage_stream(ucx_state *state, const char *call, uint32_t device, CUstream *out) {
    ucx_staging *staging = ucx_staging_of(state);
    if (!staging) return kvt_fail(KVT_ERR_NO_MEMORY, "%s: out of memory for staging", call);
    kvt_status status = kvt_cuda_use_device(call, device);
    if (status != KVT_OK) return status;
    if (device >= STAGE_MAX_GPUS)
        return kvt_fail(KVT_ERR_NOT_SUPPORTED, "%s: GPU %u is past the %u a staged move uses", call, device,
                        STAGE_MAX_GPUS);
    if (!staging->streams[device]) {
        CUresult result = kvt_cuda.StreamCreate(&staging->streams[device], KVT_CU_STREAM_NON_BLOCKING);
        if (result != KVT_CUDA_SUCCESS) {
            char text[256];
            staging->streams[device] = NULL;
            return kvt_fail(KVT_ERR_BACKEND, "%s: no CUDA stream on GPU %u for staging: %s", call, device,
                            kvt_cuda_error_text(result, text, sizeof text));
        }
    }
    *out = staging->streams[device];
    return KVT_OK;
}

void ucx_staging_forget_answers(ucx_state *state) {
    ucx_staging *staging = state->staging;
    if (!staging) return;
    for (ucx_bounce *bounce = staging->buffers; bounce; bounce = bounce->next)
        if (bounce->answering) {
            bounce->answering = false;
            bounce->busy = false;
        }
    staging->answers = 0;
}

void ucx_staging_free(ucx_state *state) {
    ucx_staging *staging = state->staging;
    if (!staging) return;
    for (uint32_t device = 0; device < STAGE_MAX_GPUS; device++)
        if (staging->streams[device] && kvt_cuda_use_device("kvt_agent_shutdown", device) == KVT_OK) {
            kvt_cuda.StreamSynchronize(staging->streams[device]);
            kvt_cuda.StreamDestroy(staging->streams[device]);
        }
    while (staging->gpu_chunks) {
        ucx_gpu_chunk *chunk = staging->gpu_chunks;
        staging->gpu_chunks = chunk->next;
        if (kvt_cuda_use_device("kvt_agent_shutdown", chunk->device) == KVT_OK) kvt_cuda.MemFree(chunk->address);
        free(chunk);
    }
    while (staging->buffers) {
        ucx_bounce *bounce = staging->buffers;
        staging->buffers = bounce->next;
        bounce_free(state, bounce);
    }
    ucx_stage_targets_free(state);
    free(staging);
    state->staging = NULL;
}
