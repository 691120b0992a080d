/* Heartbeat probes of peers with operations in flight or watched (heartbeat.c). */
#ifndef KVT_HEARTBEAT_H
#define KVT_HEARTBEAT_H

#include "kvreuse_transport.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kvt_agent kvt_agent;
struct kvt_peer;

/* A peer's heartbeat state (heartbeat.c), under the agent lock. */
typedef struct {
    bool watched;
    bool awaiting;                                           /* a probe is unanswered */
    bool unresponsive;                                       /* the last transition reported */
    uint32_t missed;                                         /* probe ticks since the first unanswered probe */
    uint64_t silent_since_ns;                                /* when the first unanswered probe was sent */
    uint64_t transitions, reported;                          /* odd: UNRESPONSIVE; reports polled so far */
    uint64_t unresponsive_silence_ns, responsive_silence_ns; /* of the latest transition of each parity */
    uint32_t unresponsive_kind, responsive_kind;             /* KVT_PEER_EVENT_*, likewise */
} kvt_peer_heartbeat;

/* (P) When a round is due: probes every peer with operations in flight or watched, and reports the ones
 * that answered nothing for the agent's miss count. */
void kvt_heartbeat_tick(kvt_agent *agent);
/* Something may start probing (a post, a watch): an idle progress thread runs a round at its next turn. */
void kvt_heartbeat_wake(kvt_agent *agent);
/* (P) Milliseconds until the next round while peers are being probed, else -1. */
int kvt_heartbeat_next_timeout_ms(kvt_agent *agent);
/* (P) A probe of peer `peer_id` was answered. */
void kvt_heartbeat_answered(kvt_agent *agent, uint32_t peer_id);

#endif
