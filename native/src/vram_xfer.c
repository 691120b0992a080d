/* Operations over vram: the gather kernels on this agent's GPU move a READ's pieces out of the peer's
 * allocations (a WRITE's into them), opened through their CUDA IPC handles (or used as they are when the
 * peer lives in this process), and a CUDA event tells the progress thread when the stream's work
 * completed. A descriptor post's pieces go to kvt_gather as a table of pieces (tiles cut on the host), or,
 * when its descriptors are large, to kvt_gather_routes as one route each (cut on the GPU); a template post goes
 * to kvt_gather_routes as its template's routes and its blocks, expanded on the GPU. */
#include "vram_xfer.h"

#include "agent.h"
#include "file_regions.h"
#include "services/cuda_driver.h"
#include "services/cuda_kernels.h"
#include "services/cuda_memory.h"
#include "services/status.h"
#include "services/util.h"

#include <stdio.h>
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

/* Why the op cannot move host-staged, or NULL when it can. */
static const char *staging_refusal(const kvt_agent *agent, const kvt_op *op, uint32_t local_count) {
    if (!agent->backend->advance_staged) return "host-staged moves need the ucx backend";
    if (op->direction != KVT_XFER_READ)
        return "a host-staged move is a READ (a WRITE into a peer's memory through staging is not built: post a "
               "READ from the peer's side)";
    const kvt_region *gpu = NULL;
    for (uint32_t k = 0; k < local_count; k++) {
        const kvt_region *region = op->locals[k];
        if (region->kind != KVT_MEM_VRAM) continue;
        if (gpu && gpu->device != region->device) return "a host-staged READ lands in the memory of one GPU";
        gpu = region;
    }
    return NULL;
}

kvt_status kvt_vram_classify(const char *call, const kvt_agent *agent, const kvt_conn *conn, kvt_op *op,
                             uint32_t local_count, const uint32_t *remote_slots, uint32_t remote_count) {
    uint32_t vram = 0;
    for (uint32_t k = 0; k < local_count; k++) vram += op->locals[k]->kind == KVT_MEM_VRAM;
    for (uint32_t k = 0; k < remote_count; k++) vram += conn->meta.regions[remote_slots[k]].kind == KVT_MEM_VRAM;
    op->vram = KVT_VRAM_PATH_NONE;
    if (vram == 0) return KVT_OK;
    bool mixed = vram != local_count + remote_count, far = !same_host(&agent->process, &conn->meta.process);
    /* A container beside this one: its liveness table cannot be named from here (/proc/<pid>/fd). */
    bool contained = !far && kvt_process_in_another_pid_namespace(&conn->meta.process);
    if (!mixed && !far && !contained && !agent->vram_staged) {
        /* A reader that cannot see the owner's withdrawals could report bytes of memory put to other use. */
        if (!conn->liveness)
            return kvt_fail(KVT_ERR_NOT_SUPPORTED,
                            "%s: peer '%s' has a liveness table this process cannot open (its /proc/<pid>/fd is not "
                            "this user's, or /proc hides it), and a move through CUDA IPC needs it to check what the "
                            "peer withdrew; an agent created with KVT_AGENT_VRAM_STAGED moves host-staged",
                            call, conn->meta.name);
        op->vram = KVT_VRAM_PATH_IPC;
        return KVT_OK;
    }
    const char *refusal = staging_refusal(agent, op, local_count);
    if (!refusal && conn->answers_lost)
        refusal = "UCX brings nothing back from it over shared memory, and one side has no network transport in "
                  "UCX_TLS to reach it by";
    if (refusal) {
        char why[KVT_MAX_NAME + 64];
        if (mixed)
            snprintf(why, sizeof why, "dram and vram regions in one operation");
        else if (far)
            snprintf(why, sizeof why, "peer '%s' is on another host", conn->meta.name);
        else if (contained)
            snprintf(why, sizeof why, "peer '%s' is in another pid namespace", conn->meta.name);
        else
            snprintf(why, sizeof why, "agent '%s' stages its vram moves (KVT_AGENT_VRAM_STAGED)", agent->name);
        return kvt_fail(KVT_ERR_NOT_SUPPORTED, "%s: %s, so the move goes host-staged, but %s", call, why, refusal);
    }
    op->vram = KVT_VRAM_PATH_STAGED;
    return KVT_OK;
}

#define SPARE_EVENTS 8u

