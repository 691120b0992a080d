/* Peers: loading metadata blobs, generations, invalidation, and the connections behind them. */
#include "agent.h"

#include "file_regions.h"
#include "jobs.h"
#include "peer.h"
#include "peer_reports.h"
#include "services/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kvt_conn_unref_locked(kvt_agent *agent, kvt_conn *conn) {
    if (--conn->refs > 0) return;
    conn->next_dead = agent->dead_conns;
    agent->dead_conns = conn;
    atomic_store_explicit(&agent->dead_conns_pending, true, memory_order_release);
    kvt_command_kick(&agent->commands);
}

void kvt_reap_dead_conns(kvt_agent *agent) {
    if (!atomic_load_explicit(&agent->dead_conns_pending, memory_order_acquire)) return;
    pthread_mutex_lock(&agent->lock);
    atomic_store_explicit(&agent->dead_conns_pending, false, memory_order_relaxed);
    kvt_conn *conn = agent->dead_conns;
    agent->dead_conns = NULL;
    pthread_mutex_unlock(&agent->lock);
    while (conn) {
        kvt_conn *next = conn->next_dead;
        agent->backend->disconnect(agent, conn);
        kvt_file_regions_unmap(conn);
        kvt_conn_forget_process(conn);
        kvt_metadata_free(&conn->meta); /* closes its vram mappings: then its holds can go */
        kvt_liveness_unmap(conn);
        free(conn->description);
        free(conn);
        conn = next;
    }
}

/* A peer is being forgotten (agent->lock held): its heartbeat reports not yet polled and its unresponsive
 * count go with it. */
static void forget_locked(kvt_agent *agent, kvt_peer *peer) {
    agent->delivery.peer_events_pending -= peer->heartbeat.transitions - peer->heartbeat.reported;
    if (peer->heartbeat.unresponsive) kvt_counter_add(&agent->counters, KVT_COUNTER_UNRESPONSIVE_PEERS, -1);
}

void kvt_peers_free_all(kvt_agent *agent) {
    pthread_mutex_lock(&agent->lock);
    for (uint32_t i = 0; i < agent->peer_count; i++) {
        kvt_peer *peer = agent->peers[i];
        if (peer->conn) kvt_conn_unref_locked(agent, peer->conn);
        forget_locked(agent, peer);
        free(peer);
        kvt_counter_add(&agent->counters, KVT_COUNTER_LIVE_PEERS, -1);
    }
    agent->peer_count = 0;
    pthread_mutex_unlock(&agent->lock);
}

kvt_status kvt_peer_lookup_locked(kvt_agent *agent, const char *call, uint32_t id, kvt_peer **out) {
    for (uint32_t i = 0; i < agent->peer_count; i++) {
        if (agent->peers[i]->id == id) {
            *out = agent->peers[i];
            return KVT_OK;
        }
    }
    return kvt_fail(KVT_ERR_NOT_FOUND, "%s: agent '%s' has no peer %u", call, agent->name, id);
}

static kvt_peer *find_peer_by_name_locked(const kvt_agent *agent, const char *name) {
    for (uint32_t i = 0; i < agent->peer_count; i++)
        if (strcmp(agent->peers[i]->name, name) == 0) return agent->peers[i];
    return NULL;
}

static uint32_t peer_state(const kvt_peer *peer) {
    if (!peer->conn) return KVT_PEER_INVALIDATED;
    if (atomic_load(&peer->conn->failed)) return KVT_PEER_DISCONNECTED;
    return KVT_PEER_READY;
}

/* Maps the peer's liveness table first (its file-backed regions' files and its vram are read without its help,
 * and checked against it: file_regions.c, vram_xfer.c), then connects. */
static kvt_status connect_call(kvt_agent *agent, void *arg, char *detail, size_t detail_size) {
    kvt_conn *conn = arg;
    kvt_liveness_map(conn);
    kvt_status status = agent->backend->connect(agent, conn, detail, detail_size);
    if (status == KVT_OK) kvt_conn_describe(agent, conn);
    return status;
}

static const char *backend_name(uint32_t backend) {
    return backend == KVT_BACKEND_LOOPBACK ? "loopback" : backend == KVT_BACKEND_UCX ? "ucx" : "unknown";
}

