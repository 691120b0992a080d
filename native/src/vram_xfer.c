/* Operations over vram: the gather kernel on this agent's GPU moves a READ's descriptors out of the peer's
 * allocations, opened through their CUDA IPC handles (or used as they are when the peer lives in this
 * process), and a CUDA event tells the progress thread when the stream's work completed. */
#include "vram_xfer.h"

#include "agent.h"
#include "services/cuda_driver.h"
#include "services/cuda_kernels.h"
#include "services/cuda_memory.h"
#include "services/status.h"

#include <stdlib.h>
#include <string.h>

static bool same_host(const kvt_process_identity *a, const kvt_process_identity *b) {
    static const uint8_t unknown[16] = {0};
    return memcmp(a->boot_id, unknown, sizeof unknown) != 0 && memcmp(a->boot_id, b->boot_id, sizeof a->boot_id) == 0;
}

static bool same_process(const kvt_process_identity *a, const kvt_process_identity *b) {
    return same_host(a, b) && a->pid == b->pid && a->pid_namespace == b->pid_namespace &&
           a->start_time == b->start_time;
}

kvt_status kvt_vram_classify(const kvt_agent *agent, const kvt_conn *conn, uint32_t direction,
                             kvt_region *const *locals, uint32_t local_count, const uint32_t *remote_slots,
                             uint32_t remote_count, bool *out_vram) {
    uint32_t vram = 0;
    for (uint32_t k = 0; k < local_count; k++) vram += locals[k]->kind == KVT_MEM_VRAM;
    for (uint32_t k = 0; k < remote_count; k++) vram += conn->meta.regions[remote_slots[k]].kind == KVT_MEM_VRAM;
    *out_vram = vram > 0;
    if (vram == 0) return KVT_OK;
    if (vram != local_count + remote_count)
        return kvt_fail(KVT_ERR_NOT_SUPPORTED,
                        "kvt_xfer_post: dram and vram regions in one operation: vram moves only between vram "
                        "regions (host-staged pulls are to come)");
    if (direction != KVT_XFER_READ)
        return kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_xfer_post: vram moves by READs only (a pull from the peer)");
    if (!same_host(&agent->process, &conn->meta.process))
        return kvt_fail(KVT_ERR_NOT_SUPPORTED,
                        "kvt_xfer_post: peer '%s' is on another host: vram moves between processes of one host "
                        "through CUDA IPC (host-staged pulls are to come)",
                        conn->meta.name);
    return KVT_OK;
}

/* A vram op's work in flight: its stream, the piece table in device memory and the event after them. */
typedef struct {
    uint32_t device;
    CUstream stream;
    CUevent event;
    CUdeviceptr table;
} vram_work;

/* Where this process reaches the peer's region `slot`: its own address for a peer in this process, else
 * the allocation opened through its IPC handle (opened once per loaded metadata, closed with it). */
static kvt_status remote_base(kvt_agent *agent, kvt_op *op, uint32_t slot, int64_t *out_shift) {
    kvt_remote_region *region = &op->conn->meta.regions[slot];
    *out_shift = 0;
    if (same_process(&agent->process, &op->conn->meta.process)) return KVT_OK;
    kvt_vram_key key;
    memcpy(&key, region->rkey, sizeof key);
    if (!region->vram_base) {
        kvt_status status = kvt_vram_open("kvt_xfer_post", &key, &region->vram_base);
        if (status != KVT_OK) return status;
    }
    *out_shift = (int64_t)(region->vram_base - key.allocation_base);
    return KVT_OK;
}

static void work_free(vram_work *work) {
    if (kvt_cuda_use_device("kvt_xfer_post", work->device) == KVT_OK) {
        if (work->table) kvt_cuda.MemFree(work->table);
        if (work->event) kvt_cuda.EventDestroy(work->event);
        if (work->stream) kvt_cuda.StreamDestroy(work->stream);
    }
    free(work);
}

/* Uploads the op's pieces and launches the gather and the event after it. */
static kvt_status launch(kvt_agent *agent, kvt_op *op, vram_work *work) {
    work->device = op->locals[0]->device;
    kvt_status status = kvt_cuda_use_device("kvt_xfer_post", work->device);
    kvt_gather_piece *pieces = status == KVT_OK ? calloc(op->count ? op->count : 1, sizeof *pieces) : NULL;
    if (status == KVT_OK && !pieces) status = kvt_fail(KVT_ERR_NO_MEMORY, "kvt_xfer_post: out of memory");
    for (uint32_t i = 0; status == KVT_OK && i < op->count; i++) {
        int64_t shift = 0;
        status = remote_base(agent, op, op->descs[i].remote_slot, &shift);
        pieces[i] = (kvt_gather_piece){(uint64_t)((int64_t)op->descs[i].remote_address + shift),
                                       op->descs[i].local_address, op->descs[i].length};
    }
    CUresult result = KVT_CUDA_SUCCESS;
    if (status == KVT_OK) result = kvt_cuda.StreamCreate(&work->stream, KVT_CU_STREAM_NON_BLOCKING);
    if (status == KVT_OK && result == KVT_CUDA_SUCCESS)
        result = kvt_cuda.EventCreate(&work->event, KVT_CU_EVENT_DISABLE_TIMING);
    if (status == KVT_OK && result == KVT_CUDA_SUCCESS)
        result = kvt_cuda.MemAlloc(&work->table, (op->count ? op->count : 1) * sizeof *pieces);
    if (status == KVT_OK && result == KVT_CUDA_SUCCESS)
        result = kvt_cuda.MemcpyHtoDAsync(work->table, pieces, op->count * sizeof *pieces, work->stream);
    if (status == KVT_OK && result == KVT_CUDA_SUCCESS)
        status = kvt_cuda_gather("kvt_xfer_post", work->device, work->table, op->count, work->stream);
    if (status == KVT_OK && result == KVT_CUDA_SUCCESS) result = kvt_cuda.EventRecord(work->event, work->stream);
    free(pieces); /* pageable: the upload copied it before returning */
    if (status == KVT_OK && result != KVT_CUDA_SUCCESS) {
        char text[256];
        status = kvt_fail(KVT_ERR_BACKEND, "kvt_xfer_post: the GPU refused the copy: %s",
                          kvt_cuda_error_text(result, text, sizeof text));
    }
    return status;
}

void kvt_vram_advance(kvt_agent *agent, kvt_op *op) {
    vram_work *work = op->vram_work;
    if (!work) {
        work = calloc(1, sizeof *work);
        kvt_status status = work ? launch(agent, op, work) : KVT_ERR_NO_MEMORY;
        if (status != KVT_OK) {
            if (work) work_free(work);
            op->error = status;
            op->phase = KVT_PHASE_MOVED;
            return;
        }
        op->vram_work = work;
    }
    if (kvt_cuda_use_device("kvt_xfer_post", work->device) != KVT_OK) return;
    CUresult result = kvt_cuda.EventQuery(work->event);
    if (result == KVT_CUDA_ERROR_NOT_READY) return;
    if (result == KVT_CUDA_SUCCESS)
        kvt_op_add_bytes_done(op, op->bytes_total);
    else
        op->error = KVT_ERR_BACKEND;
    work_free(work);
    op->vram_work = NULL;
    op->phase = KVT_PHASE_MOVED;
}
