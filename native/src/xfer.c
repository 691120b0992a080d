/* Transfers: validating and posting batches, the operation state machine on the progress thread,
 * status, cancel, release — and standalone notifications. */
#include "agent.h"

#include "blocks.h"
#include "file_regions.h"
#include "heartbeat.h"
#include "services/copy.h"
#include "services/notify_header.h"
#include "services/status.h"
#include "services/stretch.h"
#include "vram_xfer.h"
#include "xfer.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- validation ---------------------------------------------------------------------------------- */

typedef struct {
    uint32_t direction, count;
    const uint32_t *local_index, *remote_index;
    const uint64_t *local_offset, *remote_offset, *length;
    uint32_t local_region_count, remote_region_count;
    const uint32_t *local_regions, *remote_regions;
    const uint8_t *notification;
    uint32_t notification_length;
} post_request;

static kvt_status check_post_shape(const post_request *req, const uint64_t *out_op) {
    if (!out_op) return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_xfer_post: out_op is NULL");
    if (req->direction != KVT_XFER_READ && req->direction != KVT_XFER_WRITE)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_xfer_post: direction %u is neither READ (0) nor WRITE (1)",
                        req->direction);
    if (req->count == 0 || req->count > KVT_MAX_DESCRIPTORS)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_xfer_post: count %u is outside 1..%u", req->count,
                        KVT_MAX_DESCRIPTORS);
    if (!req->local_index || !req->local_offset || !req->remote_index || !req->remote_offset || !req->length)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_xfer_post: a descriptor array is NULL");
    if (req->local_region_count == 0 || !req->local_regions || req->remote_region_count == 0 || !req->remote_regions)
        return kvt_fail(KVT_ERR_INVALID_PARAM,
                        "kvt_xfer_post: the local (%u entries) and remote (%u entries) region tables must be non-empty",
                        req->local_region_count, req->remote_region_count);
    if (req->notification_length > KVT_MAX_NOTIFICATION || (req->notification_length && !req->notification))
        return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_xfer_post: notification of %u bytes (limit %u, data %s)",
                        req->notification_length, KVT_MAX_NOTIFICATION, req->notification ? "given" : "NULL");
    return KVT_OK;
}

kvt_status kvt_resolve_peer_locked(kvt_agent *agent, const char *call, uint32_t peer_id, uint64_t generation,
                                   kvt_peer **out) {
    kvt_peer *peer = NULL;
    kvt_status status = kvt_peer_lookup_locked(agent, call, peer_id, &peer);
    if (status != KVT_OK) return status;
    if (peer->generation != generation)
        return kvt_fail(KVT_ERR_NOT_FOUND, "%s: peer %u ('%s') generation %llu is stale (current %llu)", call, peer_id,
                        peer->name, (unsigned long long)generation, (unsigned long long)peer->generation);
    if (!peer->conn)
        return kvt_fail(KVT_ERR_NOT_FOUND, "%s: peer %u ('%s') was invalidated; load its metadata again", call, peer_id,
                        peer->name);
    if (atomic_load(&peer->conn->failed))
        return kvt_fail(KVT_ERR_REMOTE_DISCONNECT, "%s: peer %u ('%s') disconnected", call, peer_id, peer->name);
    *out = peer;
    return KVT_OK;
}

static kvt_status resolve_tables_locked(const kvt_agent *agent, const post_request *req, const kvt_conn *conn,
                                        kvt_region **locals, uint32_t *remote_slots) {
    for (uint32_t k = 0; k < req->local_region_count; k++) {
        locals[k] = NULL;
        for (uint32_t i = 0; i < agent->region_count; i++)
            if (agent->regions[i]->id == req->local_regions[k]) locals[k] = agent->regions[i];
        if (!locals[k])
            return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_xfer_post: local_regions[%u] = %u is not a live region of '%s'",
                            k, req->local_regions[k], agent->name);
    }
    for (uint32_t k = 0; k < req->remote_region_count; k++) {
        remote_slots[k] = UINT32_MAX;
        for (uint32_t i = 0; i < conn->meta.region_count; i++)
            if (conn->meta.regions[i].id == req->remote_regions[k]) remote_slots[k] = i;
        if (remote_slots[k] == UINT32_MAX)
            return kvt_fail(KVT_ERR_INVALID_PARAM,
                            "kvt_xfer_post: remote_regions[%u] = %u is not a region peer '%s' advertised", k,
                            req->remote_regions[k], conn->meta.name);
    }
    return KVT_OK;
}

