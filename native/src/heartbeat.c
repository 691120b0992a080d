/* Heartbeat: peers with operations in flight or watched are probed every interval; one that answers
 * nothing for the agent's miss count is reported UNRESPONSIVE, and RESPONSIVE once it answers again.
 * Probes and answers go through the backend (UCX: active messages answered by the peer's progress
 * thread; loopback: commands run by the target agent's progress thread). Reports go through peer_reports.c. */
#include "agent.h"

#include "heartbeat.h"
#include "heartbeat_rounds.h"
#include "peer_reports.h"
#include "services/status.h"

#include <stdlib.h>

typedef struct {
    kvt_conn *conn;
    uint32_t peer_id;
} probe_target;

/* Whether the layers above want to hear of the peer's silence: it has transfers in flight or is watched. */
static bool followed(const kvt_peer *peer) { return peer->conn && (peer->busy > 0 || peer->heartbeat.watched); }

/* Counts a missed round for each probed peer still awaiting an answer, reports the ones past the miss
 * count or whose process is gone (kvt_conn_process_gone: after its first check, one poll of a pidfd), and
 * lists every probed peer (with a reference on its connection) for a new probe. Sets *wake when a byte is
 * due on the wake-up pipe, and *reload_awaited when a followed peer's connection failed (rounds go on, so
 * that the connection a reload brings is probed). */
static uint32_t round_locked(kvt_agent *agent, uint64_t now, probe_target *targets, bool *wake, bool *reload_awaited) {
    uint32_t count = 0;
    for (uint32_t i = 0; i < agent->peer_count; i++) {
        kvt_peer *peer = agent->peers[i];
        kvt_peer_heartbeat *hb = &peer->heartbeat;
        if (!followed(peer) || atomic_load(&peer->conn->failed)) {
            /* A connection the transport failed (the process died, or its endpoint was force-closed) can
             * answer no probe until the peer is loaded again: a followed peer is reported at once. */
            *reload_awaited |= followed(peer);
            if (followed(peer) && !hb->unresponsive)
                *wake |= kvt_peer_report_locked(agent, peer,
                                                kvt_conn_process_gone(peer->conn) ? KVT_PEER_EVENT_PROCESS_ENDED
                                                                                  : KVT_PEER_EVENT_DISCONNECTED,
                                                hb->awaiting ? now - hb->silent_since_ns : 0);
            hb->awaiting = false; /* a later round starts counting afresh */
            hb->missed = 0;
            continue;
        }
        if (hb->awaiting) {
            /* A peer is judged by its misses only once it answered on this connection: one that never did
             * may have no way to answer (UCX 1.13 over sysv from another pid namespace, even in this network
             * namespace: nothing the peer sends arrives, see docs/packages/native.md), not be stopped.
             * One whose process is gone (seen from here: same host and pid namespace) is reported at once,
             * answered or not: over shared memory UCX sees no death, and a process killed before its first
             * answer would otherwise never be reported. */
            if (atomic_load(&peer->conn->answered)) hb->missed++;
            uint32_t kind = hb->unresponsive                        ? 0
                            : hb->missed >= agent->heartbeat_misses ? KVT_PEER_EVENT_UNRESPONSIVE
                            : kvt_conn_process_gone(peer->conn)     ? KVT_PEER_EVENT_PROCESS_ENDED
                                                                    : 0;
            if (kind) *wake |= kvt_peer_report_locked(agent, peer, kind, now - hb->silent_since_ns);
        } else {
            hb->awaiting = true;
            hb->missed = 0;
            hb->silent_since_ns = now;
        }
        if (targets) {
            peer->conn->refs++;
            targets[count] = (probe_target){.conn = peer->conn, .peer_id = peer->id};
        }
        count++;
    }
    return count;
}

void kvt_heartbeat_wake(kvt_agent *agent) {
    atomic_store_explicit(&agent->heartbeat_woken, true, memory_order_relaxed);
}

/* Probes every followed peer and counts a miss for each one still awaiting an answer (round_locked). */
static void run_round(kvt_agent *agent, uint64_t now) {
    pthread_mutex_lock(&agent->lock);
    atomic_store_explicit(&agent->next_heartbeat_ns, now + agent->heartbeat_interval_ms * KVT_NS_PER_MS,
                          memory_order_relaxed);
    /* Probes go out after the lock is released: a loopback probe takes the target agent's lock. */
    probe_target *targets = agent->peer_count ? malloc(agent->peer_count * sizeof *targets) : NULL;
    bool wake = false, reload_awaited = false;
    uint32_t count = round_locked(agent, now, targets, &wake, &reload_awaited);
    pthread_mutex_unlock(&agent->lock);
    if (wake) kvt_wake_consumer(&agent->delivery);
    agent->heartbeat_probing = count > 0 || reload_awaited;
    if (!targets) return; /* no memory: this round's probes are lost and count as unanswered */
    for (uint32_t i = 0; i < count; i++) {
        atomic_store(&targets[i].conn->probed, true);
        agent->backend->probe(agent, targets[i].conn, targets[i].peer_id);
        kvt_counter_add(&agent->counters, KVT_COUNTER_HEARTBEATS_SENT, 1);
    }
    pthread_mutex_lock(&agent->lock);
    for (uint32_t i = 0; i < count; i++) kvt_conn_unref_locked(agent, targets[i].conn);
    pthread_mutex_unlock(&agent->lock);
    free(targets);
}