/* An agent's CUDA resources, made on its first vram op and kept until its progress thread ends: the stream
 * every vram op of the agent runs on (in post order), and a piece table in device memory that one op at a
 * time uses (grown as needed; an op posted while it is in use gets a table of its own). cuMemAlloc and
 * cuMemFree (which waits for the whole device) are then off the path of most pulls. */
typedef struct {
    uint32_t device;
    CUstream stream;
    CUdeviceptr table;
    uint64_t table_bytes;
    bool table_busy;
    /* The pinned host memory the agent's table is uploaded from (busy with it), so that the upload is a DMA
     * the stream runs, not a copy through the driver's pageable staging: at the 6.2 GB/s issue 31 measured
     * for pageable uploads, 9,408 pieces (225 KiB) would take about 36 us beside the 150 us of the prefix's
     * bytes. */
    void *staging;
    size_t staging_bytes;
    /* Events of ops that completed, for the next ops to record (cuEventCreate and cuEventDestroy are driver
     * calls on every pull's path otherwise). */
    CUevent spare_events[SPARE_EVENTS];
    uint32_t spare_count;
    uint64_t launches;
    /* kvt_vram_sweep_withdrawn: when it next looks, and the connections it looks at (kept for the next time). */
    uint64_t next_sweep_ns;
    kvt_conn **swept;
    uint32_t swept_capacity;
} agent_vram;

/* A vram op's work in flight: the event after it and, when it has one, its own piece table. */
typedef struct {
    CUevent event;
    bool agent_table;      /* it holds the agent's piece table */
    CUdeviceptr own_table; /* else the table of its own, if it has one yet */
    uint64_t launch;       /* its number among the agent's launches */
    /* The peer's regions it moves from or into (indices into conn->meta.regions), each once: checked against
     * the peer's liveness table before the launch and once the work completed. */
    uint32_t *slots;
    uint32_t slot_count, slot_capacity;
    uint32_t writes_held; /* of those, how many a WRITE holds (the first ones), through their CUDA IPC mappings */
} vram_work;

/* Lists the peer's region `slot` among those the op's work checks, once. */
static kvt_status note_region(kvt_op *op, uint32_t slot) {
    kvt_remote_region *region = &op->conn->meta.regions[slot];
    vram_work *work = op->vram_work;
    if (region->vram_noted == work->launch) return KVT_OK;
    if (work->slot_count == work->slot_capacity) {
        uint32_t capacity = work->slot_capacity ? work->slot_capacity * 2 : 4;
        uint32_t *grown = realloc(work->slots, capacity * sizeof *grown);
        if (!grown) return kvt_fail(KVT_ERR_NO_MEMORY, "kvt_xfer_post: out of memory");
        work->slots = grown;
        work->slot_capacity = capacity;
    }
    work->slots[work->slot_count++] = slot;
    region->vram_noted = work->launch;
    region->vram_users++;
    return KVT_OK;
}

/* Whether every peer region the op's work lists is still registered, after a full fence (so that every byte
 * moved before was moved before the slots are read); marks those withdrawn. */
static bool regions_live(kvt_op *op, const vram_work *work) {
    atomic_thread_fence(memory_order_seq_cst);
    bool live = true;
    for (uint32_t i = 0; i < work->slot_count; i++) {
        kvt_remote_region *region = &op->conn->meta.regions[work->slots[i]];
        if (kvt_remote_region_live(op->conn, region)) continue;
        region->vram_withdrawn = true;
        live = false;
    }
    return live;
}

/* Whether the peer's `region` still needs this process's hold of `kind`: it, or another region at the same byte of
 * the owner (one hold stands for both), is open here (KVT_HOLD_MAPPING) or has a WRITE in flight (KVT_HOLD_WRITE). */
static bool held_by_another(const kvt_conn *conn, const kvt_remote_region *region, kvt_hold_kind kind) {
    for (uint32_t i = 0; i < conn->meta.region_count; i++) {
        const kvt_remote_region *other = &conn->meta.regions[i];
        bool holds = kind == KVT_HOLD_WRITE ? other->vram_writes > 0 : other->vram_base != 0;
        if (other != region && holds && other->address == region->address) return true;
    }
    return false;
}

/* Ends this process's hold of `kind` on the peer's `region` (kvt_liveness_hold), unless another region needs it. */
static void let_go(kvt_conn *conn, const kvt_remote_region *region, kvt_hold_kind kind) {
    if (!held_by_another(conn, region, kind)) kvt_liveness_let_go(conn, region, kind);
}

