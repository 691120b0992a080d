/* Delivery: completions and notifications in and out, and the wake-up pipe (delivery.c). */
#ifndef KVT_DELIVERY_H
#define KVT_DELIVERY_H

#include "kvreuse_transport.h"
#include "services/counters.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kvt_notification {
    char sender[KVT_MAX_NAME + 1];
    uint32_t length;
    uint8_t data[];
} kvt_notification;

/* An operation's completion record: it lives in the operation, and once the operation is terminal it is
 * linked on the completion queue until polled or released, so delivering it cannot fail. */
typedef struct kvt_completion {
    bool queued;
    struct kvt_completion *prev, *next;
    uint64_t op_id;
    int32_t status;
    uint64_t bytes_done;
} kvt_completion;

typedef struct kvt_agent kvt_agent;
/* Sends a notification to a peer of the agent: the agent's way out, set at kvt_delivery_init. */
typedef kvt_status (*kvt_notification_sender)(kvt_agent *agent, uint32_t peer, uint64_t peer_generation,
                                              const uint8_t *data, uint32_t length);

typedef struct kvt_delivery {
    kvt_notification_sender send;
    pthread_mutex_t *owner_lock; /* the agent's lock, under which kvt_agent_wait waits on pending_cond */
    kvt_counter_set *counters;
    pthread_cond_t pending_cond; /* completions or notifications became pending */
    /* What the consumer polls after a wake-up — completions, notifications — and the wake-up edge: a leaf
     * lock, taken inside the owner's lock or alone. kvt_agent_poll and kvt_notify_poll take only this one,
     * so they never wait for the owner's lock, which the progress thread takes while it works (and may be
     * preempted holding: a poll waited 5.7 ms for it on a quiet 2-core machine). */
    pthread_mutex_t lock;
    kvt_completion *completions_first, *completions_last; /* oldest first */
    size_t completion_count;
    kvt_notification **notifications; /* ring */
    size_t notification_head, notification_count;
    bool wake_signaled; /* a byte was written to the wake-up pipe since the last poll */
    int wake_pipe[2];
    /* Heartbeat transitions not yet polled; changed under the owner's lock, read without it by a re-arm of
     * the wake-up and by kvt_peer_events_poll, which takes the owner's lock only when there is one. */
    _Atomic uint64_t peer_events_pending;
    uint32_t blocked_waits; /* kvt_agent_wait callers between their checks (for kvt_agent_blocked_waits) */
} kvt_delivery;

/* Sets delivery up for the agent whose lock is `owner_lock` (kvt_agent_create's failures). */
kvt_status kvt_delivery_init(kvt_delivery *delivery, pthread_mutex_t *owner_lock, kvt_counter_set *counters,
                             kvt_notification_sender send);
/* Frees what was never polled (and takes its notifications off the process's pending gauge). */
void kvt_delivery_destroy(kvt_delivery *delivery);
/* Something became pending (owner's lock held): wakes kvt_agent_wait callers and arms the wake-up edge. True
 * when a byte is due on the wake-up pipe: the caller writes it with kvt_wake_consumer once it released the
 * lock, so the consumer it wakes does not find the lock held. */
bool kvt_signal_pending_locked(kvt_delivery *delivery);
/* After a poll: re-arms the wake-up edge; true when something is still pending, so a byte is due again. */
bool kvt_rearm_wake(kvt_delivery *delivery);
/* Writes a byte to the wake-up pipe (hold no lock of the agent). */
void kvt_wake_consumer(kvt_delivery *delivery);
/* Queues a terminal op's completion / takes it off the queue (owner's lock held; allocates nothing). */
void kvt_completion_push_locked(kvt_delivery *delivery, kvt_completion *completion, uint64_t op_id, int32_t status,
                                uint64_t bytes_done);
void kvt_completion_remove_locked(kvt_delivery *delivery, kvt_completion *completion);
/* Queues a received notification (takes the owner's lock). */
void kvt_deliver_notification(kvt_delivery *delivery, const char *sender, const uint8_t *data, uint32_t length);
/* Test hook: how many kvt_agent_wait callers are blocked on the agent (read under its lock, where a counted
 * caller can only be inside its condition wait), so tests can order a call after a wait has begun. */
kvt_status kvt_agent_blocked_waits(uint32_t agent_id, uint32_t *out_count);

#endif
