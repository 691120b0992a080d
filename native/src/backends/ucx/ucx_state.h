/* The UCX backend's state, shared by its files: ucx.c (start, memory, connections, progress),
 * ucx_transfer.c (requests: gets, puts, notifications and heartbeat messages) and ucx_endpoint.c (how
 * endpoints fail, close and are freed). */
#ifndef KVT_UCX_STATE_H
#define KVT_UCX_STATE_H

#include "agent.h"
#include "backends/ucx/ucx_api.h"
#include "services/mapping.h"

#define KVT_AM_NOTIFY 7u
#define KVT_AM_PROBE 8u          /* heartbeat probe: u32 peer id + u64 prober incarnation, little-endian */
#define KVT_AM_ANSWER 9u         /* the probe's bytes, sent back */
#define KVT_AM_STAGE_REQUEST 10u /* host-staged moves (ucx_staging.h): a chunk asked of its source */
#define KVT_AM_STAGE_DATA 11u    /* and its bytes, sent back */
#define PROBE_BYTES 12u
#define OP_WINDOW 256u             /* requests in flight per operation */
#define OP_WINDOW_BYTES (8u << 20) /* bytes in flight per operation (at least one request) */
/* Per operation and progress round: shared-memory gets complete inside ucp_get_nbx, so this bounds how
 * long one operation keeps the thread from commands, cancellation and other operations. */
#define ISSUE_BUDGET_BYTES (16u << 20)
#define IDLE_PROGRESS_MS 50         /* progress at least this often even when no event arrives */
#define WARM_SLICE_BYTES (1u << 20) /* of a peer's mapped regions touched per idle progress round (warm_step) */
#define WARM_STRIDE 4096u           /* one read per (smallest) page */
/* How long an operation that stops (canceled, or a request failed) waits for its outstanding requests
 * before their endpoint is force-closed: UCX 1.13 does not end get/put requests on ucp_request_cancel,
 * and a stopped or unreachable peer never answers them. */
#define STOP_GRACE_NS 200000000ull
#define CLOSE_DRAIN_NS 1000000000ull /* at agent stop: how long force-closes may take to finish */
/* How long a graceful close (a flush of what the endpoint still carries, e.g. notifications sent without
 * waiting) may take before the endpoint is force-closed: a stopped peer never acknowledges the flush. */
#define GRACEFUL_CLOSE_NS 1000000000ull

typedef struct ucx_endpoint ucx_endpoint;

/*
 * Two workers per agent. `worker` is the initiator's: this agent's endpoints, gets, puts and
 * notifications sent. `serving` is the one the metadata advertises: readers of this agent's memory
 * connect to it, and its progress answers their software gets and puts (UCX 1.13 copies to and from
 * whatever address such a request names; rma_sw.c checks no remote key) and receives notifications.
 * Deregistering a region that metadata already advertised replaces the serving worker (ucx_fence):
 * destroying it is what stops UCX from answering requests of readers that still hold the old
 * metadata, and the initiator's own connections are untouched by it.
 */
typedef struct {
    ucp_worker_h worker;
    int event_fd; /* -1 when the worker has none: then poll with a short timeout */
} ucx_worker;

/* A serving worker's addresses, each malloc'd: all its transports, and its network devices only (length 0 when it
 * has none), which readers on this host in another pid namespace connect to (ucx_connect). */
typedef struct {
    uint8_t *full, *network;
    uint32_t full_length, network_length;
} ucx_addresses;

typedef struct {
    ucp_context_h context;
    ucp_worker_h worker;
    int event_fd;       /* -1 when the worker has none: then poll with a short timeout */
    ucx_worker serving; /* .worker NULL when replacing it failed */
    bool
        shared_memory; /* UCX opened a memory-mapping transport at ucp_init (posix, sysv, xpmem: opens_memory_mapper) */
    kvt_shared_memory_kinds allocates_from; /* the shared memory UCX_TLS left UCX to place allocations in */
    bool network; /* UCX_TLS left a network transport in (tcp, RDMA): the serving worker has a network address */
    ucx_addresses address; /* the serving worker's (agent->lock held to change it, as metadata reads it) */
    uint64_t next_liveness_check_ns;
    ucx_endpoint *failed;        /* endpoints to force-close after progress: UCX reported them failed, or flushed */
    uint32_t closing;            /* force-closes not yet finished */
    ucx_endpoint *detached;      /* endpoints whose connection is gone, until their closes finish */
    ucx_endpoint *warming;       /* endpoints whose peer's mapped regions are not all touched yet (warm_step) */
    bool shutting_down;          /* the agent's shutdown began: its deadline, not each flush's, bounds closes */
    bool stopping;               /* the worker is being destroyed */
    struct ucx_staging *staging; /* host-staged moves' buffers and streams (ucx_staging.h), or NULL */
    /* Bytes of staged chunks sources wrote into this agent's bounce buffers in place, bounce buffers retired, and
     * destinations' bounce buffers this agent keeps open to write in place (kvt_test_staged_counts reads them on
     * another thread). */
    _Atomic uint64_t staged_in_place_bytes, staged_retired, staged_targets;
} ucx_state;

/* A connection's endpoint. `ep` is NULL once it was closed; `conn` is NULL once the connection was
 * freed (disconnect): the endpoint then lives on while its graceful close (a flush, then a force-close)
 * or a force-close finishes, and is freed by whichever callback ends last. */
