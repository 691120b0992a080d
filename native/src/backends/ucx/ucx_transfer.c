/* The UCX backend's requests: gets and puts (or direct copies through shared mappings), notifications and
 * heartbeat messages, their completions, and how a stopped operation's outstanding ones are ended. Progress
 * thread only. */
#include "backends/ucx/ucx_state.h"

#include "file_regions.h"
#include "services/copy.h"
#include "services/notify_header.h"
#include "services/status.h"

#include <stdlib.h>
#include <string.h>

kvt_status ucx_map_status(ucs_status_t status, kvt_conn *conn) {
    /* Requests of a dead peer's force-closed endpoint end CANCELED: report why. */
    if (status != UCS_OK && conn && atomic_load(&conn->failed)) return KVT_ERR_REMOTE_DISCONNECT;
    switch (status) {
    case UCS_OK:
        return KVT_OK;
    case UCS_ERR_CANCELED:
        return KVT_ERR_CANCELED;
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED:
        if (conn) atomic_store(&conn->failed, true);
        return KVT_ERR_REMOTE_DISCONNECT;
    default:
        return KVT_ERR_BACKEND;
    }
}

/* ---- transfers -------------------------------------------------------------------------------- */

void ucx_on_request_done(void *request, ucs_status_t status, void *user_data) {
    (void)user_data;
    ucx_request *r = request;
    kvt_op *op = r->op;
    kvt_status mapped = ucx_map_status(status, r->conn);
    if (r->kind == UCX_REQ_RMA) {
        if (r->prev)
            r->prev->next = r->next;
        else
            op->requests = r->next;
        if (r->next) r->next->prev = r->prev;
        kvt_counter_add(&r->agent->counters, KVT_COUNTER_INFLIGHT_REQUESTS, -1);
        op->outstanding--;
        op->outstanding_bytes -= r->length;
        if (mapped == KVT_OK)
            kvt_op_add_bytes_done(op, r->length);
        else if (op->error == KVT_OK)
            op->error = mapped;
    } else if (r->kind == UCX_REQ_HEARTBEAT) {
        free(r->buffer); /* a probe or answer that failed is a missed answer, nothing more */
    } else {
        free(r->buffer);
        if (op)
            kvt_op_notified(r->agent, op, mapped);
        else
            kvt_count_result(&r->agent->counters, mapped); /* a standalone send failed after it was accepted */
    }
    ucp_request_free(request);
}

ucp_request_param_t ucx_request_param(void) {
    return (ucp_request_param_t){.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK, .cb = {.send = ucx_on_request_done}};
}

/* Handles what a non-blocking call returned: done now, failed, or a request to track (an operation's
 * get, put or flush joins its outstanding requests). */
kvt_status ucx_track(void *returned, ucx_request setup) {
    if (returned == NULL) return KVT_OK;
    if (UCS_PTR_IS_ERR(returned)) return ucx_map_status(UCS_PTR_STATUS(returned), setup.conn);
    ucx_request *r = returned;
    *r = setup;
    if (setup.kind == UCX_REQ_RMA) {
        kvt_op *op = setup.op;
        r->next = op->requests;
        if (r->next) r->next->prev = r;
        op->requests = r;
        op->outstanding++;
        op->outstanding_bytes += setup.length;
        kvt_counter_add(&setup.agent->counters, KVT_COUNTER_INFLIGHT_REQUESTS, 1);
    }
    return KVT_IN_PROGRESS;
}

/* Where this process copies a peer region's bytes itself: its shared mapping (kvt_mem_alloc banks), or for
 * READs the mapping of its file (file-backed caller memory: a WRITE there could land in memory the owner
 * already reused, which no check after the copy can undo, so WRITEs go through UCX); NULL: through UCX. */
static uint8_t *direct_view(const kvt_op *op, const kvt_remote_region *remote) {
    if (remote->mapped) return remote->mapped;
    return op->direction == KVT_XFER_READ ? remote->file_view : NULL;
}