/* Decides whether the parsed blob replaces what is loaded: KVT_IN_PROGRESS = load it, KVT_OK = no-op. */
static kvt_status compare_with_loaded_locked(const kvt_peer *peer, const kvt_metadata *meta) {
    if (!peer || peer_state(peer) != KVT_PEER_READY) return KVT_IN_PROGRESS;
    const kvt_metadata *loaded = &peer->conn->meta;
    if (loaded->incarnation != meta->incarnation) return KVT_IN_PROGRESS;
    if (meta->generation == loaded->generation) return KVT_OK;
    if (meta->generation > loaded->generation) return KVT_IN_PROGRESS;
    return kvt_fail(KVT_ERR_MISMATCH,
                    "kvt_peer_load: blob of peer '%s' has metadata generation %llu, older than the loaded %llu of the "
                    "same incarnation",
                    meta->name, (unsigned long long)meta->generation, (unsigned long long)loaded->generation);
}

static kvt_status install_conn_locked(kvt_agent *agent, kvt_conn *conn, kvt_peer **out) {
    kvt_peer *peer = find_peer_by_name_locked(agent, conn->meta.name);
    if (!peer) {
        if (agent->peer_count == agent->peer_capacity) {
            uint32_t capacity = agent->peer_capacity ? agent->peer_capacity * 2 : 8;
            kvt_peer **grown = realloc(agent->peers, capacity * sizeof *grown);
            if (!grown) return kvt_fail(KVT_ERR_NO_MEMORY, "kvt_peer_load: out of memory");
            agent->peers = grown;
            agent->peer_capacity = capacity;
        }
        peer = calloc(1, sizeof *peer);
        if (!peer) return kvt_fail(KVT_ERR_NO_MEMORY, "kvt_peer_load: out of memory");
        peer->id = agent->next_peer_id++;
        strcpy(peer->name, conn->meta.name);
        agent->peers[agent->peer_count++] = peer;
        kvt_counter_add(&agent->counters, KVT_COUNTER_LIVE_PEERS, 1);
    }
    if (peer->conn) kvt_conn_unref_locked(agent, peer->conn);
    peer->conn = conn;
    peer->generation++;
    *out = peer;
    return KVT_OK;
}

/* A connection (not yet connected) for `blob`, for `call`: refuses a malformed blob, one of another backend,
 * and running out of memory, with nothing made. */
static kvt_status new_conn(const kvt_agent *agent, const char *call, const uint8_t *blob, uint64_t length,
                           kvt_conn **out) {
    kvt_metadata meta;
    kvt_status status = kvt_metadata_parse(blob, length, &meta);
    if (status != KVT_OK) return status;
    if (meta.backend != agent->backend_kind)
        status = kvt_fail(KVT_ERR_MISMATCH, "%s: blob of peer '%s' is for the %s backend; agent '%s' uses %s", call,
                          meta.name, backend_name(meta.backend), agent->name, backend_name(agent->backend_kind));
    else if (!(*out = calloc(1, sizeof **out)))
        status = kvt_fail(KVT_ERR_NO_MEMORY, "%s: out of memory", call);
    if (status != KVT_OK) {
        kvt_metadata_free(&meta);
        return status;
    }
    (*out)->meta = meta;
    (*out)->refs = 1;
    (*out)->process_fd = -1;
    (*out)->liveness_file = -1;
    return KVT_OK;
}

/* Connects on the progress thread: a command from a caller's thread, a direct call from a job. */
static kvt_status connect_conn(kvt_agent *agent, kvt_conn *conn, bool on_progress_thread) {
    if (!on_progress_thread) return kvt_command_call(&agent->commands, connect_call, conn);
    char detail[512] = "";
    kvt_status status = connect_call(agent, conn, detail, sizeof detail);
    return status == KVT_OK ? KVT_OK : kvt_fail(status, "%s", detail);
}

/* Loads `conn` (taking it) unless the same metadata is loaded already, and writes the peer and its
 * generation. Loads are serialised: by config_lock on a caller's thread, by the command order on the
 * progress thread (a job never takes config_lock: a caller holding it may be waiting for the thread). */