/* Bounds-checks every descriptor and fills op->descs, merging neighbours contiguous on both sides. */
static kvt_status build_descriptors(const post_request *req, const kvt_conn *conn, kvt_region *const *locals,
                                    const uint32_t *remote_slots, kvt_op *op) {
    uint32_t n = 0;
    uint64_t total = 0, lowest = UINT64_MAX, highest = 0; /* destination span */
    for (uint32_t i = 0; i < req->count; i++) {
        uint32_t li = req->local_index[i], ri = req->remote_index[i];
        uint64_t lo = req->local_offset[i], ro = req->remote_offset[i], len = req->length[i];
        if (li >= req->local_region_count)
            return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_xfer_post: descriptor %u: local index %u >= table size %u", i,
                            li, req->local_region_count);
        if (ri >= req->remote_region_count)
            return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_xfer_post: descriptor %u: remote index %u >= table size %u", i,
                            ri, req->remote_region_count);
        if (len == 0) return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_xfer_post: descriptor %u: length is 0", i);
        const kvt_region *local = locals[li];
        const kvt_remote_region *remote = &conn->meta.regions[remote_slots[ri]];
        if (lo > local->length || len > local->length - lo)
            return kvt_fail(
                KVT_ERR_INVALID_PARAM,
                "kvt_xfer_post: descriptor %u: local offset %llu + length %llu exceeds region %u length %llu", i,
                (unsigned long long)lo, (unsigned long long)len, local->id, (unsigned long long)local->length);
        if (ro > remote->length || len > remote->length - ro)
            return kvt_fail(KVT_ERR_INVALID_PARAM,
                            "kvt_xfer_post: descriptor %u: remote offset %llu + length %llu exceeds region %u length "
                            "%llu advertised by peer '%s'",
                            i, (unsigned long long)ro, (unsigned long long)len, remote->id,
                            (unsigned long long)remote->length, conn->meta.name);
        total += len;
        uint64_t destination = req->direction == KVT_XFER_READ ? local->address + lo : remote->address + ro;
        if (destination < lowest) lowest = destination;
        if (destination + len > highest) highest = destination + len;
        kvt_desc d = {.local_address = local->address + lo,
                      .remote_address = remote->address + ro,
                      .length = len,
                      .local_slot = li,
                      .remote_slot = remote_slots[ri]};
        kvt_desc *prev = n ? &op->descs[n - 1] : NULL;
        if (prev && prev->local_slot == d.local_slot && prev->remote_slot == d.remote_slot &&
            prev->local_address + prev->length == d.local_address &&
            prev->remote_address + prev->length == d.remote_address)
            prev->length += len;
        else
            op->descs[n++] = d;
    }
    op->count = n;
    op->bytes_total = total;
    uint64_t threshold = kvt_streaming_threshold();
    op->streaming = total >= threshold && highest - lowest >= threshold;
    return KVT_OK;
}

/* ---- post ---------------------------------------------------------------------------------------- */

void kvt_op_free(kvt_agent *agent, kvt_op *op) {
    if (!op) return;
    if (op->source) op->source->free(agent, op->source);
    kvt_block_give(agent, op);
}

/* One block holds the op (its own completion record), its descriptors, its local region table and the
 * scratch table of remote slots, so that an op is refused whole at post when memory is short and
 * nothing after the post allocates on its behalf. The block is a warm one (blocks.c): everything but the
 * descriptors, which the post writes in full, is zeroed here. */
kvt_op *kvt_op_new(kvt_agent *agent, uint32_t direction, uint32_t desc_capacity, uint32_t local_count,
                   uint32_t remote_slot_count, const uint8_t *notification, uint32_t notification_length,
                   uint32_t **out_remote_slots) {
    size_t descs_at = (sizeof(kvt_op) + _Alignof(kvt_desc) - 1) / _Alignof(kvt_desc) * _Alignof(kvt_desc);
    size_t locals_at = descs_at + (size_t)desc_capacity * sizeof(kvt_desc);
    locals_at = (locals_at + _Alignof(kvt_region *) - 1) / _Alignof(kvt_region *) * _Alignof(kvt_region *);
    size_t slots_at = locals_at + (size_t)local_count * sizeof(kvt_region *);
    size_t end = slots_at + (size_t)remote_slot_count * sizeof(uint32_t);
    uint8_t *block = kvt_block_take(agent, end);
    if (!block) return NULL;
    memset(block, 0, descs_at);
    memset(block + locals_at, 0, end - locals_at);
    kvt_op *op = (kvt_op *)block;
    op->descs = (kvt_desc *)(block + descs_at);
    op->locals = (kvt_region **)(block + locals_at);
    if (out_remote_slots) *out_remote_slots = (uint32_t *)(block + slots_at);
    op->direction = direction;
    op->local_count = local_count;
    op->status = KVT_IN_PROGRESS;
    op->phase = KVT_PHASE_QUEUED;
    op->notification_length = notification_length;
    if (notification_length) memcpy(op->notification, notification, notification_length);
    return op;
}

