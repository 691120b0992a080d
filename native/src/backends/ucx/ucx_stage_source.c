/* The source's side of a host-staged move: a request for one chunk, answered inside its handler on the
 * serving worker. Every piece must lie inside one live region of the agent; its bytes are copied into a
 * bounce buffer (from vram on the agent's stream for that GPU, waited for before the answer goes) and sent
 * back on the request's reply endpoint, which is valid only inside the handler; or, when the request names a
 * bounce buffer of a destination on this host that this agent can open (ucx_stage_targets.c), copied into that
 * one in place, and the answer says so and carries no bytes. Doing it all there keeps
 * ownership plain: the progress thread runs the handler, and a region's withdrawal fences this worker on
 * the same thread before its memory can go, so the pieces cannot vanish during the copy. The pipeline's
 * overlap comes from the destination's several chunks in flight: while this side copies one, another
 * crosses the link and a third is copied up at the destination. */
#include "backends/ucx/ucx_staging.h"

#include "services/status.h"

#include <stdlib.h>
#include <string.h>

static const char staging_call[] = "kvt_xfer_post (staging source)";

/* Where a requested piece lies: its region's kind and GPU. */
typedef struct {
    uint32_t kind, device;
} piece_home;

/* Whether every piece lies inside one live region of the agent (homes[i] then says which kind). */
static bool locate(kvt_agent *agent, const stage_piece *pieces, uint32_t count, piece_home *homes) {
    bool found = true;
    pthread_mutex_lock(&agent->lock);
    for (uint32_t i = 0; i < count && found; i++) {
        found = false;
        for (uint32_t r = 0; r < agent->region_count && !found; r++) {
            const kvt_region *region = agent->regions[r];
            if (pieces[i].address < region->address || pieces[i].length > region->length ||
                pieces[i].address - region->address > region->length - pieces[i].length)
                continue;
            homes[i] = (piece_home){region->kind, region->device};
            found = true;
        }
    }
    pthread_mutex_unlock(&agent->lock);
    return found;
}

/* The number of vram pieces when they all lie on one GPU (*out_device), else 0. */
static uint32_t vram_on_one_gpu(const piece_home *homes, uint32_t count, uint32_t *out_device) {
    uint32_t vram = 0;
    for (uint32_t i = 0; i < count; i++) {
        if (homes[i].kind != KVT_MEM_VRAM) continue;
        if (vram > 0 && homes[i].device != *out_device) return 0;
        *out_device = homes[i].device;
        vram++;
    }
    return vram;
}

/* Packs the vram pieces (all on `device`) into a GPU chunk buffer with one launch (its table uploaded from the tail
 * of `bounce`) and copies the chunk down into `into`, waited for; then copies the dram pieces in. False, having done
 * nothing, when the agent has no GPU chunk buffer to spare; else the outcome in *out. */
static bool stage_by_gather(ucx_state *state, const stage_piece *pieces, uint32_t count, const piece_home *homes,
                            uint32_t device, ucx_bounce *bounce, uint8_t *into, kvt_status *out) {
    CUstream stream = NULL;
    *out = ucx_stage_stream(state, staging_call, device, &stream);
    if (*out != KVT_OK) return true;
    ucx_gpu_chunk *chunk = ucx_gpu_chunk_take(state, device);
    if (!chunk) return false;
    stage_gpu_piece vram[STAGE_MAX_PIECES];
    uint32_t vram_count = 0;
    uint64_t offset = 0;
    for (uint32_t i = 0; i < count; i++) {
        if (homes[i].kind == KVT_MEM_VRAM)
            vram[vram_count++] = (stage_gpu_piece){pieces[i].address, offset, pieces[i].length};
        offset += pieces[i].length;
    }
    *out = ucx_stage_gather(staging_call, bounce, chunk, vram, vram_count, true, stream);
    CUresult result =
        *out == KVT_OK ? kvt_cuda.MemcpyDtoHAsync(into, chunk->address, offset, stream) : KVT_CUDA_SUCCESS;
    CUresult synchronized = kvt_cuda.StreamSynchronize(stream);
    ucx_gpu_chunk_give(chunk);
    if (*out == KVT_OK && (result != KVT_CUDA_SUCCESS || synchronized != KVT_CUDA_SUCCESS)) *out = KVT_ERR_BACKEND;
    if (*out != KVT_OK) return true;
    /* After the copy down, which wrote the whole chunk. */
    offset = 0;
    for (uint32_t i = 0; i < count; i++) {
        if (homes[i].kind != KVT_MEM_VRAM)
            memcpy(into + offset, (const void *)(uintptr_t)pieces[i].address, pieces[i].length);
        offset += pieces[i].length;
    }
    return true;
}

/* Copies the pieces into `into` (the host memory of `bounce`, or a destination's bounce buffer): many vram pieces of
 * one GPU by one gather launch, else one after another (the vram ones on the agent's streams, each waited for). */