/* Where a descriptor's bytes come from and go to through the region's view (READ: from the peer's region
 * into ours; WRITE: the other way). */
static void direct_ends(const kvt_op *op, const kvt_desc *d, uint8_t *view, const kvt_remote_region *remote,
                        uint8_t **destination, const uint8_t **source) {
    uint8_t *far = view + (d->remote_address - remote->address);
    uint8_t *near = (uint8_t *)(uintptr_t)d->local_address;
    *destination = op->direction == KVT_XFER_READ ? near : far;
    *source = op->direction == KVT_XFER_READ ? far : near;
}

/* Copies (part of) the next descriptor through the region's view (by the time the copier is flushed);
 * returns the bytes. */
static uint64_t copy_direct(kvt_op *op, kvt_copier *copier, uint8_t *view, const kvt_remote_region *remote,
                            uint64_t budget) {
    const kvt_desc *d = &op->descs[op->next];
    uint64_t n = d->length - op->next_offset;
    if (n > budget) n = budget;
    uint8_t *destination;
    const uint8_t *source;
    direct_ends(op, d, view, remote, &destination, &source);
    kvt_copier_add(copier, destination + op->next_offset, source + op->next_offset, n);
    op->next_offset += n;
    if (op->next_offset == d->length) {
        op->next++;
        op->next_offset = 0;
    }
    return n;
}

/* Issues the next piece (at most KVT_MAX_REQUEST_BYTES) of the next descriptor through UCX and returns
 * its bytes; 0 when it failed (op->error says why). */
static uint64_t issue_request(kvt_agent *agent, kvt_op *op, uint64_t *completed_now) {
    kvt_conn *conn = op->conn;
    const kvt_desc *d = &op->descs[op->next];
    uint64_t length = d->length - op->next_offset;
    if (length > KVT_MAX_REQUEST_BYTES) length = KVT_MAX_REQUEST_BYTES;
    ucp_request_param_t param = ucx_request_param();
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
    param.memh = op->locals[d->local_slot]->backend;
    ucp_rkey_h rkey = conn->meta.regions[d->remote_slot].backend;
    void *local = (void *)(uintptr_t)(d->local_address + op->next_offset);
    uint64_t remote = d->remote_address + op->next_offset;
    void *returned = op->direction == KVT_XFER_READ ? ucp_get_nbx(ep_of(conn), local, length, remote, rkey, &param)
                                                    : ucp_put_nbx(ep_of(conn), local, length, remote, rkey, &param);
    kvt_counter_add(&agent->counters, KVT_COUNTER_REQUESTS_ISSUED, 1);
    kvt_status status = ucx_track(
        returned, (ucx_request){.kind = UCX_REQ_RMA, .agent = agent, .op = op, .conn = conn, .length = length});
    if (status == KVT_OK) *completed_now += length;
    if (status != KVT_OK && status != KVT_IN_PROGRESS) {
        op->error = status;
        return 0;
    }
    op->next_offset += length;
    if (op->next_offset == d->length) {
        op->next++;
        op->next_offset = 0;
    }
    return length;
}

void ucx_stop_outstanding(ucx_state *state, kvt_op *op, ucx_cancel_fn *cancel, void *outstanding) {
    uint64_t now = kvt_now_ns();
    if (op->stop_deadline_ns == 0) {
        op->stop_deadline_ns = now + STOP_GRACE_NS;
        cancel(state->worker, outstanding);
    } else if (now >= op->stop_deadline_ns) {
        ucx_force_close(state, op->conn);
    }
}

/* Asks UCX to cancel the gets and puts of the op `outstanding`. */
static void cancel_requests(ucp_worker_h worker, void *outstanding) {
    kvt_op *op = outstanding;
    for (ucx_request *r = op->requests, *next; r; r = next) {
        next = r->next;
        ucp_request_cancel(worker, r);
    }
}