void kvt_op_hold_locked(kvt_peer *peer, kvt_op *op) {
    for (uint32_t k = 0; k < op->local_count; k++) op->locals[k]->busy++;
    op->peer = peer;
    peer->busy++;
    op->conn = peer->conn;
    op->conn->refs++;
}

void kvt_op_unhold_locked(kvt_agent *agent, kvt_op *op) {
    for (uint32_t k = 0; k < op->local_count; k++) op->locals[k]->busy--;
    op->peer->busy--;
    kvt_conn_unref_locked(agent, op->conn);
    op->peer = NULL;
    op->conn = NULL;
}

kvt_status kvt_op_enlist_locked(kvt_agent *agent, const char *call, kvt_op *op) {
    op->id = agent->next_op_id;
    if (!kvt_map_put(&agent->ops, op->id, op)) return kvt_fail(KVT_ERR_NO_MEMORY, "%s: out of memory", call);
    agent->next_op_id++;
    kvt_counter_add(&agent->counters, KVT_COUNTER_LIVE_OPERATIONS, 1);
    return KVT_OK;
}

void kvt_op_delist_locked(kvt_agent *agent, kvt_op *op) {
    kvt_map_remove(&agent->ops, op->id);
    kvt_counter_add(&agent->counters, KVT_COUNTER_LIVE_OPERATIONS, -1);
}

/* Counts an enlisted op as posted and in flight, however it moves. */
static void count_posted(kvt_agent *agent) {
    kvt_counter_add(&agent->counters, KVT_COUNTER_INFLIGHT_OPERATIONS, 1);
    kvt_counter_add(&agent->counters, KVT_COUNTER_OPERATIONS_POSTED, 1);
}

/* Queues an enlisted op for the progress thread (the agent's lock held or not). */
static void launch(kvt_agent *agent, kvt_op *op) {
    atomic_store_explicit(&agent->poster_cpu, sched_getcpu(), memory_order_relaxed); /* early_wake_due */
    count_posted(agent);
    op->command = (kvt_command){.kind = KVT_CMD_POST, .op = op};
    kvt_command_post(&agent->commands, &op->command);
}

/* A READ this small is copied by the thread that posts it, when the backend can (backend->move_inline): a
 * copy of 256 KiB takes a few microseconds (0.3 ms when its pages are a peer's first touched), less than
 * handing the op to the progress thread and being woken back by it, two wake-ups of another thread (90-370
 * us end to end on a host that halts idle CPUs). Larger reads move faster there, while the caller posts its
 * next ones: batches of 1 MiB, 4 in flight, reached 61 GB/s through the thread against 51 GB/s copied by
 * their posts (best runs of read.4k). The descriptor bound keeps a post of many tiny pieces as short. */
#define INLINE_READ_MAX_BYTES (256u << 10)
#define INLINE_READ_MAX_DESCRIPTORS 1024u

static bool finalize(kvt_agent *agent, kvt_op *op, kvt_status status);

/* Whether `op` may be moved by its poster: a plain small READ, with no fault armed (their points are on the
 * progress thread's path). */
static bool inline_candidate(const kvt_agent *agent, const kvt_op *op) {
    return agent->backend->move_inline && op->direction == KVT_XFER_READ && !op->source && !op->vram &&
           op->notification_length == 0 && op->bytes_total <= INLINE_READ_MAX_BYTES &&
           op->count <= INLINE_READ_MAX_DESCRIPTORS && !atomic_load(&agent->faults.armed) &&
           atomic_load(&agent->faults.delay_ms) == 0 && atomic_load(&agent->faults.issue_limit) >= op->bytes_total;
}

/* Moves a just-posted op here and ends it when it is an inline candidate the backend can move, else queues it. */
static void start(kvt_agent *agent, kvt_op *op) {
    if (!inline_candidate(agent, op) || !agent->backend->move_inline(agent, op)) {
        launch(agent, op);
        return;
    }
    count_posted(agent);
    kvt_counter_add(&agent->counters, KVT_COUNTER_INLINE_OPERATIONS, 1);
    kvt_op_backend_finished(agent, op);
    if (finalize(agent, op, KVT_OK)) kvt_wake_consumer(&agent->delivery);
}

static kvt_status post_fault(kvt_agent *agent, const char *call, kvt_status fault) {
    return kvt_fail(fault, "%s: injected fault (post) on agent '%s'", call, agent->name);
}

