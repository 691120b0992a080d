/* The destination's side of a host-staged move (a READ): the operation's pieces are cut into chunks, each
 * asked of the source into a slot of its own (STAGE_SLOTS in flight), received by rendezvous into the slot's
 * bounce buffer (or written there in place by a source on this host, when the request named it and the source
 * could open it) and copied up into the local memory (into vram on the agent's stream for its GPU, an event
 * after it). The operation becomes KVT_PHASE_MOVED only once none of its UCX requests and none of its copies
 * is in flight: a chunk asked and not answered yet is abandoned when the operation stops (canceled, or its
 * peer gone), since its answer, if one ever comes, finds the slot no longer waiting and is dropped; a bounce
 * buffer it named for writing in place is retired, since the source may still write it. Progress thread only. */
#include "backends/ucx/ucx_staging.h"

#include "services/status.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

enum slot_phase {
    SLOT_FREE,
    SLOT_ASKED,     /* its request went to the source; no answer yet */
    SLOT_RECEIVING, /* its bytes are arriving in the bounce buffer */
    SLOT_COPYING,   /* copied up on the stream; the event tells when done */
};

/* Where a piece of a chunk lands: its local address, and whether that is vram (of the pull's GPU). */
typedef struct {
    uint64_t local, length;
    bool vram;
} landing;

typedef struct stage_slot {
    enum slot_phase phase;
    bool named_buffer; /* its request named its bounce buffer, for the source to write in place */
    void *sending;     /* its request, while UCX still has it */
    void *receiving;   /* its chunk's receive, while UCX still has it */
    ucx_bounce *bounce;
    ucx_gpu_chunk *gpu; /* the chunk buffer its vram pieces are unpacked from, once it had many */
    CUevent event;
    uint64_t bytes;
    uint32_t count;
    struct ucx_staged_pull *pull;
    struct {
        stage_request_header header;
        stage_piece pieces[STAGE_MAX_PIECES];
    } request;
    landing landings[STAGE_MAX_PIECES];
} stage_slot;

typedef struct ucx_staged_pull {
    kvt_agent *agent;
    kvt_op *op;
    uint32_t device;      /* the GPU of its local vram */
    uint32_t outstanding; /* its UCX requests in flight: requests sent, chunks received */
    stage_slot slots[STAGE_SLOTS];
    struct ucx_staged_pull *next;
} ucx_staged_pull;

static void fail(kvt_op *op, kvt_status status) {
    if (op->error == KVT_OK) op->error = status;
}

static ucx_staged_pull *pull_start(kvt_agent *agent, kvt_op *op) {
    ucx_staging *staging = ucx_staging_of(state_of(agent));
    ucx_staged_pull *pull = staging ? calloc(1, sizeof *pull) : NULL;
    if (!pull) return NULL;
    *pull = (ucx_staged_pull){.agent = agent, .op = op, .next = staging->pulls};
    for (uint32_t k = 0; k < op->local_count; k++)
        if (op->locals[k]->kind == KVT_MEM_VRAM) pull->device = op->locals[k]->device;
    for (uint32_t s = 0; s < STAGE_SLOTS; s++) pull->slots[s].pull = pull;
    staging->pulls = pull;
    op->vram_work = pull;
    return pull;
}

static void pull_end(kvt_agent *agent, ucx_staged_pull *pull) {
    ucx_staging *staging = state_of(agent)->staging;
    for (ucx_staged_pull **link = &staging->pulls; *link; link = &(*link)->next)
        if (*link == pull) {
            *link = pull->next;
            break;
        }
    bool events = false;
    for (uint32_t s = 0; s < STAGE_SLOTS; s++) events |= pull->slots[s].event != NULL;
    bool current = events && kvt_cuda_use_device("kvt_xfer_post", pull->device) == KVT_OK;
    for (uint32_t s = 0; s < STAGE_SLOTS; s++) {
        stage_slot *slot = &pull->slots[s];
        if (slot->event && current) kvt_cuda.EventDestroy(slot->event);
        if (slot->bounce) ucx_bounce_give(slot->bounce);
        if (slot->gpu) ucx_gpu_chunk_give(slot->gpu);
    }
    pull->op->vram_work = NULL;
    free(pull);
}