#define FILE_READS_PER_CHECK 8u

/* The file-backed regions copied from since their slots were last checked. */
typedef struct {
    const kvt_remote_region *regions[FILE_READS_PER_CHECK];
    unsigned count;
} file_reads;

/* Finishes the copies, then whether the owner withdrew none of the regions read since the last check. */
static bool file_reads_check(kvt_agent *agent, const kvt_op *op, kvt_copier *copier, file_reads *reads) {
    kvt_copier_flush(copier);
    bool live = reads->count == 0 || kvt_file_reads_live(agent, op->conn, reads->regions, reads->count);
    reads->count = 0;
    return live;
}

/* Notes that `remote` is about to be copied from (checking the ones before when the list is full); false
 * when that check failed. */
static bool file_reads_note(kvt_agent *agent, const kvt_op *op, kvt_copier *copier, file_reads *reads,
                            const kvt_remote_region *remote) {
    for (unsigned i = 0; i < reads->count; i++)
        if (reads->regions[i] == remote) return true;
    if (reads->count == FILE_READS_PER_CHECK && !file_reads_check(agent, op, copier, reads)) return false;
    reads->regions[reads->count++] = remote;
    return true;
}

void ucx_advance(kvt_agent *agent, kvt_op *op) {
    kvt_conn *conn = op->conn;
    if (op->error == KVT_OK && atomic_load(&op->cancel_requested)) op->error = KVT_ERR_CANCELED;
    if (op->error == KVT_OK && atomic_load(&conn->failed)) op->error = KVT_ERR_REMOTE_DISCONNECT;
    if (op->error != KVT_OK && op->outstanding > 0) {
        ucx_stop_outstanding(state_of(agent), op, cancel_requests, op);
        return;
    }
    uint64_t issued = 0, completed_now = 0;
    kvt_copier copier = {.streaming = op->streaming};
    bool copied = false, live = true;
    file_reads reads = {.count = 0};
    uint64_t file_bytes = 0;
    uint64_t issue_limit = atomic_load_explicit(&agent->faults.issue_limit, memory_order_relaxed);
    /* The region of the descriptor before and its view: a batch's descriptors mostly share one. */
    uint32_t slot = UINT32_MAX;
    const kvt_remote_region *remote = NULL;
    uint8_t *view = NULL;
    while (op->error == KVT_OK && kvt_op_more(op) && issued < ISSUE_BUDGET_BYTES && op->bytes_issued < issue_limit &&
           !atomic_load_explicit(&op->cancel_requested, memory_order_relaxed)) {
        if (op->descs[op->next].remote_slot != slot) {
            slot = op->descs[op->next].remote_slot;
            remote = &conn->meta.regions[slot];
            view = direct_view(op, remote);
        }
        if (view) {
            bool file = view == remote->file_view;
            if (file && !file_reads_note(agent, op, &copier, &reads, remote)) {
                live = false;
                break;
            }
            uint64_t n = copy_direct(op, &copier, view, remote, ISSUE_BUDGET_BYTES - issued);
            if (file) file_bytes += n;
            completed_now += n;
            issued += n;
            op->bytes_issued += n;
            copied = true;
            continue;
        }
        if (op->outstanding >= OP_WINDOW || (op->outstanding > 0 && op->outstanding_bytes >= OP_WINDOW_BYTES)) break;
        uint64_t length = issue_request(agent, op, &completed_now);
        if (length == 0) break;
        issued += length;
        op->bytes_issued += length;
    }
    /* Bytes read out of a region its owner withdrew meanwhile may be ones it rewrote: none counts as read. */
    if (!file_reads_check(agent, op, &copier, &reads)) live = false;
    if (copied) kvt_copy_fence();
    if (live) {
        kvt_op_add_bytes_done(op, completed_now);
        if (file_bytes) kvt_counter_add(&agent->counters, KVT_COUNTER_FILE_READ_BYTES, (int64_t)file_bytes);
    } else if (op->error == KVT_OK) {
        op->error = KVT_ERR_NOT_FOUND; /* the peer withdrew a region read: reload it */
    }
    if (op->error == KVT_OK && atomic_load(&op->cancel_requested)) op->error = KVT_ERR_CANCELED;
    if (op->error != KVT_OK && op->outstanding > 0) ucx_stop_outstanding(state_of(agent), op, cancel_requests, op);
    if (op->outstanding > 0 || (op->error == KVT_OK && kvt_op_more(op))) return;
    if (op->error == KVT_OK && op->direction == KVT_XFER_WRITE && !op->flushed) {
        /* A put completes locally before it lands; the flush confirms remote completion. */
        op->flushed = true;
        ucp_request_param_t param = ucx_request_param();
        kvt_status status = ucx_track(ucp_ep_flush_nbx(ep_of(conn), &param),
                                      (ucx_request){.kind = UCX_REQ_RMA, .agent = agent, .op = op, .conn = conn});
        if (status == KVT_IN_PROGRESS) return;
        if (status != KVT_OK) op->error = status;
    }
    /* Fail closed: bytes read from a peer that died meanwhile are not trusted. Its liveness is asked once
     * for every op of the round that moved its bytes (ucx_confirm_peer, from kvt_ops_run). */
    if (op->error == KVT_OK) op->confirm_peer = true;
    op->phase = KVT_PHASE_MOVED;
}

