/* Operations: posting, progress, completion (xfer.c). */
#ifndef KVT_XFER_H
#define KVT_XFER_H

#include "kvreuse_transport.h"

#include "memory.h"
#include "peer.h"
#include "services/commands.h"
#include "services/cuda_kernels.h"
#include "services/delivery.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stdatomic.h>

typedef struct kvt_agent kvt_agent;

typedef struct kvt_desc {
    uint64_t local_address, remote_address, length;
    uint32_t local_slot, remote_slot; /* index into the op's local regions / conn->meta.regions */
} kvt_desc;

enum kvt_op_phase {
    KVT_PHASE_QUEUED, /* posted, not yet seen by the progress thread */
    KVT_PHASE_MOVING, /* descriptors being issued / in flight */
    KVT_PHASE_MOVED,  /* the backend finished moving (or failed); op->error says which */
    KVT_PHASE_NOTIFYING,
    KVT_PHASE_HELD, /* backend done; held by a completion delay */
    KVT_PHASE_TERMINAL,
};

struct kvt_op;

/* Where this process reaches the peer's region `slot` of `op`: the shift from its advertised address. */
typedef kvt_status (*kvt_remote_shift)(kvt_agent *agent, struct kvt_op *op, uint32_t slot, int64_t *out_shift);

/* Where a post's descriptors come from when they are not built whole (a template post's expansion,
 * template.c): the progress thread refills the op's window from it as it issues them (kvt_op_more), or a
 * vram move has the GPU expand it (kvt_gather_routes), and it is freed with the op. */
typedef struct kvt_desc_source {
    /* (P) Refills op->descs with the next pieces; false when every piece was issued. */
    bool (*refill)(struct kvt_op *op);
    void (*free)(kvt_agent *agent, struct kvt_desc_source *source);
    /* (P) For the GPU's expansion: the routes and blocks of the op's table. */
    void (*gather_shape)(const struct kvt_op *op, uint32_t *out_routes, uint32_t *out_blocks);
    /* (P) The op's table as kvt_gather_routes reads it: its routes into `routes` (source and destination by
     * the op's direction, tiled, the remote side shifted by `shift`), its blocks into `pairs`, the routes'
     * tiles per block pair into *out_tiles_per_pair. */
    kvt_status (*gather_tables)(kvt_agent *agent, struct kvt_op *op, kvt_remote_shift shift, kvt_gather_route *routes,
                                kvt_gather_block_pair *pairs, uint64_t *out_tiles_per_pair);
} kvt_desc_source;

typedef struct kvt_op {
    uint64_t id;
    uint32_t direction;
    kvt_peer *peer;
    kvt_conn *conn;
    uint32_t count;
    kvt_desc *descs;
    /* A template post: descs is a window the progress thread refills from `source` as it issues them
     * (kvt_op_more); NULL for an explicit post. */
    kvt_desc_source *source;
    uint32_t local_count;
    kvt_region **locals;
    uint8_t notification[KVT_MAX_NOTIFICATION];
    uint32_t notification_length;
    uint64_t bytes_total;
    /* Bytes and destination span both reach kvt_streaming_threshold(): direct copies use
     * non-temporal stores (the destination would not stay in the cache; regular stores also read it). */
    bool streaming;
    uint8_t vram;                /* KVT_VRAM_PATH_* (vram_xfer.h): how a move with vram regions goes, or 0 */
    void *vram_work;             /* (P) what its path has in flight (streams, tables, events, bounce buffers) */
    _Atomic uint64_t bytes_done; /* written by the progress thread only (kvt_op_add_bytes_done) */
    int32_t status;              /* KVT_IN_PROGRESS until terminal; under the agent lock */
    /* Owned by the progress thread. */
    enum kvt_op_phase phase;
    uint32_t next;         /* next descriptor to issue */
    uint64_t next_offset;  /* bytes of descs[next] already issued (loopback chunking) */
    uint64_t bytes_issued; /* UCX: bytes handed to requests or copied so far */
    uint32_t outstanding;  /* backend requests in flight */
    uint64_t outstanding_bytes;
    void *requests;            /* UCX: the outstanding requests, linked through their request space */
    uint64_t stop_deadline_ns; /* UCX: stopping with requests outstanding; when to force-close (0: not yet) */
    bool flushed;              /* WRITE: remote completion confirmed (UCX) */
    kvt_status error;          /* first error, KVT_OK if none */
    /* MOVED, its bytes count only once the backend confirms its peer is still there after them
     * (backend->confirm_peer): they may have been read from a process that died meanwhile (fail closed). */
    bool confirm_peer;
    _Atomic bool cancel_requested;
    uint64_t backend_done_ns;
    kvt_status backend_status;
    struct kvt_op *next_active;
    kvt_command command;       /* the KVT_CMD_POST that hands it to the progress thread */
    kvt_completion completion; /* queued for kvt_agent_poll once terminal */
} kvt_op;

