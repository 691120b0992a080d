/* Transfer templates: routes of block-indexed 2-D segments registered once against a peer generation,
 * then posts by block lists whose pieces the progress thread expands while it issues them. */
#include "agent.h"

#include "blocks.h"
#include "services/copy.h"
#include "services/status.h"
#include "template.h"
#include "vram_xfer.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Descriptors one refill of a template post's window holds (32 bytes each). */
#define EXPANSION_WINDOW 512u

/* Immutable once registered; shared by the agent's table and every op posted on it. */
typedef struct kvt_template {
    uint32_t id, peer;
    uint64_t generation;
    _Atomic uint32_t refs;
    uint32_t route_count;
    uint32_t local_region_count;
    uint32_t *local_regions; /* region ids, indexed by local_index */
    uint32_t *local_index;   /* per route */
    uint32_t *remote_slot;   /* per route: index into the peer generation's conn->meta.regions */
    uint32_t *rows;
    uint64_t *local_base, *remote_base, *local_block_stride, *remote_block_stride;
    uint64_t *row_bytes, *local_row_stride, *remote_row_stride;
    uint32_t local_block_limit, remote_block_limit;
    uint64_t block_bytes;
    /* Every route on one local and one remote region: blocks outermost, routes inner (as planTransfer orders
     * them, so consecutive blocks of a bank merge); else routes outermost. */
    bool blocks_outermost;
} kvt_template;

/* A post's descriptors, expanded from its template a window at a time. */
typedef struct kvt_expansion {
    kvt_desc_source source; /* first: op->source */
    kvt_template *template;
    uint32_t count;
    uint32_t *local_blocks, *remote_blocks;
    /* The next piece: outer and inner loop positions and the row within the segment. */
    uint32_t outer, inner, row;
} kvt_expansion;

static bool expansion_refill(kvt_op *op);
static void expansion_gather_shape(const kvt_op *op, uint32_t *out_routes, uint32_t *out_blocks);
static kvt_status expansion_gather_tables(kvt_agent *agent, kvt_op *op, kvt_remote_shift shift,
                                          kvt_gather_route *routes, kvt_gather_block_pair *pairs,
                                          uint64_t *out_tiles_per_pair);

static void template_unref(kvt_template *t) {
    if (!t || atomic_fetch_sub(&t->refs, 1) != 1) return;
    free(t->local_regions);
    free(t->local_index);
    free(t->remote_slot);
    free(t->rows);
    free(t->local_base);
    free(t->remote_base);
    free(t->local_block_stride);
    free(t->remote_block_stride);
    free(t->row_bytes);
    free(t->local_row_stride);
    free(t->remote_row_stride);
    free(t);
}

static void expansion_free(kvt_agent *agent, kvt_desc_source *source) {
    kvt_expansion *x = (kvt_expansion *)source;
    template_unref(x->template);
    kvt_block_give(agent, x->local_blocks); /* remote_blocks share its block */
    free(x);
}

void kvt_templates_free_all(kvt_agent *agent) {
    for (size_t i = 0; i < agent->templates.capacity; i++)
        if (agent->templates.keys[i]) template_unref(agent->templates.values[i]);
    kvt_map_free(&agent->templates);
}

/* ---- registration ---------------------------------------------------------------------------------- */

static kvt_status check_template_shape(const kvt_template_routes *req, const uint32_t *out_template) {
    if (!out_template) return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_template_register: out_template is NULL");
    if (!req) return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_template_register: routes is NULL");
    if (req->route_count == 0 || req->route_count > KVT_MAX_DESCRIPTORS)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_template_register: route count %u is outside 1..%u",
                        req->route_count, KVT_MAX_DESCRIPTORS);
    if (!req->local_index || !req->remote_index || !req->rows || !req->local_base || !req->remote_base ||
        !req->local_block_stride || !req->remote_block_stride || !req->row_bytes || !req->local_row_stride ||
        !req->remote_row_stride)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_template_register: a route array is NULL");
    if (req->local_region_count == 0 || !req->local_regions || req->remote_region_count == 0 || !req->remote_regions)
        return kvt_fail(KVT_ERR_INVALID_PARAM,
                        "kvt_template_register: the local (%u entries) and remote (%u entries) region tables must be "
                        "non-empty",
                        req->local_region_count, req->remote_region_count);
    if (req->local_block_limit == 0 || req->remote_block_limit == 0)
        return kvt_fail(KVT_ERR_INVALID_PARAM,
                        "kvt_template_register: block limits must be at least 1 (local %u, remote %u)",
                        req->local_block_limit, req->remote_block_limit);
    return KVT_OK;
}