/* Closes this process's mapping of the peer's withdrawn `region`, then lets its owner free the allocation. */
static void close_withdrawn(kvt_conn *conn, kvt_remote_region *region) {
    kvt_vram_close(region->device, region->vram_base);
    region->vram_base = 0;
    conn->vram_open--;
    let_go(conn, region, KVT_HOLD_MAPPING);
}

/* The op's work no longer uses the regions it listed: a withdrawn one's mapping is closed once no op uses it,
 * so that this process does not keep the owner's allocation mapped until the peer is reloaded. */
static void regions_unused(kvt_op *op, const vram_work *work) {
    for (uint32_t i = 0; i < work->slot_count; i++) {
        kvt_remote_region *region = &op->conn->meta.regions[work->slots[i]];
        if (--region->vram_users == 0 && region->vram_withdrawn && region->vram_base) close_withdrawn(op->conn, region);
    }
}

/* A WRITE's work holds each peer region it lists that this process reached through its CUDA IPC mapping, before
 * the launch and until the work completed, so that the owner's withdrawal waits for it (vram_holds.c). NOT_FOUND
 * when the owner is withdrawing one (nothing moves). */
static kvt_status hold_writes(kvt_op *op, vram_work *work) {
    for (; work->writes_held < work->slot_count; work->writes_held++) {
        kvt_remote_region *region = &op->conn->meta.regions[work->slots[work->writes_held]];
        if (region->vram_base && region->vram_writes == 0) {
            kvt_status status = kvt_liveness_hold(op->conn, region, KVT_HOLD_WRITE);
            if (status != KVT_OK) return status;
        }
        region->vram_writes++;
    }
    return KVT_OK;
}

static void let_go_writes(kvt_op *op, vram_work *work) {
    for (uint32_t i = 0; i < work->writes_held; i++) {
        kvt_remote_region *region = &op->conn->meta.regions[work->slots[i]];
        if (--region->vram_writes == 0 && region->vram_base) let_go(op->conn, region, KVT_HOLD_WRITE);
    }
    work->writes_held = 0;
}

/* Opens the peer's `region` here: held first, then checked live (a region withdrawn, or an allocation its owner is
 * freeing, is not opened: NOT_FOUND, and not tried again). */
static kvt_status open_region(kvt_conn *conn, kvt_remote_region *region) {
    kvt_status held = kvt_liveness_hold(conn, region, KVT_HOLD_MAPPING);
    if (held == KVT_OK && !kvt_remote_region_live(conn, region)) {
        let_go(conn, region, KVT_HOLD_MAPPING);
        held = KVT_ERR_NOT_FOUND;
    }
    if (held == KVT_ERR_NOT_FOUND) region->vram_withdrawn = true;
    if (held != KVT_OK) return held;
    kvt_vram_key key;
    memcpy(&key, region->rkey, sizeof key);
    kvt_status status = kvt_vram_open("kvt_xfer_post", &key, &region->vram_base);
    if (status != KVT_OK) {
        let_go(conn, region, KVT_HOLD_MAPPING);
        return status;
    }
    conn->vram_open++;
    return KVT_OK;
}

/* Where this process reaches the peer's region `slot`: its own address for a peer in this process, else
 * the allocation opened through its IPC handle (opened once per loaded metadata, closed with it or once found
 * withdrawn). Lists the region for the op's liveness checks. */
static kvt_status remote_base(kvt_agent *agent, kvt_op *op, uint32_t slot, int64_t *out_shift) {
    kvt_remote_region *region = &op->conn->meta.regions[slot];
    *out_shift = 0;
    kvt_status noted = note_region(op, slot);
    if (noted != KVT_OK) return noted;
    if (same_process(&agent->process, &op->conn->meta.process)) return KVT_OK;
    if (region->vram_withdrawn) return KVT_ERR_NOT_FOUND; /* its mapping is not opened again */
    if (!region->vram_base) {
        kvt_status status = open_region(op->conn, region);
        if (status != KVT_OK) return status;
    }
    kvt_vram_key key;
    memcpy(&key, region->rkey, sizeof key);
    *out_shift = (int64_t)(region->vram_base - key.allocation_base);
    return KVT_OK;
}

/* The agent's resources on `device`, made on first use; NULL (detail set) when the driver refuses. Vram ops
 * of one agent run on the GPU of their first one; another GPU is refused. */