kvt_status kvt_op_start_locked(kvt_agent *agent, const char *call, kvt_op *op) {
    kvt_status fault = kvt_fault_take_locked(&agent->faults, KVT_FAULT_POST);
    if (fault != KVT_OK) return post_fault(agent, call, fault);
    kvt_status status = kvt_op_enlist_locked(agent, call, op);
    if (status == KVT_OK) launch(agent, op);
    return status;
}

/* Resolves the peer and the region tables and holds them for the op (agent->lock held), so that the
 * descriptors can be checked and built without the lock: held, the regions stay registered and the
 * connection's metadata stays as loaded. */
static kvt_status hold_locked(kvt_agent *agent, uint32_t peer_id, uint64_t generation, const post_request *req,
                              kvt_op *op, uint32_t *remote_slots) {
    kvt_peer *peer = NULL;
    kvt_status status = kvt_resolve_peer_locked(agent, "kvt_xfer_post", peer_id, generation, &peer);
    if (status == KVT_OK) status = resolve_tables_locked(agent, req, peer->conn, op->locals, remote_slots);
    if (status == KVT_OK)
        status = kvt_vram_classify("kvt_xfer_post", agent, peer->conn, op, req->local_region_count, remote_slots,
                                   req->remote_region_count);
    if (status == KVT_OK && op->vram == KVT_VRAM_PATH_NONE)
        status = kvt_conn_check_requests("kvt_xfer_post", peer->conn, remote_slots, req->remote_region_count);
    if (status == KVT_OK) kvt_op_hold_locked(peer, op);
    return status;
}

kvt_status kvt_xfer_post(uint32_t agent_id, uint32_t direction, uint32_t peer_id, uint64_t peer_generation,
                         uint32_t count, const uint32_t *local_index, const uint64_t *local_offset,
                         const uint32_t *remote_index, const uint64_t *remote_offset, const uint64_t *length,
                         uint32_t local_region_count, const uint32_t *local_regions, uint32_t remote_region_count,
                         const uint32_t *remote_regions, const uint8_t *notification, uint32_t notification_length,
                         uint64_t *out_op) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_xfer_post", &agent);
    if (status != KVT_OK) return status;
    const post_request req = {.direction = direction,
                              .count = count,
                              .local_index = local_index,
                              .remote_index = remote_index,
                              .local_offset = local_offset,
                              .remote_offset = remote_offset,
                              .length = length,
                              .local_region_count = local_region_count,
                              .remote_region_count = remote_region_count,
                              .local_regions = local_regions,
                              .remote_regions = remote_regions,
                              .notification = notification,
                              .notification_length = notification_length};
    status = check_post_shape(&req, out_op);
    if (status != KVT_OK) return kvt_agent_finish(agent, status);
    kvt_status injected = kvt_fault_take(&agent->faults, &agent->lock, KVT_FAULT_ALLOCATION);
    uint32_t *remote_slots = NULL;
    kvt_op *op = injected == KVT_OK ? kvt_op_new(agent, direction, count, local_region_count, remote_region_count,
                                                 notification, notification_length, &remote_slots)
                                    : NULL;
    if (!op)
        return kvt_agent_finish(agent, kvt_fail(injected != KVT_OK ? injected : KVT_ERR_NO_MEMORY,
                                                "kvt_xfer_post: out of memory for an operation of %u descriptors%s",
                                                count, injected != KVT_OK ? ": injected fault (allocation)" : ""));
    /* One lock in the common path: the op is held and enlisted together, its descriptors are built without
     * the lock (O(count): the progress thread and other calls go on meanwhile), and it is queued without it. */
    pthread_mutex_lock(&agent->lock);
    status = hold_locked(agent, peer_id, peer_generation, &req, op, remote_slots);
    bool held = status == KVT_OK;
    if (held) status = kvt_op_enlist_locked(agent, "kvt_xfer_post", op);
    bool enlisted = status == KVT_OK;
    pthread_mutex_unlock(&agent->lock);
    if (enlisted) status = build_descriptors(&req, op->conn, op->locals, remote_slots, op);
    kvt_status fault = status == KVT_OK ? kvt_fault_take(&agent->faults, &agent->lock, KVT_FAULT_POST) : KVT_OK;
    if (fault != KVT_OK) status = post_fault(agent, "kvt_xfer_post", fault);
    if (status == KVT_OK) {
        *out_op = op->id;
        start(agent, op);
        return kvt_agent_finish(agent, KVT_OK);
    }
    if (held) {
        pthread_mutex_lock(&agent->lock);
        if (enlisted) kvt_op_delist_locked(agent, op);
        kvt_op_unhold_locked(agent, op);
        pthread_mutex_unlock(&agent->lock);
    }
    kvt_op_free(agent, op);
    return kvt_agent_finish(agent, status);
}