static kvt_status load_conn(kvt_agent *agent, kvt_conn *conn, bool on_progress_thread, uint32_t *out_peer,
                            uint64_t *out_generation) {
    pthread_mutex_lock(&agent->lock);
    kvt_peer *peer = find_peer_by_name_locked(agent, conn->meta.name);
    kvt_status status = compare_with_loaded_locked(peer, &conn->meta);
    if (status == KVT_OK) {
        *out_peer = peer->id;
        *out_generation = peer->generation;
    }
    pthread_mutex_unlock(&agent->lock);
    if (status != KVT_IN_PROGRESS) {
        kvt_metadata_free(&conn->meta);
        free(conn);
        return status;
    }
    status = connect_conn(agent, conn, on_progress_thread);
    bool wake = false;
    pthread_mutex_lock(&agent->lock);
    if (status == KVT_OK) status = install_conn_locked(agent, conn, &peer);
    if (status == KVT_OK) {
        *out_peer = peer->id;
        *out_generation = peer->generation;
        wake = kvt_peer_report_reconnected_locked(agent, peer);
    } else {
        kvt_conn_unref_locked(agent, conn); /* the progress thread closes what connect opened */
    }
    pthread_mutex_unlock(&agent->lock);
    if (wake) kvt_wake_consumer(&agent->delivery);
    return status;
}

kvt_status kvt_peer_load(uint32_t agent_id, const uint8_t *blob, uint64_t length, uint32_t *out_peer,
                         uint64_t *out_generation) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_peer_load", &agent);
    if (status != KVT_OK) return status;
    if (!out_peer || !out_generation)
        return kvt_agent_finish(
            agent, kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_peer_load: out_peer and out_generation must not be NULL"));
    kvt_conn *conn = NULL;
    status = new_conn(agent, "kvt_peer_load", blob, length, &conn);
    if (status == KVT_OK) {
        pthread_mutex_lock(&agent->config_lock);
        status = load_conn(agent, conn, false, out_peer, out_generation);
        pthread_mutex_unlock(&agent->config_lock);
    }
    return kvt_agent_finish(agent, status);
}

/* On the progress thread: the load a kvt_peer_load_begin job does. */
static kvt_status load_work(kvt_agent *agent, kvt_mem_job *job, char *detail, size_t detail_size) {
    kvt_status status = load_conn(agent, job->subject.conn, true, &job->peer, &job->generation);
    if (status != KVT_OK) snprintf(detail, detail_size, "%s", kvt_last_error_detail());
    return status;
}

kvt_status kvt_peer_load_begin(uint32_t agent_id, const uint8_t *blob, uint64_t length, uint64_t *out_job) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_peer_load_begin", &agent);
    if (status != KVT_OK) return status;
    if (!out_job)
        return kvt_agent_finish(agent, kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_peer_load_begin: out_job is NULL"));
    kvt_mem_job *job = NULL;
    status = kvt_job_new("kvt_peer_load_begin", &job);
    if (status == KVT_OK) status = new_conn(agent, "kvt_peer_load_begin", blob, length, &job->subject.conn);
    if (status == KVT_OK) {
        *out_job = kvt_job_start(agent, job, load_work);
        status = KVT_IN_PROGRESS;
    } else {
        free(job);
    }
    return kvt_agent_finish(agent, status);
}

kvt_status kvt_peer_find(uint32_t agent_id, const char *name, uint32_t *out_peer, uint64_t *out_generation) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_peer_find", &agent);
    if (status != KVT_OK) return status;
    if (!name) return kvt_agent_finish(agent, kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_peer_find: name is NULL"));
    pthread_mutex_lock(&agent->lock);
    const kvt_peer *peer = find_peer_by_name_locked(agent, name);
    if (!peer) {
        status = kvt_fail(KVT_ERR_NOT_FOUND, "kvt_peer_find: agent '%s' has no peer named '%.255s'", agent->name, name);
    } else {
        if (out_peer) *out_peer = peer->id;
        if (out_generation) *out_generation = peer->generation;
    }
    pthread_mutex_unlock(&agent->lock);
    return kvt_agent_finish(agent, status);
}