/* Cuts the op's next pieces into the slot's chunk (at most STAGE_CHUNK_BYTES and STAGE_MAX_PIECES). */
static void fill_chunk(kvt_op *op, stage_slot *slot) {
    slot->bytes = 0;
    slot->count = 0;
    while (slot->count < STAGE_MAX_PIECES && slot->bytes < STAGE_CHUNK_BYTES && kvt_op_more(op)) {
        const kvt_desc *d = &op->descs[op->next];
        uint64_t length = d->length - op->next_offset;
        if (length > STAGE_CHUNK_BYTES - slot->bytes) length = STAGE_CHUNK_BYTES - slot->bytes;
        slot->request.pieces[slot->count] = (stage_piece){d->remote_address + op->next_offset, length};
        slot->landings[slot->count] =
            (landing){d->local_address + op->next_offset, length, op->locals[d->local_slot]->kind == KVT_MEM_VRAM};
        slot->count++;
        slot->bytes += length;
        op->next_offset += length;
        if (op->next_offset == d->length) {
            op->next++;
            op->next_offset = 0;
        }
    }
}

static void on_request_sent(void *request, ucs_status_t status, void *user_data) {
    stage_slot *slot = user_data;
    slot->sending = NULL;
    slot->pull->outstanding--;
    if (status != UCS_OK) fail(slot->pull->op, ucx_map_status(status, slot->pull->op->conn));
    ucp_request_free(request);
}

/* The slot's bounce buffer, for a source on this host and in this pid namespace to write in place when it can
 * open it, under a token drawn for this request and written into the buffer's header (the one before is then
 * void); else none. */
static stage_buffer_ref buffer_ref(const kvt_agent *agent, const kvt_conn *conn, const ucx_bounce *bounce) {
    stage_buffer_ref ref = {.fd = KVT_NO_FILE_FD};
    uint64_t token = 0;
    if (bounce->fd < 0 || !kvt_process_checkable(&conn->meta.process) ||
        getrandom(&token, sizeof token, 0) != (ssize_t)sizeof token)
        return ref;
    uint64_t before = 0;
    memcpy(&before, bounce->file + offsetof(stage_buffer_header, token), sizeof before);
    memcpy(bounce->file + offsetof(stage_buffer_header, token), &token, sizeof token);
    int32_t forged_fd = atomic_load_explicit(&agent->staged_fd_forgery, memory_order_relaxed);
    uint64_t forged_token = atomic_load_explicit(&agent->staged_token_forgery, memory_order_relaxed);
    memcpy(ref.boot_id, agent->process.boot_id, sizeof ref.boot_id);
    ref.pid_namespace = agent->process.pid_namespace;
    ref.pid = agent->process.pid;
    ref.fd = (uint32_t)(forged_fd >= 0 ? forged_fd : bounce->fd);
    ref.token = forged_token == KVT_TEST_REPLAYED_TOKEN ? before : forged_token ? forged_token : token;
    return ref;
}

/* Asks the source for the slot's chunk. */
static void ask(ucx_staged_pull *pull, stage_slot *slot, uint32_t index) {
    kvt_op *op = pull->op;
    slot->request.header = (stage_request_header){
        .op = op->id, .slot = index, .count = slot->count, .buffer = buffer_ref(pull->agent, op->conn, slot->bounce)};
    slot->named_buffer = slot->request.header.buffer.fd != KVT_NO_FILE_FD;
    uint64_t forgery = atomic_load_explicit(&pull->agent->staged_forgery, memory_order_relaxed);
    for (uint32_t i = 0; i < slot->count && forgery; i++) slot->request.pieces[i].address += forgery;
    ucp_request_param_t param = {.op_attr_mask =
                                     UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS,
                                 .cb = {.send = on_request_sent},
                                 .user_data = slot,
                                 .flags = UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER};
    slot->phase = SLOT_ASKED;
    void *returned =
        ucp_am_send_nbx(ep_of(op->conn), KVT_AM_STAGE_REQUEST, &slot->request.header, sizeof slot->request.header,
                        slot->request.pieces, slot->count * sizeof(stage_piece), &param);
    if (UCS_PTR_IS_ERR(returned)) {
        slot->phase = SLOT_FREE;
        fail(op, ucx_map_status(UCS_PTR_STATUS(returned), op->conn));
        return;
    }
    kvt_counter_add(&pull->agent->counters, KVT_COUNTER_REQUESTS_ISSUED, 1);
    if (returned) {
        slot->sending = returned;
        pull->outstanding++;
    }
}