static kvt_status check_route_side(uint32_t r, const char *side, uint32_t region_id, uint64_t region_length,
                                   const char *owner, uint64_t base, uint32_t block_limit, uint64_t block_stride,
                                   uint32_t rows, uint64_t row_stride, uint64_t row_bytes) {
    uint64_t end = 0;
    bool fits = kvt_route_segment_end(base, block_limit - 1u, block_stride, rows, row_stride, row_bytes, &end);
    if (!fits || end > region_length)
        return kvt_fail(KVT_ERR_INVALID_PARAM,
                        "kvt_template_register: route %u: %s region %u%s: base %" PRIu64 " + block %u x stride %" PRIu64
                        " + row %u x stride %" PRIu64 " + %" PRIu64 " bytes %s region length %" PRIu64,
                        r, side, region_id, owner, base, block_limit - 1u, block_stride, rows - 1u, row_stride,
                        row_bytes, fits ? "exceeds" : "overflows past", region_length);
    return KVT_OK;
}

/* Checks every route against both regions at the largest blocks and fills the template (agent->lock held). */
static kvt_status build_template_locked(const kvt_agent *agent, const kvt_template_routes *req, const kvt_conn *conn,
                                        kvt_template *t) {
    char owner[KVT_MAX_NAME + 32];
    snprintf(owner, sizeof owner, " of peer '%s'", conn->meta.name);
    const kvt_region **locals = calloc(req->local_region_count, sizeof *locals);
    uint32_t *remote_slots = calloc(req->remote_region_count, sizeof *remote_slots);
    kvt_status status =
        locals && remote_slots ? KVT_OK : kvt_fail(KVT_ERR_NO_MEMORY, "kvt_template_register: out of memory");
    for (uint32_t k = 0; status == KVT_OK && k < req->local_region_count; k++) {
        for (uint32_t i = 0; i < agent->region_count; i++)
            if (agent->regions[i]->id == req->local_regions[k]) locals[k] = agent->regions[i];
        if (!locals[k])
            status = kvt_fail(KVT_ERR_INVALID_PARAM,
                              "kvt_template_register: local_regions[%u] = %u is not a live region of '%s'", k,
                              req->local_regions[k], agent->name);
    }
    for (uint32_t k = 0; status == KVT_OK && k < req->remote_region_count; k++) {
        remote_slots[k] = UINT32_MAX;
        for (uint32_t i = 0; i < conn->meta.region_count; i++)
            if (conn->meta.regions[i].id == req->remote_regions[k]) remote_slots[k] = i;
        if (remote_slots[k] == UINT32_MAX)
            status = kvt_fail(KVT_ERR_INVALID_PARAM,
                              "kvt_template_register: remote_regions[%u] = %u is not a region peer '%s' advertised", k,
                              req->remote_regions[k], conn->meta.name);
    }
    bool one_local = true, one_remote = true;
    for (uint32_t r = 0; status == KVT_OK && r < req->route_count; r++) {
        uint32_t li = req->local_index[r], ri = req->remote_index[r];
        if (li >= req->local_region_count || ri >= req->remote_region_count) {
            status =
                kvt_fail(KVT_ERR_INVALID_PARAM,
                         "kvt_template_register: route %u: local index %u (table %u) or remote index %u (table %u) "
                         "out of range",
                         r, li, req->local_region_count, ri, req->remote_region_count);
            break;
        }
        if (req->rows[r] == 0 || req->row_bytes[r] == 0) {
            status = kvt_fail(KVT_ERR_INVALID_PARAM,
                              "kvt_template_register: route %u: %u rows of %" PRIu64 " bytes (both must be at least 1)",
                              r, req->rows[r], req->row_bytes[r]);
            break;
        }
        const kvt_remote_region *remote = &conn->meta.regions[remote_slots[ri]];
        status = check_route_side(r, "local", locals[li]->id, locals[li]->length, "", req->local_base[r],
                                  req->local_block_limit, req->local_block_stride[r], req->rows[r],
                                  req->local_row_stride[r], req->row_bytes[r]);
        if (status == KVT_OK)
            status = check_route_side(r, "remote", remote->id, remote->length, owner, req->remote_base[r],
                                      req->remote_block_limit, req->remote_block_stride[r], req->rows[r],
                                      req->remote_row_stride[r], req->row_bytes[r]);
        uint64_t piece = (uint64_t)req->rows[r] * req->row_bytes[r]; /* no overflow: the end above did not */
        if (status == KVT_OK && __builtin_add_overflow(t->block_bytes, piece, &t->block_bytes))
            status = kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_template_register: a block's bytes overflow 64 bits");
        if (status != KVT_OK) break;
        t->local_index[r] = li;
        t->remote_slot[r] = remote_slots[ri];
        one_local = one_local && li == req->local_index[0];
        one_remote = one_remote && ri == req->remote_index[0];
    }
    free(locals);
    free(remote_slots);
    t->blocks_outermost = one_local && one_remote;
    return status;
}