/* Only through the mappings UCX gave of banks on this host (shared_mapping): a file-backed region is read
 * against its owner's liveness table, and a copy that needs the peer's help is a request to wait for. The
 * peer's process is checked after the copy, as the progress thread does (its first check, at connect, left
 * the check read-only, so any thread may make it); a peer found gone leaves the op to the progress thread,
 * which fails it closed and force-closes the endpoint. */
bool ucx_move_inline(kvt_agent *agent, kvt_op *op) {
    (void)agent;
    const kvt_conn *conn = op->conn;
    for (uint32_t i = 0; i < op->count; i++)
        if (!conn->meta.regions[op->descs[i].remote_slot].mapped) return false;
    if (atomic_load(&conn->failed)) return false;
    kvt_copier copier = {.streaming = false};
    while (op->next < op->count) {
        const kvt_remote_region *remote = &conn->meta.regions[op->descs[op->next].remote_slot];
        copy_direct(op, &copier, remote->mapped, remote, UINT64_MAX);
    }
    kvt_copier_flush(&copier);
    if (atomic_load(&conn->failed) || kvt_conn_process_gone(op->conn)) {
        op->next = 0;
        return false;
    }
    op->bytes_issued = op->bytes_total;
    kvt_op_add_bytes_done(op, op->bytes_total);
    op->phase = KVT_PHASE_MOVED;
    return true;
}

bool ucx_confirm_peer(kvt_agent *agent, kvt_conn *conn) {
    if (!atomic_load(&conn->failed) && kvt_conn_process_gone(conn)) ucx_force_close(state_of(agent), conn);
    return !atomic_load(&conn->failed);
}

kvt_status ucx_notify(kvt_agent *agent, kvt_conn *conn, kvt_op *op, const uint8_t *data, uint32_t length) {
    if (atomic_load(&conn->failed) || !ep_of(conn)) return KVT_ERR_REMOTE_DISCONNECT;
    uint8_t *buffer = malloc(KVT_NOTIFY_HEADER_FIXED + strlen(agent->name) + length);
    if (!buffer) return KVT_ERR_NO_MEMORY;
    size_t header_length = kvt_notify_header_write(buffer, agent->name);
    memcpy(buffer + header_length, data, length);
    ucp_request_param_t param = ucx_request_param();
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_AM_SEND_FLAG_EAGER;
    void *returned =
        ucp_am_send_nbx(ep_of(conn), KVT_AM_NOTIFY, buffer, header_length, buffer + header_length, length, &param);
    kvt_status status = ucx_track(
        returned, (ucx_request){.kind = UCX_REQ_NOTIFY, .agent = agent, .op = op, .conn = conn, .buffer = buffer});
    if (status != KVT_IN_PROGRESS) free(buffer);
    if (status == KVT_IN_PROGRESS && !op) return KVT_OK; /* handed to UCX; it frees the buffer when done */
    return status;
}