static agent_vram *agent_vram_of(kvt_agent *agent, uint32_t device) {
    agent_vram *state = agent->vram_state;
    if (state && state->device != device) {
        kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_xfer_post: agent '%s' moves vram on GPU %u; GPU %u is refused",
                 agent->name, state->device, device);
        return NULL;
    }
    if (kvt_cuda_use_device("kvt_xfer_post", device) != KVT_OK) return NULL;
    if (state) return state;
    state = calloc(1, sizeof *state);
    CUresult result =
        state ? kvt_cuda.StreamCreate(&state->stream, KVT_CU_STREAM_NON_BLOCKING) : KVT_CUDA_ERROR_OUT_OF_MEMORY;
    if (result != KVT_CUDA_SUCCESS) {
        char text[256];
        free(state);
        kvt_fail(KVT_ERR_BACKEND, "kvt_xfer_post: no CUDA stream on GPU %u: %s", device,
                 kvt_cuda_error_text(result, text, sizeof text));
        return NULL;
    }
    state->device = device;
    agent->vram_state = state;
    return state;
}

void kvt_vram_agent_stop(kvt_agent *agent) {
    agent_vram *state = agent->vram_state;
    if (!state) return;
    if (kvt_cuda_use_device("kvt_agent_shutdown", state->device) == KVT_OK) {
        kvt_cuda.StreamSynchronize(state->stream);
        if (state->table) kvt_cuda.MemFree(state->table);
        if (state->staging) kvt_cuda.MemFreeHost(state->staging);
        while (state->spare_count > 0) kvt_cuda.EventDestroy(state->spare_events[--state->spare_count]);
        kvt_cuda.StreamDestroy(state->stream);
    }
    free(state->swept);
    free(state);
    agent->vram_state = NULL;
}

#define WITHDRAWN_SWEEP_NS 100000000ull

/* The loaded peers' connections with vram of theirs open here into state->swept (as many as fit); their count. */
static uint32_t connections_with_vram_open(kvt_agent *agent, agent_vram *state) {
    uint32_t count = 0;
    pthread_mutex_lock(&agent->lock);
    for (uint32_t i = 0; i < agent->peer_count; i++) {
        kvt_conn *conn = agent->peers[i]->conn;
        if (!conn || conn->vram_open == 0) continue;
        if (count == state->swept_capacity) {
            uint32_t capacity = state->swept_capacity ? state->swept_capacity * 2 : 8;
            kvt_conn **grown = realloc(state->swept, capacity * sizeof *grown);
            if (!grown) break; /* the others wait for the next sweep */
            state->swept = grown;
            state->swept_capacity = capacity;
        }
        state->swept[count++] = conn;
    }
    pthread_mutex_unlock(&agent->lock);
    return count;
}

void kvt_vram_sweep_withdrawn(kvt_agent *agent) {
    agent_vram *state = agent->vram_state;
    if (!state) return;
    uint64_t now = kvt_now_ns();
    if (now < state->next_sweep_ns) return;
    state->next_sweep_ns = now + WITHDRAWN_SWEEP_NS;
    uint32_t count = connections_with_vram_open(agent, state);
    /* Connections are freed on this thread only (kvt_reap_dead_conns): each one listed stays valid here. */
    for (uint32_t c = 0; c < count; c++) {
        kvt_conn *conn = state->swept[c];
        for (uint32_t i = 0; i < conn->meta.region_count; i++) {
            kvt_remote_region *region = &conn->meta.regions[i];
            if (!region->vram_base || region->vram_users > 0 || kvt_remote_region_live(conn, region)) continue;
            region->vram_withdrawn = true;
            close_withdrawn(conn, region);
        }
    }
}

/* A piece table of `bytes` for one op: the agent's when free (grown if short), else one of the op's own. */
static CUresult table_for(agent_vram *state, vram_work *work, uint64_t bytes, CUdeviceptr *out) {
    if (state->table_busy) {
        CUresult result = kvt_cuda.MemAlloc(&work->own_table, bytes);
        *out = work->own_table;
        return result;
    }
    if (state->table_bytes < bytes) {
        if (state->table) kvt_cuda.MemFree(state->table);
        state->table = 0;
        state->table_bytes = 0;
        CUresult result = kvt_cuda.MemAlloc(&state->table, bytes);
        if (result != KVT_CUDA_SUCCESS) return result;
        state->table_bytes = bytes;
    }
    state->table_busy = true;
    work->agent_table = true;
    *out = state->table;
    return KVT_CUDA_SUCCESS;
}