/* ---- the state machine (progress thread) ---------------------------------------------------------- */

/* Ends `op` and queues its completion; true when the consumer is to be woken (kvt_wake_consumer), which
 * the caller does once it released its locks. */
static bool finalize(kvt_agent *agent, kvt_op *op, kvt_status status) {
    pthread_mutex_lock(&agent->lock);
    kvt_status fault = kvt_fault_take_locked(&agent->faults, KVT_FAULT_COMPLETION);
    if (fault != KVT_OK) status = fault;
    op->status = status;
    op->phase = KVT_PHASE_TERMINAL;
    kvt_op_unhold_locked(agent, op);
    kvt_counter_add(&agent->counters, KVT_COUNTER_INFLIGHT_OPERATIONS, -1);
    kvt_counter_add(&agent->counters, KVT_COUNTER_BYTES_MOVED,
                    (int64_t)atomic_load_explicit(&op->bytes_done, memory_order_relaxed));
    kvt_count_result(&agent->counters, status);
    kvt_completion_push_locked(&agent->delivery, &op->completion, op->id, op->status,
                               atomic_load_explicit(&op->bytes_done, memory_order_relaxed));
    bool wake = kvt_signal_pending_locked(&agent->delivery);
    pthread_mutex_unlock(&agent->lock);
    return wake;
}

void kvt_op_backend_finished(kvt_agent *agent, kvt_op *op) {
    (void)agent;
    op->backend_status = op->error;
    op->backend_done_ns = kvt_now_ns();
    op->phase = KVT_PHASE_HELD;
}

void kvt_op_notified(kvt_agent *agent, kvt_op *op, kvt_status status) {
    if (status == KVT_OK)
        kvt_counter_add(&agent->counters, KVT_COUNTER_NOTIFICATIONS_SENT, 1);
    else if (op->error == KVT_OK)
        op->error = status;
    kvt_op_backend_finished(agent, op);
}

static void step(kvt_agent *agent, kvt_op *op) {
    if (op->phase == KVT_PHASE_MOVING) {
        if (op->vram)
            kvt_vram_advance(agent, op);
        else
            agent->backend->advance(agent, op);
    }
    if (op->phase != KVT_PHASE_MOVED || op->confirm_peer) return; /* confirm_peer: kvt_ops_run confirms it first */
    if (op->error == KVT_OK && atomic_load(&op->cancel_requested)) op->error = KVT_ERR_CANCELED;
    if (op->error != KVT_OK || op->notification_length == 0) {
        kvt_op_backend_finished(agent, op);
        return;
    }
    op->phase = KVT_PHASE_NOTIFYING;
    kvt_status status = agent->backend->notify(agent, op->conn, op, op->notification, op->notification_length);
    if (status != KVT_IN_PROGRESS) kvt_op_notified(agent, op, status);
}

/* Whether a held operation may end now. */
static bool release_due(const kvt_op *op, uint32_t delay_ms, uint64_t now) {
    if (atomic_load(&op->cancel_requested) || delay_ms == 0) return true;
    if (delay_ms == KVT_DELAY_FOREVER) return false;
    return now >= op->backend_done_ns + (uint64_t)delay_ms * 1000000u;
}

/* Ends an operation whose bytes moved and whose completion delay (kvt_fault_delay_completions) is over;
 * true when the consumer is to be woken. */
static bool end_held(kvt_agent *agent, kvt_op *op) {
    kvt_status status = op->backend_status;
    if (status == KVT_OK && atomic_load(&op->cancel_requested)) status = KVT_ERR_CANCELED;
    return finalize(agent, op, status); /* `op` may be released and freed from here on */
}

/* Ends every held operation whose completion delay is over; true when the consumer is to be woken. */
static bool release_held(kvt_agent *agent) {
    bool wake = false;
    if (!agent->held) return false;
    uint32_t delay_ms = atomic_load(&agent->faults.delay_ms);
    uint64_t now = kvt_now_ns();
    for (kvt_op **link = &agent->held; *link;) {
        kvt_op *op = *link;
        if (!release_due(op, delay_ms, now)) {
            link = &op->next_active;
            continue;
        }
        *link = op->next_active;
        wake |= end_held(agent, op);
    }
    return wake;
}

/* Moves the operations before *link behind the others: the next round starts with the first one this
 * round did not reach. */
static void rotate_active(kvt_agent *agent, kvt_op **link) {
    if (link == &agent->active || !*link) return;
    kvt_op *first = agent->active;
    agent->active = *link;
    *agent->active_tail = first;
    *link = NULL;
    agent->active_tail = link;
}

