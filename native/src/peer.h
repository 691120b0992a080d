/* Peers and their connections (peer.c). */
#ifndef KVT_PEER_H
#define KVT_PEER_H

#include "kvreuse_transport.h"

#include "heartbeat.h"
#include "metadata.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kvt_agent kvt_agent;

/*
 * A connection to one incarnation of a peer: its metadata plus backend state (UCX endpoint and
 * unpacked keys). Reference-counted under the agent lock by the peer that uses it and by every
 * non-terminal operation; when unreferenced it moves to the agent's dead list and the progress
 * thread closes it.
 */
typedef struct kvt_conn {
    kvt_metadata meta;
    uint32_t refs;
    _Atomic bool failed;              /* the peer went away, or its endpoint was force-closed: reload to use it again */
    _Atomic bool probed, answered;    /* heartbeat: a probe was sent on it / an answer came back on it */
    void *backend;                    /* UCX: the endpoint (ucx.c) */
    int process_fd;                   /* a pidfd of the peer's process once a check opened it (liveness.c), else -1 */
    const _Atomic uint64_t *liveness; /* the peer's liveness table, mapped read-only (file_regions.c), or NULL */
    int liveness_file;                /* its file, open while mapped (readers' holds are locks on it), else -1 */
    uint32_t vram_open;               /* (P) regions of the peer's vram this process has open (vram_xfer.c) */
    bool process_fd_tried;
    /* Set by the backend at connect: nothing the peer sends comes back (UCX 1.13, a peer in another pid namespace over
     * shared memory, neither side with a network transport), so nothing that waits for the peer's answer can end. */
    bool answers_lost;
    char *description; /* the backend's description since its last change (kvt_conn_describe), or NULL; agent->lock */
    struct kvt_conn *next_dead;
} kvt_conn;

typedef struct kvt_peer {
    uint32_t id;
    char name[KVT_MAX_NAME + 1];
    uint64_t generation;
    uint32_t state; /* KVT_PEER_* (DISCONNECTED is derived from conn->failed) */
    uint32_t busy;  /* non-terminal operations */
    kvt_conn *conn; /* NULL once invalidated */
    kvt_peer_heartbeat heartbeat;
} kvt_peer;

void kvt_conn_unref_locked(kvt_agent *agent, kvt_conn *conn);
/* On the progress thread, once the connection is made and whenever what the backend says of it changed: keeps
 * the backend's description for kvt_peer_transport, which then needs no round trip to this thread. */
void kvt_conn_describe(kvt_agent *agent, kvt_conn *conn);
/* At post by `call`: NOT_SUPPORTED, naming the region, when the connection's answers are lost (answers_lost) and one of
 * the peer's regions `remote_slots` names (dram) is not mapped here: it would move through UCX requests, which could
 * never complete. */
kvt_status kvt_conn_check_requests(const char *call, const kvt_conn *conn, const uint32_t *remote_slots,
                                   uint32_t count);
/* The agent's peer `id`, or NOT_FOUND naming `call` (agent->lock held). */
kvt_status kvt_peer_lookup_locked(kvt_agent *agent, const char *call, uint32_t id, kvt_peer **out);
/* Frees closed connections on the dead list (progress thread). */
void kvt_reap_dead_conns(kvt_agent *agent);
void kvt_peers_free_all(kvt_agent *agent);

#endif