static kvt_template *template_new(const kvt_template_routes *req) {
    kvt_template *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    atomic_init(&t->refs, 1);
    size_t n = req->route_count;
    t->route_count = req->route_count;
    t->local_region_count = req->local_region_count;
    t->local_regions = malloc(req->local_region_count * sizeof *t->local_regions);
    t->local_index = malloc(n * sizeof *t->local_index);
    t->remote_slot = malloc(n * sizeof *t->remote_slot);
    t->rows = malloc(n * sizeof *t->rows);
    uint64_t **wide[] = {&t->local_base, &t->remote_base,      &t->local_block_stride, &t->remote_block_stride,
                         &t->row_bytes,  &t->local_row_stride, &t->remote_row_stride};
    const uint64_t *given[] = {req->local_base,          req->remote_base, req->local_block_stride,
                               req->remote_block_stride, req->row_bytes,   req->local_row_stride,
                               req->remote_row_stride};
    bool ok = t->local_regions && t->local_index && t->remote_slot && t->rows;
    for (size_t k = 0; k < sizeof wide / sizeof wide[0]; k++) {
        *wide[k] = malloc(n * sizeof **wide[k]);
        if (*wide[k]) memcpy(*wide[k], given[k], n * sizeof **wide[k]);
        ok = ok && *wide[k];
    }
    if (!ok) {
        template_unref(t);
        return NULL;
    }
    memcpy(t->local_regions, req->local_regions, req->local_region_count * sizeof *t->local_regions);
    memcpy(t->rows, req->rows, n * sizeof *t->rows);
    t->local_block_limit = req->local_block_limit;
    t->remote_block_limit = req->remote_block_limit;
    return t;
}

kvt_status kvt_template_register(uint32_t agent_id, uint32_t peer_id, uint64_t peer_generation,
                                 const kvt_template_routes *routes, uint32_t *out_template) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_template_register", &agent);
    if (status != KVT_OK) return status;
    status = check_template_shape(routes, out_template);
    if (status != KVT_OK) return kvt_agent_finish(agent, status);
    kvt_template *t = template_new(routes);
    if (!t) return kvt_agent_finish(agent, kvt_fail(KVT_ERR_NO_MEMORY, "kvt_template_register: out of memory"));
    pthread_mutex_lock(&agent->lock);
    kvt_peer *peer = NULL;
    status = kvt_resolve_peer_locked(agent, "kvt_template_register", peer_id, peer_generation, &peer);
    if (status == KVT_OK) status = build_template_locked(agent, routes, peer->conn, t);
    if (status == KVT_OK) {
        t->id = agent->next_template_id;
        t->peer = peer_id;
        t->generation = peer_generation;
        if (kvt_map_put(&agent->templates, t->id, t)) {
            agent->next_template_id++;
            *out_template = t->id;
        } else {
            status = kvt_fail(KVT_ERR_NO_MEMORY, "kvt_template_register: out of memory");
        }
    }
    pthread_mutex_unlock(&agent->lock);
    if (status != KVT_OK) template_unref(t);
    return kvt_agent_finish(agent, status);
}

static kvt_status find_template_locked(kvt_agent *agent, const char *call, uint32_t id, kvt_template **out) {
    *out = id ? kvt_map_get(&agent->templates, id) : NULL;
    if (*out) return KVT_OK;
    return kvt_fail(KVT_ERR_NOT_FOUND, "%s: agent '%s' has no template %u", call, agent->name, id);
}

