/* Reports about peers (peer_reports.c): each transition of a peer between responsive and unresponsive, counted
 * on the peer and read with kvt_peer_events_poll. */
#ifndef KVT_PEER_REPORTS_H
#define KVT_PEER_REPORTS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct kvt_agent kvt_agent;
struct kvt_peer;

/* Records a transition of `kind` (KVT_PEER_EVENT_*: odd ones make the peer unresponsive) with the peer's
 * silence (agent->lock held). True when a byte is due on the wake-up pipe (kvt_wake_consumer once the lock is
 * released). */
bool kvt_peer_report_locked(kvt_agent *agent, struct kvt_peer *peer, uint32_t kind, uint64_t silence_ns);
/* A new connection replaced `peer`'s (agent->lock held): its probes are counted afresh, and a peer reported
 * unresponsive is reported RELOADED. True when a byte is due on the wake-up pipe. */
bool kvt_peer_report_reconnected_locked(kvt_agent *agent, struct kvt_peer *peer);

#endif