/* How much copying a round may still do before it wakes the consumer for an operation that ended in it.
 * Small operations ending within this much of each other share one wake-up (written at the next larger
 * slice or the round's end) instead of one each: each wake-up is a context switch of the consumer's
 * thread, which on a busy machine preempts the progress thread that woke it. Bounded so that a
 * completion waits at most a few tenths of a millisecond of copying, about what the wake-up itself
 * takes; before a larger slice the consumer is woken at once, to post its next operation meanwhile. */
#define KVT_WAKE_DEFER_BYTES (4u << 20)
/* When the consumer's thread runs on another core, a round wakes it once the bytes its operations still
 * have to move fall to this (about 25 us of copying here): time for it to post the next operations before
 * the round ends (kvt_ops_run). */
#define KVT_WAKE_AHEAD_BYTES (2u << 20)

/* Progress thread: takes a posted op (command != NULL), or steps every active and held op (NULL); true
 * when an op moved (bytes issued or done, a phase changed, a held op ended). */
bool kvt_ops_run(kvt_agent *agent, kvt_command *posted);
/* Milliseconds until the next held op is due, or -1 for none. */
int kvt_ops_next_timeout_ms(kvt_agent *agent);
/* Backend callback (progress thread): the op's notification was sent, or failed with `status`. */
void kvt_op_notified(kvt_agent *agent, kvt_op *op, kvt_status status);
void kvt_op_backend_finished(kvt_agent *agent, kvt_op *op);
void kvt_op_free(kvt_agent *agent, kvt_op *op);
/* A queued op with room for `desc_capacity` descriptors, `local_count` local regions and (at
 * *out_remote_slots, when given) `remote_slot_count` scratch slots, all in one of the agent's warm blocks;
 * NULL when out of memory. The descriptors are not zeroed. */
kvt_op *kvt_op_new(kvt_agent *agent, uint32_t direction, uint32_t desc_capacity, uint32_t local_count,
                   uint32_t remote_slot_count, const uint8_t *notification, uint32_t notification_length,
                   uint32_t **out_remote_slots);
/* Peer `peer_id` when it is usable at `generation` (agent->lock held): NOT_FOUND when stale, invalidated or
 * unknown, REMOTE_DISCONNECT when its connection failed. */
kvt_status kvt_resolve_peer_locked(kvt_agent *agent, const char *call, uint32_t peer_id, uint64_t generation,
                                   kvt_peer **out);
/* Takes the op's references on its local regions (op->locals), `peer` and the peer's connection, which
 * becomes op->conn (agent->lock held); kvt_op_unhold_locked drops them. While held, the regions cannot be
 * deregistered (BUSY) and the connection's metadata stays. */
void kvt_op_hold_locked(kvt_peer *peer, kvt_op *op);
void kvt_op_unhold_locked(kvt_agent *agent, kvt_op *op);
/* Hands a fully built, held op to the progress thread (agent->lock held): the post fault, its id, the
 * counters. On failure nothing was started (the op is still held). */
kvt_status kvt_op_start_locked(kvt_agent *agent, const char *call, kvt_op *op);
/* Gives a held op its id and makes it findable by it (agent->lock held); fails only when out of memory. An
 * enlisted op that is not started after all leaves with kvt_op_delist_locked. */
kvt_status kvt_op_enlist_locked(kvt_agent *agent, const char *call, kvt_op *op);
void kvt_op_delist_locked(kvt_agent *agent, kvt_op *op);

/* (P) Whether the op has a descriptor left to issue at op->descs[op->next] (refilling a template post's window). */
static inline bool kvt_op_more(kvt_op *op) { return op->next < op->count || (op->source && op->source->refill(op)); }
/* (P) Adds to op->bytes_done with a plain load and store: the progress thread is its only writer, and a
 * locked add right after a copy stalls until every store of that copy has drained (measured: ~14% of a
 * batch of 4 KiB gets). Backends add once per round, not per descriptor. */
static inline void kvt_op_add_bytes_done(kvt_op *op, uint64_t n) {
    uint64_t done = atomic_load_explicit(&op->bytes_done, memory_order_relaxed);
    atomic_store_explicit(&op->bytes_done, done + n, memory_order_relaxed);
}

/* Sends a notification to peer `peer_id` at `peer_generation` (kvt_notify_send's sender, delivery.h). */
kvt_status kvt_notify_peer(kvt_agent *agent, uint32_t peer_id, uint64_t peer_generation, const uint8_t *data,
                           uint32_t length);

#endif