kvt_status kvt_template_release(uint32_t agent_id, uint32_t template_id) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_template_release", &agent);
    if (status != KVT_OK) return status;
    pthread_mutex_lock(&agent->lock);
    kvt_template *t = NULL;
    status = find_template_locked(agent, "kvt_template_release", template_id, &t);
    if (status == KVT_OK) kvt_map_remove(&agent->templates, template_id);
    pthread_mutex_unlock(&agent->lock);
    if (status == KVT_OK) template_unref(t); /* operations posted on it keep their own reference */
    return kvt_agent_finish(agent, status);
}

/* ---- posting by block lists ------------------------------------------------------------------------ */

static kvt_status check_post_blocks_shape(uint32_t direction, uint32_t count, const uint32_t *local_blocks,
                                          const uint32_t *remote_blocks, const uint8_t *notification,
                                          uint32_t notification_length, const uint64_t *out_op) {
    if (!out_op) return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_xfer_post_blocks: out_op is NULL");
    if (direction != KVT_XFER_READ && direction != KVT_XFER_WRITE)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_xfer_post_blocks: direction %u is neither READ (0) nor WRITE (1)",
                        direction);
    if (count == 0 || count > KVT_MAX_DESCRIPTORS)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_xfer_post_blocks: block count %u is outside 1..%u", count,
                        KVT_MAX_DESCRIPTORS);
    if (!local_blocks || !remote_blocks)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_xfer_post_blocks: a block list is NULL");
    if (notification_length > KVT_MAX_NOTIFICATION || (notification_length && !notification))
        return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_xfer_post_blocks: notification of %u bytes (limit %u, data %s)",
                        notification_length, KVT_MAX_NOTIFICATION, notification ? "given" : "NULL");
    return KVT_OK;
}

/* Copies the block lists, checking each index against its side's limit; the destination's lowest and
 * highest blocks are written for the streaming decision. */
static kvt_status copy_blocks(const kvt_template *t, uint32_t direction, uint32_t count, const uint32_t *local_blocks,
                              const uint32_t *remote_blocks, kvt_expansion *x, uint32_t *lowest, uint32_t *highest) {
    const uint32_t *destination = direction == KVT_XFER_READ ? local_blocks : remote_blocks;
    *lowest = UINT32_MAX;
    *highest = 0;
    for (uint32_t i = 0; i < count; i++) {
        if (local_blocks[i] >= t->local_block_limit)
            return kvt_fail(KVT_ERR_INVALID_PARAM,
                            "kvt_xfer_post_blocks: local_blocks[%u] = %u >= limit %u of template %u", i,
                            local_blocks[i], t->local_block_limit, t->id);
        if (remote_blocks[i] >= t->remote_block_limit)
            return kvt_fail(KVT_ERR_INVALID_PARAM,
                            "kvt_xfer_post_blocks: remote_blocks[%u] = %u >= limit %u of template %u", i,
                            remote_blocks[i], t->remote_block_limit, t->id);
        if (destination[i] < *lowest) *lowest = destination[i];
        if (destination[i] > *highest) *highest = destination[i];
    }
    memcpy(x->local_blocks, local_blocks, count * sizeof *local_blocks);
    memcpy(x->remote_blocks, remote_blocks, count * sizeof *remote_blocks);
    return KVT_OK;
}

/* Resolves the template's local regions for the op and decides streaming as build_descriptors does, from the
 * span the destination blocks cover (agent->lock held). */
static kvt_status prepare_op_locked(kvt_agent *agent, const kvt_template *t, const kvt_conn *conn, kvt_op *op,
                                    uint32_t lowest, uint32_t highest) {
    for (uint32_t k = 0; k < t->local_region_count; k++) {
        op->locals[k] = NULL;
        for (uint32_t i = 0; i < agent->region_count; i++)
            if (agent->regions[i]->id == t->local_regions[k]) op->locals[k] = agent->regions[i];
        if (!op->locals[k])
            return kvt_fail(KVT_ERR_NOT_FOUND,
                            "kvt_xfer_post_blocks: local region %u of template %u is no longer registered",
                            t->local_regions[k], t->id);
    }
    bool read = op->direction == KVT_XFER_READ;
    uint64_t span_low = UINT64_MAX, span_high = 0;
    for (uint32_t r = 0; r < t->route_count; r++) {
        uint64_t address =
            read ? op->locals[t->local_index[r]]->address : conn->meta.regions[t->remote_slot[r]].address;
        uint64_t base = address + (read ? t->local_base[r] : t->remote_base[r]);
        uint64_t stride = read ? t->local_block_stride[r] : t->remote_block_stride[r];
        uint64_t row_stride = read ? t->local_row_stride[r] : t->remote_row_stride[r];
        uint64_t low = base + lowest * stride;
        uint64_t high = base + highest * stride + (uint64_t)(t->rows[r] - 1) * row_stride + t->row_bytes[r];
        if (low < span_low) span_low = low;
        if (high > span_high) span_high = high;
    }
    uint64_t threshold = kvt_streaming_threshold();
    op->streaming = op->bytes_total >= threshold && span_high - span_low >= threshold;
    return KVT_OK;
}

