/* The backend contract: what the agent's modules ask of a backend (a table of functions, one per backend in
 * backends/<name>/), and the choice of one for an agent (backends/backends.c). A backend is a plugin: it
 * serves one agent through `agent->backend_state` and reports back through the modules' callbacks named
 * below (kvt_op_notified, kvt_op_backend_finished, kvt_heartbeat_answered, kvt_deliver_notification).
 * Adding one (a CUDA memory domain, say): a folder under backends/, its table here, its entry in
 * backends/backends.c. */
#ifndef KVT_BACKEND_H
#define KVT_BACKEND_H

#include "kvreuse_transport.h"

#include "memory.h"
#include "peer.h"
#include "xfer.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stdio.h>

#ifndef KVT_HAVE_UCX
#define KVT_HAVE_UCX 0
#endif

typedef struct kvt_agent kvt_agent;

typedef struct kvt_backend kvt_backend;

/* Functions marked (P) run on the agent's progress thread only. */
struct kvt_backend {
    /* (P) at thread start / end. */
    kvt_status (*start)(kvt_agent *agent, char *detail, size_t detail_size);
    void (*stop)(kvt_agent *agent);
    /* (P) memory, unless the flags below say alloc/free_allocation or map/unmap may run on any thread. */
    kvt_status (*alloc)(kvt_agent *agent, kvt_allocation *allocation, char *detail, size_t detail_size);
    void (*free_allocation)(kvt_agent *agent, kvt_allocation *allocation);
    kvt_status (*map)(kvt_agent *agent, kvt_region *region, const kvt_allocation *exact, char *detail,
                      size_t detail_size);
    void (*unmap)(kvt_agent *agent, kvt_region *region);
    /* (P) stops serving requests of readers that may hold metadata exported so far (NULL: the backend
     * checks every remote access against the live regions itself, as loopback does). */
    void (*fence)(kvt_agent *agent);
    /* Worker address for the metadata blob, or with `network_only` the address of its network devices alone (length
     * 0 when it has none) (any thread, agent->lock held). */
    const uint8_t *(*address)(kvt_agent *agent, bool network_only, uint32_t *length);
    /* (P) connections. */
    kvt_status (*connect)(kvt_agent *agent, kvt_conn *conn, char *detail, size_t detail_size);
    void (*disconnect)(kvt_agent *agent, kvt_conn *conn);
    /* (P) agent shutdown, after every connection was disconnected: whether closes are still finishing.
     * At `deadline_ns` it force-closes what is left, naming those peers in `forced`, and answers false.
     * NULL when disconnect finishes at once. */
    bool (*closing)(kvt_agent *agent, uint64_t deadline_ns, char *forced, size_t forced_size);
    /* (P) moves a KVT_PHASE_MOVING op forward; sets op->error on failure and op->phase = KVT_PHASE_MOVED
     * once nothing of it is in flight any more (all moved, failed, or canceled: op->cancel_requested). */
    void (*advance)(kvt_agent *agent, kvt_op *op);
    /* (any thread) a small READ just posted, before it is launched (its regions and connection held): copies
     * all of its bytes at once when the backend can without a request or a wait (the peer's memory is mapped
     * here) and the peer was still there after the copy; sets op->phase = KVT_PHASE_MOVED and answers true.
     * False, with nothing of the op counted as moved, when it cannot. NULL: never. */
    bool (*move_inline)(kvt_agent *agent, kvt_op *op);
    /* (P) after an op that set op->confirm_peer moved its bytes: whether the connection's peer is still there
     * (false: the backend now treats the connection as failed). One answer serves every op whose bytes moved
     * before it was asked (kvt_ops_run asks once a round). NULL when the backend never sets confirm_peer. */
    bool (*confirm_peer)(kvt_agent *agent, kvt_conn *conn);
    /* (P) moves a KVT_PHASE_MOVING op of KVT_VRAM_PATH_STAGED (vram_xfer.h) forward, as `advance` does: through
     * pinned bounce buffers on both sides. NULL when the backend does not stage (such ops are refused at post). */
    void (*advance_staged)(kvt_agent *agent, kvt_op *op);
    /* (P, or any thread with notify_on_any_thread when op == NULL) sends a notification. With op != NULL it
     * may answer KVT_IN_PROGRESS and report the end through kvt_op_notified; with op == NULL it copies `data`
     * if it needs it after returning. */
    kvt_status (*notify)(kvt_agent *agent, kvt_conn *conn, kvt_op *op, const uint8_t *data, uint32_t length);
    /* (P) sends a heartbeat probe to the connection's peer; its answer reaches kvt_heartbeat_answered on this
     * agent's progress thread with `peer_id`. Nothing when it cannot be sent (it counts as unanswered). */
    void (*probe)(kvt_agent *agent, kvt_conn *conn, uint32_t peer_id);
    /* (P) writes a description of the path to the peer (UCX: the endpoint's lanes). */
    void (*describe)(kvt_agent *agent, kvt_conn *conn, FILE *out);
    /* Whether alloc/free_allocation may run on any thread, concurrently with the progress thread and with
     * each other (no progress-thread round trip). */
    bool allocation_on_any_thread;
    /* Whether map/unmap may, as well. A backend whose progress thread itself serves readers keeps them (P):
     * the thread learns of a region through its queue, which orders the caller's writes to the memory
     * before every read it serves. */
    bool registration_on_any_thread;
    /* Whether a standalone notification (op == NULL) may be sent from the caller's thread; else it is queued
     * for the progress thread. */
    bool notify_on_any_thread;
    /* (P) one round of backend progress; true if anything happened. */
    bool (*progress)(kvt_agent *agent);
    /* (P) blocks until the backend or command fd has events or timeout_ms passes. */
    void (*sleep)(kvt_agent *agent, int timeout_ms);
};

/* The backend built in for KVT_BACKEND_* `kind`, once it can run here; else NOT_SUPPORTED or
 * INVALID_PARAM (unknown) with the detail naming kvt_agent_create. */
kvt_status kvt_backend_select(uint32_t kind, const kvt_backend **out);

extern const kvt_backend kvt_loopback_backend;
#if KVT_HAVE_UCX
extern const kvt_backend kvt_ucx_backend;
/* Loads UCX on the first call (ucx_api.c): NULL once it is loaded, else why it could not be (static). */
const char *kvt_ucx_unavailable(void);
#endif

#endif