/* An event for an op's work: a spare one, else a new one. */
static CUresult event_take(agent_vram *state, CUevent *out) {
    if (state->spare_count == 0) return kvt_cuda.EventCreate(out, KVT_CU_EVENT_DISABLE_TIMING);
    *out = state->spare_events[--state->spare_count];
    return KVT_CUDA_SUCCESS;
}

/* Gives back what the op's work holds; its event is kept as a spare when the work `completed` (else the
 * driver may still be recording it). */
static void work_free(agent_vram *state, vram_work *work, bool completed) {
    if (work->event && completed && state->spare_count < SPARE_EVENTS)
        state->spare_events[state->spare_count++] = work->event;
    else if (work->event)
        kvt_cuda.EventDestroy(work->event);
    if (work->own_table) kvt_cuda.MemFree(work->own_table);
    if (work->agent_table) state->table_busy = false;
    free(work->slots);
    free(work);
}

/* Where an op's table (its pieces, or a template post's routes and blocks) is written on the host: the
 * agent's pinned staging (when the op gets the agent's table), else memory of its own (malloc). */
typedef struct {
    void *bytes;
    size_t capacity;
    bool pinned;
} table_buffer;

/* Grows the buffer to hold at least `needed` bytes (doubling, 1,536 at first), keeping its first `keep`;
 * false when memory is short. */
static bool table_buffer_reserve(table_buffer *buffer, size_t needed, size_t keep) {
    if (needed <= buffer->capacity) return true;
    size_t capacity = buffer->capacity == 0 ? 64 * sizeof(kvt_gather_piece) : buffer->capacity;
    while (capacity < needed)
        if (__builtin_mul_overflow(capacity, 2, &capacity)) return false;
    void *grown = NULL;
    if (!buffer->pinned) {
        grown = realloc(buffer->bytes, capacity);
    } else if (kvt_cuda.MemHostAlloc(&grown, capacity, KVT_CU_MEMHOSTALLOC_PORTABLE) == KVT_CUDA_SUCCESS) {
        if (keep) memcpy(grown, buffer->bytes, keep);
        if (buffer->bytes) kvt_cuda.MemFreeHost(buffer->bytes);
    } else {
        grown = NULL;
    }
    if (!grown) return false;
    buffer->bytes = grown;
    buffer->capacity = capacity;
    return true;
}

/* Every piece of a descriptor op into `buffer` (*out_count of them): each remote address where this process
 * reaches it, each descriptor cut into tiles of at most KVT_KERNEL_TILE_BYTES. */
static kvt_status collect_pieces(kvt_agent *agent, kvt_op *op, table_buffer *buffer, uint32_t *out_count) {
    uint32_t count = 0;
    kvt_status status = KVT_OK;
    while (status == KVT_OK && kvt_op_more(op)) {
        const kvt_desc *d = &op->descs[op->next++];
        int64_t shift = 0;
        status = remote_base(agent, op, d->remote_slot, &shift);
        uint64_t remote = (uint64_t)((int64_t)d->remote_address + shift);
        bool read = op->direction == KVT_XFER_READ;
        uint64_t source = read ? remote : d->local_address, destination = read ? d->local_address : remote;
        for (uint64_t at = 0; status == KVT_OK && at < d->length; at += KVT_KERNEL_TILE_BYTES) {
            size_t filled = (size_t)count * sizeof(kvt_gather_piece);
            if (!table_buffer_reserve(buffer, filled + sizeof(kvt_gather_piece), filled)) {
                status = kvt_fail(KVT_ERR_NO_MEMORY, "kvt_xfer_post: out of memory for %u pieces", count + 1);
                break;
            }
            ((kvt_gather_piece *)buffer->bytes)[count++] =
                (kvt_gather_piece){source + at, destination + at, kvt_tile_bytes(d->length, at)};
        }
    }
    *out_count = count;
    return status;
}

/* A descriptor op moves as routes (one a descriptor, over one block pair) rather than as pieces when its
 * descriptors make at least this many tiles each: the host then cuts nothing and uploads fewer bytes (a route
 * is 80 bytes, a piece 24 a tile), as for 42 blocks of 7 MiB. */
#define TILES_PER_DESCRIPTOR_AS_ROUTES 4u