kvt_status kvt_peer_name(uint32_t agent_id, uint32_t peer_id, char *name, uint32_t capacity) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_peer_name", &agent);
    if (status != KVT_OK) return status;
    if (!name) return kvt_agent_finish(agent, kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_peer_name: name is NULL"));
    pthread_mutex_lock(&agent->lock);
    kvt_peer *peer = NULL;
    status = kvt_peer_lookup_locked(agent, "kvt_peer_name", peer_id, &peer);
    size_t length = status == KVT_OK ? strlen(peer->name) : 0;
    if (status == KVT_OK && capacity <= length)
        status = kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_peer_name: the name of peer %u needs capacity %zu (got %u)",
                          peer_id, length + 1, capacity);
    if (status == KVT_OK) memcpy(name, peer->name, length + 1);
    pthread_mutex_unlock(&agent->lock);
    return kvt_agent_finish(agent, status);
}

kvt_status kvt_peer_info(uint32_t agent_id, uint32_t peer_id, uint64_t *out_generation, uint32_t *out_state,
                         uint32_t *out_region_count) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_peer_info", &agent);
    if (status != KVT_OK) return status;
    pthread_mutex_lock(&agent->lock);
    kvt_peer *peer = NULL;
    status = kvt_peer_lookup_locked(agent, "kvt_peer_info", peer_id, &peer);
    if (status == KVT_OK) {
        if (out_generation) *out_generation = peer->generation;
        if (out_state) *out_state = peer_state(peer);
        if (out_region_count) *out_region_count = peer->conn ? peer->conn->meta.region_count : 0;
    }
    pthread_mutex_unlock(&agent->lock);
    return kvt_agent_finish(agent, status);
}

kvt_status kvt_peer_invalidate(uint32_t agent_id, uint32_t peer_id) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_peer_invalidate", &agent);
    if (status != KVT_OK) return status;
    pthread_mutex_lock(&agent->lock);
    kvt_peer *peer = NULL;
    status = kvt_peer_lookup_locked(agent, "kvt_peer_invalidate", peer_id, &peer);
    if (status == KVT_OK) {
        peer->generation++;
        if (peer->conn) kvt_conn_unref_locked(agent, peer->conn);
        peer->conn = NULL;
    }
    pthread_mutex_unlock(&agent->lock);
    return kvt_agent_finish(agent, status);
}

kvt_status kvt_peer_unload(uint32_t agent_id, uint32_t peer_id) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_peer_unload", &agent);
    if (status != KVT_OK) return status;
    pthread_mutex_lock(&agent->config_lock);
    pthread_mutex_lock(&agent->lock);
    kvt_peer *peer = NULL;
    status = kvt_peer_lookup_locked(agent, "kvt_peer_unload", peer_id, &peer);
    if (status == KVT_OK && peer->busy > 0)
        status = kvt_fail(KVT_ERR_BUSY, "kvt_peer_unload: peer %u ('%s') is used by %u operation(s) in progress",
                          peer_id, peer->name, peer->busy);
    if (status == KVT_OK) {
        for (uint32_t i = 0; i < agent->peer_count; i++)
            if (agent->peers[i] == peer) agent->peers[i] = agent->peers[--agent->peer_count];
        if (peer->conn) kvt_conn_unref_locked(agent, peer->conn);
        forget_locked(agent, peer);
        free(peer);
        kvt_counter_add(&agent->counters, KVT_COUNTER_LIVE_PEERS, -1);
    }
    pthread_mutex_unlock(&agent->lock);
    pthread_mutex_unlock(&agent->config_lock);
    return kvt_agent_finish(agent, status);
}

kvt_status kvt_peer_regions(uint32_t agent_id, uint32_t peer_id, uint32_t capacity, uint32_t *ids, uint64_t *addresses,
                            uint64_t *lengths, uint32_t *kinds, uint32_t *devices, uint32_t *out_count) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_peer_regions", &agent);
    if (status != KVT_OK) return status;
    if (!out_count)
        return kvt_agent_finish(agent, kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_peer_regions: out_count is NULL"));
    pthread_mutex_lock(&agent->lock);
    kvt_peer *peer = NULL;
    status = kvt_peer_lookup_locked(agent, "kvt_peer_regions", peer_id, &peer);
    if (status == KVT_OK) {
        const kvt_metadata *meta = peer->conn ? &peer->conn->meta : NULL;
        uint32_t count = meta ? meta->region_count : 0;
        for (uint32_t i = 0; i < count && i < capacity; i++) {
            const kvt_remote_region *region = &meta->regions[i];
            if (ids) ids[i] = region->id;
            if (addresses) addresses[i] = region->address;
            if (lengths) lengths[i] = region->length;
            if (kinds) kinds[i] = region->kind;
            if (devices) devices[i] = region->device;
        }
        *out_count = count;
    }
    pthread_mutex_unlock(&agent->lock);
    return kvt_agent_finish(agent, status);
}