void ucx_probe(kvt_agent *agent, kvt_conn *conn, uint32_t peer_id) {
    if (atomic_load(&conn->failed) || !ep_of(conn)) return;
    uint8_t message[PROBE_BYTES];
    for (unsigned i = 0; i < 4; i++) message[i] = (uint8_t)(peer_id >> (8 * i));
    for (unsigned i = 0; i < 8; i++) message[4 + i] = (uint8_t)(agent->entry.incarnation >> (8 * i));
    ucx_send_heartbeat(agent, ep_of(conn), KVT_AM_PROBE, message, UCP_AM_SEND_FLAG_REPLY);
}

void ucx_describe(kvt_agent *agent, kvt_conn *conn, FILE *out) {
    (void)agent;
    if (ep_of(conn)) {
        const ucx_endpoint *endpoint = conn->backend;
        ucp_ep_print_info(ep_of(conn), out);
        if (endpoint->through_network)
            fprintf(out,
                    "kvreuse: '%s' is a process of this host in another pid namespace, reached through its network "
                    "address%s\n",
                    conn->meta.name, endpoint->mapping_ep ? "; its banks are mapped through this endpoint:" : "");
        if (endpoint->mapping_ep) ucp_ep_print_info(endpoint->mapping_ep, out);
        if (conn->answers_lost)
            fprintf(out,
                    "kvreuse: '%s' is a process of this host in another pid namespace, reached over shared memory "
                    "alone (one side has no network transport): UCX brings nothing back from it, so posts that would "
                    "wait for its answers are refused\n",
                    conn->meta.name);
        for (uint32_t i = 0; i < conn->meta.region_count; i++) {
            bool touched = !endpoint->warming || i < endpoint->warm_region;
            const kvt_remote_region *region = &conn->meta.regions[i];
            fprintf(out, "kvreuse: region %u of '%s': %s%s\n", region->id, conn->meta.name,
                    region->mapped      ? "mapped through shared memory, copied directly (no UCX request)"
                    : region->file_view ? "its file mapped, READs copied directly and checked against the owner's "
                                          "liveness table; WRITEs through UCX"
                                        : "gets and puts through UCX",
                    !region->mapped && !region->file_view ? ""
                    : touched                             ? "; every page touched once (warm)"
                                                          : "; pages not all touched yet (the idle warm-up continues)");
        }
    } else
        fprintf(out, "ucx: the endpoint to '%s' is closed (the peer disconnected)\n", conn->meta.name);
}

/* ---- heartbeat -------------------------------------------------------------------------------------- */

void ucx_send_heartbeat(kvt_agent *agent, ucp_ep_h ep, unsigned id, const uint8_t *message, uint32_t flags) {
    uint8_t *buffer = malloc(PROBE_BYTES);
    if (!buffer) return;
    memcpy(buffer, message, PROBE_BYTES);
    ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_FLAGS,
                                 .cb = {.send = ucx_on_request_done},
                                 .flags = UCP_AM_SEND_FLAG_EAGER | flags};
    void *returned = ucp_am_send_nbx(ep, id, NULL, 0, buffer, PROBE_BYTES, &param);
    if (ucx_track(returned, (ucx_request){.kind = UCX_REQ_HEARTBEAT, .agent = agent, .buffer = buffer}) !=
        KVT_IN_PROGRESS)
        free(buffer);
}