/* At most the bytes `op`'s next step moves. */
static uint64_t bytes_ahead(const kvt_op *op) {
    uint64_t done = atomic_load_explicit(&op->bytes_done, memory_order_relaxed);
    return op->bytes_total > done ? op->bytes_total - done : 0;
}

/* Steps `op`; true when it moved: bytes issued or done, or its phase changed. */
static bool stepped(kvt_agent *agent, kvt_op *op) {
    enum kvt_op_phase phase = op->phase;
    uint64_t issued = op->bytes_issued, done = atomic_load_explicit(&op->bytes_done, memory_order_relaxed);
    step(agent, op);
    return op->phase != phase || op->bytes_issued != issued ||
           atomic_load_explicit(&op->bytes_done, memory_order_relaxed) != done;
}

/* What a round of kvt_ops_run owes the consumer: ops whose bytes moved and whose peer is still to be
 * confirmed (backend->confirm_peer), and whether an op ended that the consumer was not woken for. Both are
 * settled together (settle): before a slice that would take them more than KVT_WAKE_DEFER_BYTES of copying
 * past the first of them, else at the round's end — so one liveness check serves every op of the round. */
typedef struct {
    kvt_op *confirming, **confirming_tail;
    bool wake;
    uint64_t deferred; /* at most the bytes moved since the first of them */
} round_debts;

#define CONFIRMED_PEERS 8u /* connections whose answer one settle remembers */

typedef struct {
    kvt_conn *conns[CONFIRMED_PEERS];
    bool present[CONFIRMED_PEERS];
    unsigned count;
} confirmed_peers;

/* Whether `conn`'s peer is still there, asking the backend once per settle (all of the settle's ops moved
 * their bytes before it asks). */
static bool peer_confirmed(kvt_agent *agent, confirmed_peers *known, kvt_conn *conn) {
    for (unsigned i = 0; i < known->count; i++)
        if (known->conns[i] == conn) return known->present[i];
    bool present = agent->backend->confirm_peer(agent, conn);
    if (known->count < CONFIRMED_PEERS) {
        known->conns[known->count] = conn;
        known->present[known->count++] = present;
    }
    return present;
}

/* Appends `op` to the active operations (it goes on notifying). */
static void append_active(kvt_agent *agent, kvt_op *op) {
    op->next_active = NULL;
    if (!agent->active) agent->active_tail = &agent->active;
    *agent->active_tail = op;
    agent->active_tail = &op->next_active;
}

/* A HELD op taken off the active list: ends now when its completion delay allows, else waits in `held`. */
static void end_or_hold(kvt_agent *agent, kvt_op *op, round_debts *debts) {
    if (release_due(op, atomic_load(&agent->faults.delay_ms), kvt_now_ns())) {
        if (end_held(agent, op) && !debts->wake) {
            debts->wake = true;
            if (!debts->confirming) debts->deferred = 0;
        }
    } else {
        op->next_active = agent->held;
        agent->held = op;
    }
}

/* Confirms the peers of the ops waiting for it and moves them on (ending those done), then wakes the consumer
 * if an op ended. */
static void settle(kvt_agent *agent, round_debts *debts) {
    confirmed_peers known = {.count = 0};
    kvt_op *op = debts->confirming;
    debts->confirming = NULL;
    debts->confirming_tail = &debts->confirming;
    while (op) {
        kvt_op *next = op->next_active;
        op->confirm_peer = false;
        if (!peer_confirmed(agent, &known, op->conn) && op->error == KVT_OK) op->error = KVT_ERR_REMOTE_DISCONNECT;
        step(agent, op);
        if (op->phase == KVT_PHASE_HELD)
            end_or_hold(agent, op, debts);
        else
            append_active(agent, op);
        op = next;
    }
    if (debts->wake) kvt_wake_consumer(&agent->delivery);
    debts->wake = false;
    debts->deferred = 0;
}

/* Takes `op` (at *link) off the active list when it waits for its peer's confirmation or its end. */
static bool take_finished(kvt_agent *agent, kvt_op **link, kvt_op *op, round_debts *debts) {
    bool confirming = op->phase == KVT_PHASE_MOVED && op->confirm_peer;
    if (!confirming && op->phase != KVT_PHASE_HELD) return false;
    *link = op->next_active;
    if (!op->next_active) agent->active_tail = link;
    if (confirming) {
        if (!debts->confirming && !debts->wake) debts->deferred = 0;
        op->next_active = NULL;
        *debts->confirming_tail = op;
        debts->confirming_tail = &op->next_active;
    } else {
        end_or_hold(agent, op, debts);
    }
    return true;
}

/* At most the bytes the active operations move in this round. */
static uint64_t bytes_ahead_all(const kvt_agent *agent) {
    uint64_t total = 0;
    for (const kvt_op *op = agent->active; op; op = op->next_active) total += bytes_ahead(op);
    return total;
}