kvt_status kvt_xfer_post_blocks(uint32_t agent_id, uint32_t template_id, uint32_t direction, uint32_t count,
                                const uint32_t *local_blocks, const uint32_t *remote_blocks,
                                const uint8_t *notification, uint32_t notification_length, uint64_t *out_op) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_xfer_post_blocks", &agent);
    if (status != KVT_OK) return status;
    status = check_post_blocks_shape(direction, count, local_blocks, remote_blocks, notification, notification_length,
                                     out_op);
    if (status != KVT_OK) return kvt_agent_finish(agent, status);
    pthread_mutex_lock(&agent->lock);
    kvt_template *t = NULL;
    status = find_template_locked(agent, "kvt_xfer_post_blocks", template_id, &t);
    if (status == KVT_OK) atomic_fetch_add(&t->refs, 1);
    kvt_status injected = status == KVT_OK ? kvt_fault_take_locked(&agent->faults, KVT_FAULT_ALLOCATION) : KVT_OK;
    pthread_mutex_unlock(&agent->lock);
    if (status != KVT_OK) return kvt_agent_finish(agent, status);

    kvt_expansion *x = injected == KVT_OK ? calloc(1, sizeof *x) : NULL;
    kvt_op *op = injected == KVT_OK ? kvt_op_new(agent, direction, EXPANSION_WINDOW, t->local_region_count, 0,
                                                 notification, notification_length, NULL)
                                    : NULL;
    if (x) {
        x->source = (kvt_desc_source){.refill = expansion_refill,
                                      .free = expansion_free,
                                      .gather_shape = expansion_gather_shape,
                                      .gather_tables = expansion_gather_tables};
        x->template = t;
        x->count = count;
        x->local_blocks = kvt_block_take(agent, 2 * (size_t)count * sizeof *x->local_blocks);
        if (x->local_blocks) x->remote_blocks = x->local_blocks + count;
    }
    if (!x || !op || !x->local_blocks) {
        if (x)
            expansion_free(agent, &x->source);
        else
            template_unref(t);
        kvt_op_free(agent, op);
        return kvt_agent_finish(agent, kvt_fail(injected != KVT_OK ? injected : KVT_ERR_NO_MEMORY,
                                                "kvt_xfer_post_blocks: out of memory for %u blocks%s", count,
                                                injected != KVT_OK ? ": injected fault (allocation)" : ""));
    }
    op->source = &x->source;
    uint32_t lowest, highest;
    status = copy_blocks(t, direction, count, local_blocks, remote_blocks, x, &lowest, &highest);
    if (status == KVT_OK && __builtin_mul_overflow((uint64_t)count, t->block_bytes, &op->bytes_total))
        status =
            kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_xfer_post_blocks: %u blocks of %" PRIu64 " bytes overflow 64 bits",
                     count, t->block_bytes);
    if (status == KVT_OK) {
        pthread_mutex_lock(&agent->lock);
        kvt_peer *peer = NULL;
        status = kvt_resolve_peer_locked(agent, "kvt_xfer_post_blocks", t->peer, t->generation, &peer);
        if (status == KVT_OK) status = prepare_op_locked(agent, t, peer->conn, op, lowest, highest);
        if (status == KVT_OK)
            status = kvt_vram_classify("kvt_xfer_post_blocks", agent, peer->conn, op, t->local_region_count,
                                       t->remote_slot, t->route_count);
        if (status == KVT_OK && op->vram == KVT_VRAM_PATH_NONE)
            status = kvt_conn_check_requests("kvt_xfer_post_blocks", peer->conn, t->remote_slot, t->route_count);
        if (status == KVT_OK) {
            kvt_op_hold_locked(peer, op);
            status = kvt_op_start_locked(agent, "kvt_xfer_post_blocks", op);
            if (status == KVT_OK)
                *out_op = op->id;
            else
                kvt_op_unhold_locked(agent, op);
        }
        pthread_mutex_unlock(&agent->lock);
    }
    if (status != KVT_OK) kvt_op_free(agent, op);
    return kvt_agent_finish(agent, status);
}