void kvt_heartbeat_tick(kvt_agent *agent) {
    if (kvt_heartbeat_rounds_on_demand(agent)) {
        if (!kvt_heartbeat_round_asked(agent)) return;
        run_round(agent, kvt_now_ns());
        kvt_heartbeat_round_ran(agent);
        return;
    }
    uint64_t now = kvt_now_ns();
    /* A round is due on time, or at once when probing may start (a post or a watch while nothing was probed);
     * never earlier while probing, since each round counts a miss. */
    bool start = !agent->heartbeat_probing && atomic_load_explicit(&agent->heartbeat_woken, memory_order_relaxed) &&
                 atomic_exchange_explicit(&agent->heartbeat_woken, false, memory_order_relaxed);
    if (!start && now < atomic_load_explicit(&agent->next_heartbeat_ns, memory_order_relaxed)) return;
    run_round(agent, now);
}

int kvt_heartbeat_next_timeout_ms(kvt_agent *agent) {
    if (kvt_heartbeat_rounds_on_demand(agent)) return kvt_heartbeat_round_asked(agent) ? 0 : -1;
    if (!agent->heartbeat_probing) return -1;
    uint64_t now = kvt_now_ns(), due = atomic_load_explicit(&agent->next_heartbeat_ns, memory_order_relaxed);
    return due <= now ? 0 : (int)((due - now + KVT_NS_PER_MS - 1) / KVT_NS_PER_MS);
}

void kvt_heartbeat_answered(kvt_agent *agent, uint32_t peer_id) {
    bool wake = false;
    pthread_mutex_lock(&agent->lock);
    for (uint32_t i = 0; i < agent->peer_count; i++) {
        kvt_peer *peer = agent->peers[i];
        if (peer->id != peer_id) continue;
        kvt_peer_heartbeat *hb = &peer->heartbeat;
        kvt_counter_add(&agent->counters, KVT_COUNTER_HEARTBEAT_ANSWERS, 1);
        if (peer->conn) atomic_store(&peer->conn->answered, true);
        if (hb->unresponsive)
            wake = kvt_peer_report_locked(agent, peer, KVT_PEER_EVENT_RESPONSIVE, kvt_now_ns() - hb->silent_since_ns);
        hb->awaiting = false;
        hb->missed = 0;
        break;
    }
    pthread_mutex_unlock(&agent->lock);
    if (wake) kvt_wake_consumer(&agent->delivery);
}

/* ---- API ------------------------------------------------------------------------------------------ */

kvt_status kvt_agent_set_heartbeat(uint32_t agent_id, uint32_t interval_ms, uint32_t misses) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_agent_set_heartbeat", &agent);
    if (status != KVT_OK) return status;
    if (interval_ms < KVT_HEARTBEAT_MIN_INTERVAL_MS || interval_ms > KVT_HEARTBEAT_MAX_INTERVAL_MS)
        status = kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_agent_set_heartbeat: interval_ms %u is outside %u..%u",
                          interval_ms, KVT_HEARTBEAT_MIN_INTERVAL_MS, KVT_HEARTBEAT_MAX_INTERVAL_MS);
    else if (misses < 1 || misses > KVT_HEARTBEAT_MAX_MISSES)
        status = kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_agent_set_heartbeat: misses %u is outside 1..%u", misses,
                          KVT_HEARTBEAT_MAX_MISSES);
    if (status == KVT_OK) {
        pthread_mutex_lock(&agent->lock);
        agent->heartbeat_interval_ms = interval_ms;
        agent->heartbeat_misses = misses;
        atomic_store(&agent->next_heartbeat_ns, 0);
        kvt_command_kick(&agent->commands);
        pthread_mutex_unlock(&agent->lock);
    }
    return kvt_agent_finish(agent, status);
}

kvt_status kvt_peer_watch(uint32_t agent_id, uint32_t peer_id, uint32_t watched) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_peer_watch", &agent);
    if (status != KVT_OK) return status;
    if (watched > 1)
        return kvt_agent_finish(
            agent, kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_peer_watch: watched must be 0 or 1 (got %u)", watched));
    pthread_mutex_lock(&agent->lock);
    kvt_peer *peer = NULL;
    status = kvt_peer_lookup_locked(agent, "kvt_peer_watch", peer_id, &peer);
    if (status == KVT_OK && peer->heartbeat.watched != (watched == 1)) { /* a repeat changes nothing */
        peer->heartbeat.watched = watched == 1;
        kvt_heartbeat_wake(agent);
        kvt_command_kick(&agent->commands);
    }
    pthread_mutex_unlock(&agent->lock);
    return kvt_agent_finish(agent, status);
}
