/* Reports about peers: each transition is counted on the peer, with the kind and silence of the latest of each
 * parity (nothing is allocated, so none is ever dropped), announced through the wake-up pipe and read with
 * kvt_peer_events_poll, each exactly once and in order per peer. */
#include "agent.h"

#include "peer_reports.h"

bool kvt_peer_report_locked(kvt_agent *agent, kvt_peer *peer, uint32_t kind, uint64_t silence_ns) {
    kvt_peer_heartbeat *hb = &peer->heartbeat;
    bool unresponsive = kind % 2 == 1;
    hb->unresponsive = unresponsive;
    hb->transitions++;
    if (unresponsive) {
        hb->unresponsive_silence_ns = silence_ns;
        hb->unresponsive_kind = kind;
    } else {
        hb->responsive_silence_ns = silence_ns;
        hb->responsive_kind = kind;
    }
    agent->delivery.peer_events_pending++;
    kvt_counter_add(&agent->counters, KVT_COUNTER_UNRESPONSIVE_PEERS, unresponsive ? 1 : -1);
    return kvt_signal_pending_locked(&agent->delivery);
}

bool kvt_peer_report_reconnected_locked(kvt_agent *agent, kvt_peer *peer) {
    kvt_peer_heartbeat *hb = &peer->heartbeat;
    hb->awaiting = false;
    hb->missed = 0;
    return hb->unresponsive && kvt_peer_report_locked(agent, peer, KVT_PEER_EVENT_RELOADED, 0);
}

/* ---- API ------------------------------------------------------------------------------------------ */

kvt_status kvt_peer_events_poll(uint32_t agent_id, uint32_t capacity, uint32_t *peer_ids, uint32_t *kinds,
                                uint64_t *silence_ms, uint32_t *out_count) {
    kvt_agent *agent;
    kvt_status status = kvt_poll_enter(agent_id, "kvt_peer_events_poll",
                                       out_count && (capacity == 0 || (peer_ids && kinds && silence_ms)),
                                       "out_count and (capacity > 0) the arrays must not be NULL", &agent);
    if (status != KVT_OK) return status;
    uint32_t n = 0;
    /* Reports are rare and polled after every wake-up: only one that finds some takes the agent lock. */
    bool any = atomic_load(&agent->delivery.peer_events_pending) > 0;
    if (any) pthread_mutex_lock(&agent->lock);
    for (uint32_t i = 0; any && i < agent->peer_count && n < capacity; i++) {
        kvt_peer *peer = agent->peers[i];
        kvt_peer_heartbeat *hb = &peer->heartbeat;
        while (n < capacity && hb->reported < hb->transitions) {
            hb->reported++;
            bool unresponsive = hb->reported % 2 == 1;
            peer_ids[n] = peer->id;
            kinds[n] = unresponsive ? hb->unresponsive_kind : hb->responsive_kind;
            silence_ms[n] = (unresponsive ? hb->unresponsive_silence_ns : hb->responsive_silence_ns) / KVT_NS_PER_MS;
            agent->delivery.peer_events_pending--;
            n++;
        }
    }
    if (any) pthread_mutex_unlock(&agent->lock);
    if (kvt_rearm_wake(&agent->delivery)) kvt_wake_consumer(&agent->delivery);
    *out_count = n;
    return kvt_agent_finish(agent, KVT_OK);
}