struct ucx_endpoint {
    ucp_ep_h ep;
    /* To a peer reached through its network address (ucx_connect): an endpoint to its full address that only
     * unpacks the keys of the regions shared memory maps here, no request on it; NULL otherwise. */
    ucp_ep_h mapping_ep;
    bool through_network; /* `ep` connects to the peer's network address */
    ucx_state *state;
    kvt_conn *conn;
    bool listed;                 /* on state->failed */
    uint32_t closing;            /* force-closes finishing */
    void *flush;                 /* the graceful close's flush request, while outstanding */
    uint64_t flush_deadline_ns;  /* when the flush is given up and the endpoint force-closed */
    char peer[KVT_MAX_NAME + 1]; /* for the shutdown's detail */
    bool warming;                /* on state->warming */
    uint32_t warm_region;        /* the next region of conn->meta to touch, and the offset in it */
    uint64_t warm_offset;
    ucx_endpoint *next_failed, *next_detached, *next_warming;
};

enum ucx_request_kind { UCX_REQ_RMA, UCX_REQ_NOTIFY, UCX_REQ_HEARTBEAT };

/* Lives in the space UCX reserves in every request (ucp_params.request_size). */
typedef struct ucx_request {
    enum ucx_request_kind kind;
    kvt_agent *agent;
    kvt_op *op; /* NULL for a standalone notification */
    kvt_conn *conn;
    uint64_t length;                 /* bytes the request moves */
    uint8_t *buffer;                 /* notification header + payload, or heartbeat message, freed on completion */
    struct ucx_request *prev, *next; /* RMA: the op's outstanding requests (op->requests) */
} ucx_request;

static inline ucx_state *state_of(kvt_agent *agent) { return agent->backend_state; }

static inline ucp_ep_h ep_of(const kvt_conn *conn) {
    const ucx_endpoint *endpoint = conn->backend;
    return endpoint ? endpoint->ep : NULL;
}

/* The kvt_status of a request's UCS status, marking the connection failed when the peer is gone. */
kvt_status ucx_map_status(ucs_status_t status, kvt_conn *conn);
/* Tracks a request UCX returned (a pointer, an error, or NULL: done at once) with its setup. */
kvt_status ucx_track(void *returned, ucx_request setup);
/* The parameters of every request: its callback, and its space (ucx_request) as user data. */
ucp_request_param_t ucx_request_param(void);
void ucx_on_request_done(void *request, ucs_status_t status, void *user_data);
/* Asks UCX to cancel what an operation has outstanding (`outstanding`: the caller's own record of it). */
typedef void ucx_cancel_fn(ucp_worker_h worker, void *outstanding);
/*
 * An operation that stops (canceled, its peer gone, or a request failed) with requests outstanding: asks
 * UCX to cancel them (`cancel`, once), and force-closes the endpoint when some are still outstanding
 * STOP_GRACE_NS later, which ends them. The caller ends the operation once none is outstanding, so its
 * memory is then quiescent and may be deregistered. Called each progress round until then.
 */
void ucx_stop_outstanding(ucx_state *state, kvt_op *op, ucx_cancel_fn *cancel, void *outstanding);

void ucx_advance(kvt_agent *agent, kvt_op *op);
bool ucx_move_inline(kvt_agent *agent, kvt_op *op);
/* Whether the peer of `conn` is still there; force-closes its endpoint when its process is gone. */
bool ucx_confirm_peer(kvt_agent *agent, kvt_conn *conn);
kvt_status ucx_notify(kvt_agent *agent, kvt_conn *conn, kvt_op *op, const uint8_t *data, uint32_t length);
void ucx_probe(kvt_agent *agent, kvt_conn *conn, uint32_t peer_id);
void ucx_describe(kvt_agent *agent, kvt_conn *conn, FILE *out);
/* Sends `message` (PROBE_BYTES, copied) on `ep`; a failure leaves the probe unanswered. */
void ucx_send_heartbeat(kvt_agent *agent, ucp_ep_h ep, unsigned id, const uint8_t *message, uint32_t flags);

/* Endpoints (ucx_endpoint.c). */
/* Force-closes the connection's endpoint after this round of progress (its requests end). */
void ucx_force_close(ucx_state *state, kvt_conn *conn);
/* Force-closes the endpoint (which ends its outstanding requests) without waiting. */
void ucx_close_endpoint(ucx_state *state, ucx_endpoint *endpoint);
/* Force-closes the endpoint's mapping endpoint, if any, without waiting. */
void ucx_close_mapping_endpoint(ucx_state *state, ucx_endpoint *endpoint);
void ucx_close_failed_endpoints(ucx_state *state);
/* Force-closes the detached endpoints whose flush is overdue at `now_ns`; names their peers in `forced`. */
uint32_t ucx_close_overdue_endpoints(ucx_state *state, uint64_t now_ns, char *forced, size_t forced_size);
void ucx_unlist_warming(ucx_state *state, ucx_endpoint *endpoint);
void ucx_free_if_finished(ucx_endpoint *endpoint);
/* UCX's callbacks: an endpoint failed (inside progress); a graceful close's flush ended. */
void ucx_on_endpoint_error(void *arg, ucp_ep_h ep, ucs_status_t status);
void ucx_on_flush_done(void *request, ucs_status_t status, void *user_data);

#endif