/* Fills and asks for every free slot while the op has pieces left. */
static void ask_more(ucx_staged_pull *pull) {
    kvt_op *op = pull->op;
    for (uint32_t s = 0; s < STAGE_SLOTS && op->error == KVT_OK && kvt_op_more(op); s++) {
        stage_slot *slot = &pull->slots[s];
        if (slot->phase != SLOT_FREE || slot->sending) continue;
        if (!slot->bounce) slot->bounce = ucx_bounce_take(state_of(pull->agent));
        if (!slot->bounce) {
            fail(op, KVT_ERR_NO_MEMORY);
            return;
        }
        fill_chunk(op, slot);
        ask(pull, slot, s);
    }
}

/* Copies the whole chunk up into a GPU chunk buffer (the slot's until the pull ends) and unpacks its vram pieces
 * from there with one launch, on `stream`. False, having done nothing, when the agent has none to spare; else the
 * outcome in *out. */
static bool copy_up_by_gather(ucx_staged_pull *pull, stage_slot *slot, CUstream stream, kvt_status *out) {
    if (!slot->gpu) slot->gpu = ucx_gpu_chunk_take(state_of(pull->agent), pull->device);
    if (!slot->gpu) return false;
    stage_gpu_piece pieces[STAGE_MAX_PIECES];
    uint32_t count = 0;
    uint64_t offset = 0;
    for (uint32_t i = 0; i < slot->count; i++) {
        const landing *piece = &slot->landings[i];
        if (piece->vram) pieces[count++] = (stage_gpu_piece){piece->local, offset, piece->length};
        offset += piece->length;
    }
    CUresult result = kvt_cuda.MemcpyHtoDAsync(slot->gpu->address, slot->bounce->host, slot->bytes, stream);
    *out = result != KVT_CUDA_SUCCESS
               ? KVT_ERR_BACKEND
               : ucx_stage_gather("kvt_xfer_post", slot->bounce, slot->gpu, pieces, count, false, stream);
    return true;
}

/* The chunk's bytes are in the bounce buffer: into dram at once, into vram on the stream with an event after (many
 * vram pieces by one gather launch, else a copy each). */
static void copy_up(ucx_staged_pull *pull, stage_slot *slot) {
    kvt_op *op = pull->op;
    uint32_t vram = 0;
    for (uint32_t i = 0; i < slot->count; i++) vram += slot->landings[i].vram;
    CUstream stream = NULL;
    kvt_status status = vram ? ucx_stage_stream(state_of(pull->agent), "kvt_xfer_post", pull->device, &stream) : KVT_OK;
    bool gathered =
        status == KVT_OK && vram >= STAGE_GATHER_MIN_PIECES && copy_up_by_gather(pull, slot, stream, &status);
    CUresult result = KVT_CUDA_SUCCESS;
    uint64_t offset = 0;
    for (uint32_t i = 0; i < slot->count && status == KVT_OK && result == KVT_CUDA_SUCCESS; i++) {
        const landing *piece = &slot->landings[i];
        if (!piece->vram)
            memcpy((void *)(uintptr_t)piece->local, slot->bounce->host + offset, piece->length);
        else if (!gathered)
            result = kvt_cuda.MemcpyHtoDAsync(piece->local, slot->bounce->host + offset, piece->length, stream);
        offset += piece->length;
    }
    if (vram && status == KVT_OK && result == KVT_CUDA_SUCCESS && !slot->event)
        result = kvt_cuda.EventCreate(&slot->event, KVT_CU_EVENT_DISABLE_TIMING);
    if (vram && status == KVT_OK && result == KVT_CUDA_SUCCESS) result = kvt_cuda.EventRecord(slot->event, stream);
    if (status != KVT_OK || result != KVT_CUDA_SUCCESS) {
        /* What was posted before the refusal still reads the bounce buffer: let it finish first. */
        if (stream) kvt_cuda.StreamSynchronize(stream);
        fail(op, KVT_ERR_BACKEND);
        slot->phase = SLOT_FREE;
        return;
    }
    if (vram) {
        slot->phase = SLOT_COPYING;
        return;
    }
    kvt_op_add_bytes_done(op, slot->bytes);
    slot->phase = SLOT_FREE;
}