typedef struct {
    kvt_conn *conn;
    char *text;
    size_t length;
} describe_args;

kvt_status kvt_conn_check_requests(const char *call, const kvt_conn *conn, const uint32_t *remote_slots,
                                   uint32_t count) {
    for (uint32_t i = 0; conn->answers_lost && i < count; i++) {
        const kvt_remote_region *region = &conn->meta.regions[remote_slots[i]];
        if (region->kind == KVT_MEM_VRAM || region->mapped) continue;
        return kvt_fail(
            KVT_ERR_NOT_SUPPORTED,
            "%s: region %u of peer '%s' is not mapped here, so it moves through UCX requests, and UCX brings "
            "nothing back from that peer: it is in another pid namespace, reached over shared memory "
            "because one side has no network transport in UCX_TLS",
            call, region->id, conn->meta.name);
    }
    return KVT_OK;
}

void kvt_conn_describe(kvt_agent *agent, kvt_conn *conn) {
    char *text = NULL;
    size_t length = 0;
    FILE *out = open_memstream(&text, &length);
    if (!out) return; /* out of memory: kvt_peer_transport asks this thread */
    agent->backend->describe(agent, conn, out);
    fclose(out);
    pthread_mutex_lock(&agent->lock);
    char *replaced = conn->description;
    conn->description = text;
    pthread_mutex_unlock(&agent->lock);
    free(replaced);
}

/* Writes `source` (`length` bytes) as kvt_peer_transport answers: the length, and as much as fits, terminated. */
static void write_description(const char *source, size_t length, char *text, uint32_t capacity, uint32_t *out_length) {
    *out_length = (uint32_t)length;
    if (capacity == 0) return;
    size_t n = length < capacity - 1 ? length : capacity - 1;
    memcpy(text, source, n);
    text[n] = '\0';
}

static kvt_status describe_call(kvt_agent *agent, void *arg, char *detail, size_t detail_size) {
    describe_args *args = arg;
    FILE *out = open_memstream(&args->text, &args->length);
    if (!out) {
        snprintf(detail, detail_size, "kvt_peer_transport: out of memory");
        return KVT_ERR_NO_MEMORY;
    }
    agent->backend->describe(agent, args->conn, out);
    fclose(out);
    return KVT_OK;
}

kvt_status kvt_peer_transport(uint32_t agent_id, uint32_t peer_id, char *text, uint32_t capacity,
                              uint32_t *out_length) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_peer_transport", &agent);
    if (status != KVT_OK) return status;
    if (!out_length || (capacity > 0 && !text))
        return kvt_agent_finish(
            agent, kvt_fail(KVT_ERR_INVALID_PARAM,
                            "kvt_peer_transport: out_length and (capacity %u > 0) text must not be NULL", capacity));
    pthread_mutex_lock(&agent->lock);
    kvt_peer *peer = NULL;
    status = kvt_peer_lookup_locked(agent, "kvt_peer_transport", peer_id, &peer);
    if (status == KVT_OK && !peer->conn)
        status = kvt_fail(KVT_ERR_NOT_FOUND, "kvt_peer_transport: peer %u ('%s') was invalidated", peer_id, peer->name);
    /* Kept since its last change; a connection that failed (its endpoint closing) is described afresh. */
    const char *kept = status == KVT_OK && !atomic_load(&peer->conn->failed) ? peer->conn->description : NULL;
    if (kept) write_description(kept, strlen(kept), text, capacity, out_length);
    describe_args args = {.conn = status == KVT_OK && !kept ? peer->conn : NULL};
    if (args.conn) args.conn->refs++;
    pthread_mutex_unlock(&agent->lock);
    if (args.conn) {
        status = kvt_command_call(&agent->commands, describe_call, &args);
        if (status == KVT_OK) write_description(args.text, args.length, text, capacity, out_length);
        free(args.text);
        pthread_mutex_lock(&agent->lock);
        kvt_conn_unref_locked(agent, args.conn);
        pthread_mutex_unlock(&agent->lock);
    }
    return kvt_agent_finish(agent, status);
}