/* ---- expansion (progress thread) ------------------------------------------------------------------- */

static bool expansion_refill(kvt_op *op) {
    kvt_expansion *x = (kvt_expansion *)op->source;
    const kvt_template *t = x->template;
    const kvt_remote_region *remotes = op->conn->meta.regions;
    uint32_t outer_count = t->blocks_outermost ? x->count : t->route_count;
    uint32_t inner_count = t->blocks_outermost ? t->route_count : x->count;
    uint32_t n = 0;
    while (x->outer < outer_count) {
        uint32_t r = t->blocks_outermost ? x->inner : x->outer;
        uint32_t pair = t->blocks_outermost ? x->outer : x->inner;
        uint32_t row = x->row;
        kvt_desc d = {.local_address = op->locals[t->local_index[r]]->address + t->local_base[r] +
                                       x->local_blocks[pair] * t->local_block_stride[r] + row * t->local_row_stride[r],
                      .remote_address = remotes[t->remote_slot[r]].address + t->remote_base[r] +
                                        x->remote_blocks[pair] * t->remote_block_stride[r] +
                                        row * t->remote_row_stride[r],
                      .length = t->row_bytes[r],
                      .local_slot = t->local_index[r],
                      .remote_slot = t->remote_slot[r]};
        kvt_desc *prev = n ? &op->descs[n - 1] : NULL;
        if (prev && prev->local_slot == d.local_slot && prev->remote_slot == d.remote_slot &&
            prev->local_address + prev->length == d.local_address &&
            prev->remote_address + prev->length == d.remote_address)
            prev->length += d.length;
        else if (n == EXPANSION_WINDOW)
            break;
        else
            op->descs[n++] = d;
        if (++x->row < t->rows[r]) continue;
        x->row = 0;
        if (++x->inner < inner_count) continue;
        x->inner = 0;
        x->outer++;
    }
    op->count = n;
    op->next = 0;
    op->next_offset = 0;
    return n > 0;
}

/* ---- expansion on the GPU (progress thread) -------------------------------------------------------- */

static void expansion_gather_shape(const kvt_op *op, uint32_t *out_routes, uint32_t *out_blocks) {
    const kvt_expansion *x = (const kvt_expansion *)op->source;
    *out_routes = x->template->route_count;
    *out_blocks = x->count;
}

static kvt_status expansion_gather_tables(kvt_agent *agent, kvt_op *op, kvt_remote_shift shift,
                                          kvt_gather_route *routes, kvt_gather_block_pair *pairs,
                                          uint64_t *out_tiles_per_pair) {
    const kvt_expansion *x = (const kvt_expansion *)op->source;
    const kvt_template *t = x->template;
    bool read = op->direction == KVT_XFER_READ;
    uint64_t tiles = 0;
    for (uint32_t r = 0; r < t->route_count; r++) {
        int64_t remote_shift = 0;
        kvt_status status = shift(agent, op, t->remote_slot[r], &remote_shift);
        if (status != KVT_OK) return status;
        uint64_t local = op->locals[t->local_index[r]]->address + t->local_base[r];
        uint64_t remote =
            (uint64_t)((int64_t)op->conn->meta.regions[t->remote_slot[r]].address + remote_shift) + t->remote_base[r];
        routes[r] =
            (kvt_gather_route){.source = read ? remote : local,
                               .destination = read ? local : remote,
                               .source_block_stride = read ? t->remote_block_stride[r] : t->local_block_stride[r],
                               .destination_block_stride = read ? t->local_block_stride[r] : t->remote_block_stride[r],
                               .source_row_stride = read ? t->remote_row_stride[r] : t->local_row_stride[r],
                               .destination_row_stride = read ? t->local_row_stride[r] : t->remote_row_stride[r],
                               .row_bytes = t->row_bytes[r],
                               .first_tile = tiles,
                               .rows = t->rows[r]};
        tiles += kvt_gather_route_tile(&routes[r]);
    }
    for (uint32_t i = 0; i < x->count; i++)
        pairs[i] = read ? (kvt_gather_block_pair){x->remote_blocks[i], x->local_blocks[i]}
                        : (kvt_gather_block_pair){x->local_blocks[i], x->remote_blocks[i]};
    *out_tiles_per_pair = tiles;
    return KVT_OK;
}