static void on_received(void *request, ucs_status_t status, size_t length, void *user_data) {
    (void)length;
    stage_slot *slot = user_data;
    ucx_staged_pull *pull = slot->pull;
    slot->receiving = NULL;
    pull->outstanding--;
    ucp_request_free(request);
    if (status == UCS_OK) {
        copy_up(pull, slot);
        return;
    }
    fail(pull->op, ucx_map_status(status, pull->op->conn));
    slot->phase = SLOT_FREE;
}

/* The slot of `pull`s op an answer names, when it is still waiting for one. */
static stage_slot *answered_slot(ucx_state *state, const stage_reply_header *reply) {
    if (!state->staging || reply->slot >= STAGE_SLOTS) return NULL;
    for (ucx_staged_pull *pull = state->staging->pulls; pull; pull = pull->next)
        if (pull->op->id == reply->op)
            return pull->slots[reply->slot].phase == SLOT_ASKED ? &pull->slots[reply->slot] : NULL;
    return NULL;
}

/* Receives the chunk's bytes into the slot's bounce buffer. */
static void receive(ucx_state *state, stage_slot *slot, void *data, size_t length, const ucp_am_recv_param_t *param) {
    ucx_staged_pull *pull = slot->pull;
    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        memcpy(slot->bounce->host, data, length);
        copy_up(pull, slot);
        return;
    }
    ucp_request_param_t receive_param = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                                         .cb = {.recv_am = on_received},
                                         .user_data = slot};
    if (slot->bounce->memh) {
        receive_param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
        receive_param.memh = slot->bounce->memh;
    }
    slot->phase = SLOT_RECEIVING;
    void *returned = ucp_am_recv_data_nbx(state->worker, data, slot->bounce->host, length, &receive_param);
    if (returned == NULL) {
        copy_up(pull, slot);
    } else if (UCS_PTR_IS_ERR(returned)) {
        fail(pull->op, ucx_map_status(UCS_PTR_STATUS(returned), pull->op->conn));
        slot->phase = SLOT_FREE;
    } else {
        slot->receiving = returned;
        pull->outstanding++;
    }
}

ucs_status_t ucx_on_stage_data(void *arg, const void *header, size_t header_length, void *data, size_t length,
                               const ucp_am_recv_param_t *param) {
    kvt_agent *agent = arg;
    stage_reply_header reply;
    if (header_length != sizeof reply) return UCS_OK;
    memcpy(&reply, header, sizeof reply);
    stage_slot *slot = answered_slot(state_of(agent), &reply);
    if (!slot) return UCS_OK; /* abandoned (its op stopped), or not this library's: dropped */
    bool in_place = reply.status == KVT_OK && reply.in_place;
    /* In place: only into a buffer the request named, and no bytes come with it. */
    if (reply.status != KVT_OK || (in_place ? !slot->named_buffer || length != 0 : length != slot->bytes)) {
        fail(slot->pull->op, reply.status != KVT_OK ? reply.status : KVT_ERR_BACKEND);
        slot->phase = SLOT_FREE;
        return UCS_OK;
    }
    if (!in_place) {
        receive(state_of(agent), slot, data, length, param);
        return UCS_OK;
    }
    atomic_fetch_add(&state_of(agent)->staged_in_place_bytes, slot->bytes);
    copy_up(slot->pull, slot);
    return UCS_OK;
}

/* Asks the events of the slots copying up; a completed one frees its slot and counts its bytes. */
static void poll_copies(ucx_staged_pull *pull) {
    bool current = false; /* the pull's GPU made current once, before its first event is asked */
    for (uint32_t s = 0; s < STAGE_SLOTS; s++) {
        stage_slot *slot = &pull->slots[s];
        if (slot->phase != SLOT_COPYING) continue;
        if (!current) (void)kvt_cuda_use_device("kvt_xfer_post", pull->device); /* a refusal: the query fails */
        current = true;
        CUresult result = kvt_cuda.EventQuery(slot->event);
        if (result == KVT_CUDA_ERROR_NOT_READY) continue;
        if (result == KVT_CUDA_SUCCESS)
            kvt_op_add_bytes_done(pull->op, slot->bytes);
        else
            fail(pull->op, KVT_ERR_BACKEND);
        slot->phase = SLOT_FREE;
    }
}