static bool descriptors_as_routes(const kvt_op *op) {
    if (op->source) return false; /* its window holds part of its descriptors only */
    uint64_t tiles = 0;
    for (uint32_t i = 0; i < op->count; i++)
        tiles += (op->descs[i].length + KVT_KERNEL_TILE_BYTES - 1) / KVT_KERNEL_TILE_BYTES;
    return tiles >= (uint64_t)TILES_PER_DESCRIPTOR_AS_ROUTES * op->count;
}

/* A descriptor op's descriptors as routes of one row each, each remote address where this process reaches
 * it, over the block pair (0, 0). */
static kvt_status collect_descriptor_routes(kvt_agent *agent, kvt_op *op, kvt_gather_route *routes,
                                            kvt_gather_block_pair *pair, uint64_t *out_tiles_per_pair) {
    bool read = op->direction == KVT_XFER_READ;
    uint64_t tiles = 0;
    for (; op->next < op->count; op->next++) {
        const kvt_desc *d = &op->descs[op->next];
        int64_t shift = 0;
        kvt_status status = remote_base(agent, op, d->remote_slot, &shift);
        if (status != KVT_OK) return status;
        uint64_t remote = (uint64_t)((int64_t)d->remote_address + shift);
        kvt_gather_route *route = &routes[op->next];
        *route = (kvt_gather_route){.source = read ? remote : d->local_address,
                                    .destination = read ? d->local_address : remote,
                                    .row_bytes = d->length,
                                    .first_tile = tiles,
                                    .rows = 1};
        tiles += kvt_gather_route_tile(route);
    }
    *pair = (kvt_gather_block_pair){0, 0};
    *out_tiles_per_pair = tiles;
    return KVT_OK;
}

/* What one launch moves: a descriptor op's pieces (kvt_gather), or routes and blocks (kvt_gather_routes: a
 * template post's, expanded on the GPU, or a descriptor op's large descriptors, cut there). */
typedef struct {
    const char *call; /* the post's */
    bool routed;
    uint32_t count; /* pieces, or routes */
    uint32_t blocks;
    uint64_t tiles_per_block;
    size_t bytes; /* of the table: the pieces, or the routes then the blocks */
} launch_table;

/* The op's table into `buffer`. */
static kvt_status collect_table(kvt_agent *agent, kvt_op *op, table_buffer *buffer, launch_table *table) {
    bool templated = op->source && op->source->gather_shape;
    table->call = templated ? "kvt_xfer_post_blocks" : "kvt_xfer_post";
    table->routed = templated || descriptors_as_routes(op);
    if (!table->routed) {
        kvt_status status = collect_pieces(agent, op, buffer, &table->count);
        table->bytes = (size_t)table->count * sizeof(kvt_gather_piece);
        return status;
    }
    if (templated) {
        op->source->gather_shape(op, &table->count, &table->blocks);
    } else {
        table->count = op->count;
        table->blocks = 1;
    }
    size_t routes = (size_t)table->count * sizeof(kvt_gather_route);
    table->bytes = routes + (size_t)table->blocks * sizeof(kvt_gather_block_pair);
    if (!table_buffer_reserve(buffer, table->bytes, 0))
        return kvt_fail(KVT_ERR_NO_MEMORY, "%s: out of memory for %u routes and %u blocks", table->call, table->count,
                        table->blocks);
    kvt_gather_block_pair *pairs = (kvt_gather_block_pair *)((uint8_t *)buffer->bytes + routes);
    if (!templated) return collect_descriptor_routes(agent, op, buffer->bytes, pairs, &table->tiles_per_block);
    return op->source->gather_tables(agent, op, remote_base, buffer->bytes, pairs, &table->tiles_per_block);
}

static kvt_status launch_gather(const launch_table *table, uint32_t device, CUdeviceptr on_device, CUstream stream) {
    if (!table->routed) return kvt_cuda_gather(table->call, device, on_device, table->count, stream);
    return kvt_cuda_gather_routes(table->call, device, on_device, table->count,
                                  on_device + table->count * sizeof(kvt_gather_route), table->blocks,
                                  table->tiles_per_block, stream);
}