/* Whether this round wakes the consumer before its last operations move, not only at its end: when the
 * consumer's thread has a core of its own, it then posts the next operations while these move; sharing this
 * thread's core, it would only preempt it once more per round. */
static bool early_wake_due(kvt_agent *agent) {
    int poster = atomic_load_explicit(&agent->poster_cpu, memory_order_relaxed);
    return poster >= 0 && poster != sched_getcpu();
}

bool kvt_ops_run(kvt_agent *agent, kvt_command *command) {
    if (command) {
        /* Appended: operations are served in the order they were posted, so of two equal ones the first
         * posted ends first. */
        command->op->phase = KVT_PHASE_MOVING;
        append_active(agent, command->op);
        return true;
    }
    bool moved = false;
    round_debts debts = {.confirming = NULL, .confirming_tail = &debts.confirming};
    uint64_t left = early_wake_due(agent) ? bytes_ahead_all(agent) : 0;
    for (kvt_op **link = &agent->active; *link;) {
        kvt_op *op = *link;
        uint64_t ahead = bytes_ahead(op);
        if (debts.confirming || debts.wake) {
            /* Settled now, not after the other operations' slices of this round, when this slice may take
             * long: their copies take up to a millisecond each, in which the consumer can already post what
             * comes next. */
            debts.deferred += ahead;
            if (debts.deferred > KVT_WAKE_DEFER_BYTES) settle(agent, &debts);
        }
        moved |= stepped(agent, op);
        kvt_stretch_check();
        if (!take_finished(agent, link, op, &debts)) link = &op->next_active;
        bool was_left = left > 0;
        left = left > ahead ? left - ahead : 0;
        if (was_left && *link && (debts.confirming || debts.wake) && left <= KVT_WAKE_AHEAD_BYTES) {
            settle(agent, &debts); /* the consumer posts the next ones while the last of this round move */
            left = 0;
        }
        /* Each operation's slice takes up to a few milliseconds (ISSUE_BUDGET_BYTES of copies): a caller
         * waiting on a command waits for one slice, not for a slice of every operation in flight. */
        if (*link && atomic_load_explicit(&agent->commands.caller_waiting, memory_order_relaxed)) {
            rotate_active(agent, link);
            break;
        }
    }
    if (release_held(agent)) debts.wake = moved = true;
    settle(agent, &debts);
    return moved;
}

int kvt_ops_next_timeout_ms(kvt_agent *agent) {
    if (!agent->held) return -1;
    uint32_t delay_ms = atomic_load(&agent->faults.delay_ms);
    if (delay_ms == KVT_DELAY_FOREVER) return -1;
    uint64_t now = kvt_now_ns(), soonest = UINT64_MAX;
    for (const kvt_op *op = agent->held; op; op = op->next_active) {
        uint64_t due = op->backend_done_ns + (uint64_t)delay_ms * 1000000u;
        if (due < soonest) soonest = due;
    }
    if (soonest <= now) return 0;
    return (int)((soonest - now + 999999u) / 1000000u);
}

/* ---- status, cancel, release ----------------------------------------------------------------------- */

static kvt_status find_op_locked(kvt_agent *agent, const char *call, uint64_t op_id, kvt_op **out) {
    *out = kvt_map_get(&agent->ops, op_id);
    if (*out) return KVT_OK;
    return kvt_fail(KVT_ERR_NOT_FOUND, "%s: agent '%s' has no operation %llu", call, agent->name,
                    (unsigned long long)op_id);
}

kvt_status kvt_xfer_status(uint32_t agent_id, uint64_t op_id, int32_t *out_status, uint64_t *out_bytes_done,
                           uint64_t *out_bytes_total) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_xfer_status", &agent);
    if (status != KVT_OK) return status;
    pthread_mutex_lock(&agent->lock);
    kvt_op *op = NULL;
    status = find_op_locked(agent, "kvt_xfer_status", op_id, &op);
    if (status == KVT_OK) {
        if (out_status) *out_status = op->status;
        if (out_bytes_done) *out_bytes_done = atomic_load_explicit(&op->bytes_done, memory_order_relaxed);
        if (out_bytes_total) *out_bytes_total = op->bytes_total;
    }
    pthread_mutex_unlock(&agent->lock);
    return kvt_agent_finish(agent, status);
}