/* Asks UCX to cancel what the pull `outstanding` still has with it: requests its source never takes, and
 * receives of chunks the source never finishes sending. */
static void cancel_slots(ucp_worker_h worker, void *outstanding) {
    ucx_staged_pull *pull = outstanding;
    for (uint32_t s = 0; s < STAGE_SLOTS; s++) {
        stage_slot *slot = &pull->slots[s];
        if (slot->sending) ucp_request_cancel(worker, slot->sending);
        if (slot->receiving) ucp_request_cancel(worker, slot->receiving);
    }
}

/* An unanswered request named the slot's bounce buffer: the source may still write it, whenever it gets to the
 * request, so the buffer is never used again (freed once given back; the source's mapping keeps its pages). */
static void retire(ucx_staged_pull *pull, stage_slot *slot) {
    slot->bounce->retired = true;
    ucx_bounce_give(slot->bounce);
    slot->bounce = NULL;
    atomic_fetch_add(&state_of(pull->agent)->staged_retired, 1);
}

/* Whether anything of the pull is still in flight; a stopped op's unanswered chunks are abandoned. */
static bool in_flight(ucx_staged_pull *pull) {
    bool busy = pull->outstanding > 0;
    for (uint32_t s = 0; s < STAGE_SLOTS; s++) {
        stage_slot *slot = &pull->slots[s];
        if (slot->phase == SLOT_ASKED && pull->op->error != KVT_OK) {
            slot->phase = SLOT_FREE;
            if (slot->named_buffer) retire(pull, slot);
        }
        busy |= slot->phase != SLOT_FREE;
    }
    return busy;
}

void ucx_advance_staged(kvt_agent *agent, kvt_op *op) {
    kvt_conn *conn = op->conn;
    ucx_staged_pull *pull = op->vram_work ? op->vram_work : pull_start(agent, op);
    if (!pull) {
        fail(op, KVT_ERR_NO_MEMORY);
        op->phase = KVT_PHASE_MOVED;
        return;
    }
    if (atomic_load(&op->cancel_requested)) fail(op, KVT_ERR_CANCELED);
    if (atomic_load(&conn->failed) || !ep_of(conn)) fail(op, KVT_ERR_REMOTE_DISCONNECT);
    poll_copies(pull);
    ask_more(pull);
    if (op->error != KVT_OK && pull->outstanding > 0) ucx_stop_outstanding(state_of(agent), op, cancel_slots, pull);
    if (in_flight(pull) || (op->error == KVT_OK && kvt_op_more(op))) return;
    /* Fail closed: bytes from a peer that died meanwhile are not trusted. A request that failed because its
     * peer is gone (its shared memory went with it: UCX's "Shared memory error") says so too. */
    bool stopped = op->error == KVT_ERR_CANCELED || op->error == KVT_ERR_REMOTE_DISCONNECT;
    if (!stopped && !atomic_load(&conn->failed) && kvt_conn_process_gone(conn)) ucx_force_close(state_of(agent), conn);
    if (!stopped && atomic_load(&conn->failed)) op->error = KVT_ERR_REMOTE_DISCONNECT;
    pull_end(agent, pull);
    op->phase = KVT_PHASE_MOVED;
}

kvt_status kvt_test_staged_counts(uint32_t agent_id, kvt_staged_counts *out) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_test_staged_counts", &agent);
    if (status != KVT_OK) return status;
    if (agent->backend_kind != KVT_BACKEND_UCX)
        return kvt_agent_finish(agent, kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_test_staged_counts: a ucx agent only"));
    ucx_state *state = state_of(agent);
    *out = (kvt_staged_counts){.in_place_bytes = atomic_load(&state->staged_in_place_bytes),
                               .retired = atomic_load(&state->staged_retired),
                               .targets = atomic_load(&state->staged_targets)};
    return kvt_agent_finish(agent, KVT_OK);
}