static kvt_status stage_pieces(ucx_state *state, const stage_piece *pieces, uint32_t count, const piece_home *homes,
                               ucx_bounce *bounce, uint8_t *into) {
    uint32_t one_gpu = 0;
    kvt_status gathered = KVT_OK;
    if (vram_on_one_gpu(homes, count, &one_gpu) >= STAGE_GATHER_MIN_PIECES &&
        stage_by_gather(state, pieces, count, homes, one_gpu, bounce, into, &gathered))
        return gathered;
    uint64_t offset = 0, gpus = 0;
    CUresult result = KVT_CUDA_SUCCESS;
    kvt_status status = KVT_OK;
    for (uint32_t i = 0; i < count && status == KVT_OK && result == KVT_CUDA_SUCCESS; i++) {
        if (homes[i].kind == KVT_MEM_VRAM) {
            CUstream stream = NULL;
            status = ucx_stage_stream(state, staging_call, homes[i].device, &stream);
            if (status == KVT_OK) {
                gpus |= 1ull << homes[i].device; /* below STAGE_MAX_GPUS once it has a stream */
                result = kvt_cuda.MemcpyDtoHAsync(into + offset, pieces[i].address, pieces[i].length, stream);
            }
        } else {
            memcpy(into + offset, (const void *)(uintptr_t)pieces[i].address, pieces[i].length);
        }
        offset += pieces[i].length;
    }
    for (uint32_t device = 0; device < STAGE_MAX_GPUS; device++) {
        CUstream stream = NULL;
        if (!(gpus >> device & 1) || ucx_stage_stream(state, staging_call, device, &stream) != KVT_OK) continue;
        CUresult synchronized = kvt_cuda.StreamSynchronize(stream);
        if (result == KVT_CUDA_SUCCESS) result = synchronized;
    }
    return status != KVT_OK ? status : result == KVT_CUDA_SUCCESS ? KVT_OK : KVT_ERR_BACKEND;
}

static void on_reply_sent(void *request, ucs_status_t status, void *user_data) {
    (void)status; /* a destination that is gone has nothing left to learn */
    ucx_bounce *bounce = user_data;
    if (bounce->answering) { /* else forgotten at a fence (ucx_staging_forget_answers) */
        bounce->answering = false;
        bounce->staging->answers--;
        ucx_bounce_give(bounce);
    }
    ucp_request_free(request);
}

/* Sends the answer from `bounce`, which holds its header: `length` bytes of it, or only the status (the bytes
 * written `in_place`, or none). The bounce buffer is given back when UCX is done with it. */
static void answer(ucp_ep_h ep, const stage_request_header *request, kvt_status status, bool in_place,
                   ucx_bounce *bounce, uint64_t length) {
    bool bytes = status == KVT_OK && !in_place;
    bounce->reply = (stage_reply_header){
        .op = request->op, .slot = request->slot, .status = status, .in_place = status == KVT_OK && in_place};
    ucp_request_param_t param = {.op_attr_mask =
                                     UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS,
                                 .cb = {.send = on_reply_sent},
                                 .user_data = bounce,
                                 .flags = bytes ? UCP_AM_SEND_FLAG_RNDV : UCP_AM_SEND_FLAG_EAGER};
    if (bytes && bounce->memh) {
        param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
        param.memh = bounce->memh;
    }
    bounce->answering = true;
    bounce->staging->answers++;
    void *returned = ucp_am_send_nbx(ep, KVT_AM_STAGE_DATA, &bounce->reply, sizeof bounce->reply,
                                     bytes ? bounce->host : NULL, bytes ? length : 0, &param);
    if (returned == NULL || UCS_PTR_IS_ERR(returned)) {
        bounce->answering = false;
        bounce->staging->answers--;
        ucx_bounce_give(bounce);
    }
}

/* Whether the request is well formed; its pieces copied into `pieces` (UCX gives the payload at any
 * alignment). */
static bool read_request(const void *header, size_t header_length, const void *data, size_t length,
                         const ucp_am_recv_param_t *param, stage_request_header *out, stage_piece *pieces) {
    if (header_length != sizeof *out || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ||
        !(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP))
        return false;
    memcpy(out, header, sizeof *out);
    if (out->count == 0 || out->count > STAGE_MAX_PIECES || length != out->count * sizeof(stage_piece)) return false;
    memcpy(pieces, data, length);
    uint64_t total = 0;
    for (uint32_t i = 0; i < out->count; i++) {
        if (pieces[i].length == 0 || pieces[i].length > STAGE_CHUNK_BYTES - total) return false;
        total += pieces[i].length;
    }
    return true;
}

ucs_status_t ucx_on_stage_request(void *arg, const void *header, size_t header_length, void *data, size_t length,
                                  const ucp_am_recv_param_t *param) {
    kvt_agent *agent = arg;
    ucx_state *state = state_of(agent);
    stage_request_header request;
    stage_piece pieces[STAGE_MAX_PIECES];
    if (!read_request(header, header_length, data, length, param, &request, pieces))
        return UCS_OK; /* not a request this library sends */
    piece_home homes[STAGE_MAX_PIECES];
    /* The bounce buffer carries the answer, a refusal's too; without one the destination's operation waits
     * for its cancel or its peer's end. */
    ucx_bounce *bounce = ucx_bounce_take(state);
    if (!bounce) return UCS_OK;
    kvt_status status = KVT_ERR_NOT_FOUND; /* a piece withdrawn: the reader reloads */
    uint8_t *in_place = NULL;
    if (locate(agent, pieces, request.count, homes)) {
        in_place = ucx_stage_target_of(state, &agent->process, &request.buffer);
        status = stage_pieces(state, pieces, request.count, homes, bounce, in_place ? in_place : bounce->host);
    }
    uint64_t total = 0;
    for (uint32_t i = 0; i < request.count; i++) total += pieces[i].length;
    kvt_detail_clear(); /* the destination learns the status; this thread's detail is nobody's */
    answer(param->reply_ep, &request, status, in_place != NULL, bounce, total);
    return UCS_OK;
}