kvt_status kvt_xfer_cancel(uint32_t agent_id, uint64_t op_id) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_xfer_cancel", &agent);
    if (status != KVT_OK) return status;
    pthread_mutex_lock(&agent->lock);
    kvt_op *op = NULL;
    status = find_op_locked(agent, "kvt_xfer_cancel", op_id, &op);
    if (status == KVT_OK && op->status == KVT_IN_PROGRESS) {
        atomic_store(&op->cancel_requested, true);
        kvt_command_kick(&agent->commands);
        status = KVT_IN_PROGRESS;
    }
    pthread_mutex_unlock(&agent->lock);
    return kvt_agent_finish(agent, status);
}

kvt_status kvt_xfer_release(uint32_t agent_id, uint64_t op_id) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_xfer_release", &agent);
    if (status != KVT_OK) return status;
    pthread_mutex_lock(&agent->lock);
    kvt_op *op = NULL;
    status = find_op_locked(agent, "kvt_xfer_release", op_id, &op);
    if (status == KVT_OK && op->status == KVT_IN_PROGRESS) {
        status = kvt_fail(KVT_ERR_BUSY, "kvt_xfer_release: operation %llu is still in progress (%llu of %llu bytes)",
                          (unsigned long long)op_id,
                          (unsigned long long)atomic_load_explicit(&op->bytes_done, memory_order_relaxed),
                          (unsigned long long)op->bytes_total);
    } else if (status == KVT_OK) {
        kvt_completion_remove_locked(&agent->delivery,
                                     &op->completion); /* released before it was polled: not reported */
        kvt_map_remove(&agent->ops, op_id);
        kvt_counter_add(&agent->counters, KVT_COUNTER_LIVE_OPERATIONS, -1);
    }
    pthread_mutex_unlock(&agent->lock);
    if (status == KVT_OK) kvt_op_free(agent, op);
    return kvt_agent_finish(agent, status);
}

/* ---- standalone notifications ------------------------------------------------------------------- */

/* Drops a reference to `conn` taken for a send (the agent's lock not held). */
static void unref_conn(kvt_agent *agent, kvt_conn *conn) {
    pthread_mutex_lock(&agent->lock);
    kvt_conn_unref_locked(agent, conn);
    pthread_mutex_unlock(&agent->lock);
}

/* A standalone notification queued for the progress thread, which sends it and drops the connection's
 * reference taken for it. */
typedef struct {
    kvt_conn *conn;
    uint32_t length;
    uint8_t data[];
} queued_notification;

static kvt_status send_queued(kvt_agent *agent, void *arg, char *detail, size_t detail_size) {
    (void)detail;
    (void)detail_size;
    queued_notification *queued = arg;
    kvt_status status = agent->backend->notify(agent, queued->conn, NULL, queued->data, queued->length);
    if (status != KVT_OK && status != KVT_IN_PROGRESS)
        kvt_count_result(&agent->counters, status); /* as a send that fails after UCX accepted it */
    unref_conn(agent, queued->conn);
    return status;
}

/* Queues a notification to `conn` (a reference held for it, which the send drops); NO_MEMORY or
 * REMOTE_DISCONNECT (a connection already failed) when it cannot, the reference still the caller's. */
static kvt_status queue_notification(kvt_agent *agent, kvt_conn *conn, const uint8_t *data, uint32_t length) {
    if (atomic_load(&conn->failed))
        return kvt_fail(KVT_ERR_REMOTE_DISCONNECT, "kvt_notify_send: the connection to peer '%s' failed",
                        conn->meta.name);
    kvt_command *command = kvt_command_new_async(send_queued, sizeof(queued_notification) + length);
    if (!command) return kvt_fail(KVT_ERR_NO_MEMORY, "kvt_notify_send: out of memory");
    queued_notification *queued = command->arg;
    queued->conn = conn;
    queued->length = length;
    memcpy(queued->data, data, length);
    kvt_command_post(&agent->commands, command);
    return KVT_OK;
}

kvt_status kvt_notify_peer(kvt_agent *agent, uint32_t peer_id, uint64_t peer_generation, const uint8_t *data,
                           uint32_t length) {
    pthread_mutex_lock(&agent->lock);
    kvt_peer *peer = NULL;
    kvt_status status = kvt_resolve_peer_locked(agent, "kvt_notify_send", peer_id, peer_generation, &peer);
    kvt_conn *conn = status == KVT_OK ? peer->conn : NULL;
    if (conn) conn->refs++;
    pthread_mutex_unlock(&agent->lock);
    if (!conn) return status;
    if (agent->backend->notify_on_any_thread) {
        status = agent->backend->notify(agent, conn, NULL, data, length);
        if (status != KVT_OK) kvt_fail(status, "kvt_notify_send: sending to peer '%s' failed", conn->meta.name);
    } else {
        status = queue_notification(agent, conn, data, length);
        if (status == KVT_OK) return KVT_OK; /* the reference is the queued send's */
    }
    unref_conn(agent, conn);
    return status;
}