/* Uploads the op's table and launches the gather and the event after it, on the agent's stream. */
static kvt_status launch(kvt_agent *agent, kvt_op *op, agent_vram *state, vram_work *work) {
    bool shared = !state->table_busy; /* it gets the agent's table and staging */
    table_buffer buffer = {
        .bytes = shared ? state->staging : NULL, .capacity = shared ? state->staging_bytes : 0, .pinned = shared};
    launch_table table = {0};
    kvt_status status = collect_table(agent, op, &buffer, &table);
    if (status == KVT_OK && op->direction == KVT_XFER_WRITE) status = hold_writes(op, work);
    /* A region the peer withdrew already: nothing moves (a WRITE never lands in memory put to other use). */
    if (status == KVT_OK && !regions_live(op, work)) status = KVT_ERR_NOT_FOUND;
    if (shared) {
        state->staging = buffer.bytes;
        state->staging_bytes = buffer.capacity;
    }
    /* Opening a handle made the peer's GPU current; the work runs on this agent's. */
    if (status == KVT_OK) status = kvt_cuda_use_device("kvt_xfer_post", state->device);
    CUdeviceptr on_device = 0;
    CUresult result = KVT_CUDA_SUCCESS;
    bool uploaded = false;
    if (status == KVT_OK) result = event_take(state, &work->event);
    if (status == KVT_OK && result == KVT_CUDA_SUCCESS)
        result = table_for(state, work, table.bytes ? table.bytes : 1, &on_device);
    /* From the pinned staging a DMA on the stream; from memory of the op's own (pageable), copied before the
     * call returns. */
    if (status == KVT_OK && result == KVT_CUDA_SUCCESS) {
        result = kvt_cuda.MemcpyHtoDAsync(on_device, buffer.bytes, table.bytes, state->stream);
        uploaded = result == KVT_CUDA_SUCCESS;
    }
    if (status == KVT_OK && result == KVT_CUDA_SUCCESS)
        status = launch_gather(&table, state->device, on_device, state->stream);
    if (status == KVT_OK && result == KVT_CUDA_SUCCESS) result = kvt_cuda.EventRecord(work->event, state->stream);
    if (!shared) free(buffer.bytes);
    if (status == KVT_OK && result != KVT_CUDA_SUCCESS) {
        char text[256];
        status = kvt_fail(KVT_ERR_BACKEND, "kvt_xfer_post: the GPU refused the copy: %s",
                          kvt_cuda_error_text(result, text, sizeof text));
    }
    /* A failed op gives the staging back at once: nothing may still be reading it. */
    if (status != KVT_OK && uploaded) kvt_cuda.StreamSynchronize(state->stream);
    return status;
}

/* Ends the op's movement with `status` (KVT_OK: its work completed), its work (if any) given back. */
static void moved(kvt_op *op, agent_vram *state, vram_work *work, kvt_status status) {
    if (work) let_go_writes(op, work);
    if (work) regions_unused(op, work);
    if (work) work_free(state, work, status == KVT_OK);
    op->vram_work = NULL;
    if (status != KVT_OK && op->error == KVT_OK) op->error = status;
    op->phase = KVT_PHASE_MOVED;
}

void kvt_vram_advance(kvt_agent *agent, kvt_op *op) {
    if (op->vram == KVT_VRAM_PATH_STAGED) {
        agent->backend->advance_staged(agent, op);
        return;
    }
    agent_vram *state = agent_vram_of(agent, op->locals[0]->device);
    if (!state) {
        moved(op, NULL, NULL, KVT_ERR_NOT_SUPPORTED);
        return;
    }
    vram_work *work = op->vram_work;
    if (!work) {
        work = calloc(1, sizeof *work);
        if (!work) {
            moved(op, state, NULL, KVT_ERR_NO_MEMORY);
            return;
        }
        work->launch = ++state->launches;
        op->vram_work = work;
        kvt_status status = launch(agent, op, state, work);
        if (status != KVT_OK) {
            moved(op, state, work, status);
            return;
        }
    }
    CUresult result = kvt_cuda.EventQuery(work->event);
    if (result == KVT_CUDA_ERROR_NOT_READY) return;
    kvt_status status = result == KVT_CUDA_SUCCESS ? KVT_OK : KVT_ERR_BACKEND;
    /* Bytes read out of a region the peer withdrew meanwhile may be its memory's next use: none counts as read
     * (the peer marks the withdrawal before it may reuse the memory; this looks after the work completed). */
    if (status == KVT_OK && !regions_live(op, work)) status = KVT_ERR_NOT_FOUND;
    if (status == KVT_OK) kvt_op_add_bytes_done(op, op->bytes_total);
    moved(op, state, work, status);
}
