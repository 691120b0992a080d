/* Heartbeat: a peer that answers nothing — a SIGSTOPped source process over UCX (tcp, shared memory, and in
 * another pid namespace through its network address), a loopback agent whose progress thread is stalled — is
 * reported UNRESPONSIVE once, with a read of it
 * still in flight and left as it is, and RESPONSIVE once it answers again (the read then completes); a
 * live busy peer is never reported; a watched idle peer is probed, an unwatched one is not. */
#include "harness.h"

#include <signal.h>

#define SEED 21u
#define PIECES 64u
#define MAX_EVENTS 16u

static uint64_t piece_bytes(void) { return test_under_valgrind ? 16u << 10 : 128u << 10; }

/* The peer under test: a source process (ucx) or an agent of this process (loopback). */
typedef struct {
    source_process process; /* ucx */
    uint32_t agent, region; /* loopback */
    uint8_t *memory;
    uint8_t *blob;
    uint64_t blob_length;
} peer_source;

static void source_open(peer_source *s, uint64_t length, bool caller_memory, bool new_pid_namespace) {
    *s = (peer_source){0};
    if (test_backend == KVT_BACKEND_UCX) {
        source_options options = {
            .length = length, .caller_memory = caller_memory, .new_pid_namespace = new_pid_namespace, .seed = SEED};
        CHECK(source_spawn(&options, &s->process), "spawn the source");
        s->blob = s->process.blob;
        s->blob_length = s->process.length;
        return;
    }
    s->agent = make_agent("heartbeat-source");
    s->region = alloc_region(s->agent, length, &s->memory);
    fill_pattern(s->memory, length, SEED);
    CHECK_OK(kvt_agent_metadata(s->agent, NULL, 0, &s->blob_length));
    s->blob = malloc(s->blob_length);
    CHECK(s->blob != NULL, "out of memory");
    CHECK_OK(kvt_agent_metadata(s->agent, s->blob, s->blob_length, &s->blob_length));
}

/* The source stops answering: SIGSTOP (ucx), its progress thread stalled (loopback). */
static void source_stop(peer_source *s) {
    if (test_backend == KVT_BACKEND_UCX) {
        source_signal(&s->process, SIGSTOP);
        source_wait_stopped(&s->process);
    } else {
        CHECK_OK(kvt_fault_stall_progress(s->agent, 1));
    }
}

static void source_resume(peer_source *s) {
    if (test_backend == KVT_BACKEND_UCX)
        source_signal(&s->process, SIGCONT);
    else
        CHECK_OK(kvt_fault_stall_progress(s->agent, 0));
}

static void source_close(peer_source *s) {
    if (test_backend == KVT_BACKEND_UCX) {
        source_end(&s->process);
        return;
    }
    free(s->blob);
    free_region(s->agent, s->region, s->memory);
    CHECK_OK(kvt_agent_destroy(s->agent));
}

typedef struct {
    uint32_t agent, expected, count;
    uint32_t peers[MAX_EVENTS], kinds[MAX_EVENTS];
    uint64_t silences[MAX_EVENTS];
} event_log;

/* Takes every report pending; done once `expected` were seen. */
static bool events_seen(void *context) {
    event_log *log = context;
    uint32_t peers[MAX_EVENTS], kinds[MAX_EVENTS], n = 0;
    uint64_t silences[MAX_EVENTS];
    CHECK_OK(kvt_peer_events_poll(log->agent, MAX_EVENTS, peers, kinds, silences, &n));
    CHECK(log->count + n <= MAX_EVENTS, "%u reports", log->count + n);
    for (uint32_t i = 0; i < n; i++, log->count++) {
        log->peers[log->count] = peers[i];
        log->kinds[log->count] = kinds[i];
        log->silences[log->count] = silences[i];
    }
    return log->count >= log->expected;
}

static void wait_events(event_log *log, uint32_t expected, const char *what) {
    log->expected = expected;
    wait_until(log->agent, events_seen, log, what, WAIT_DEADLINE_MS);
    CHECK(log->count == expected, "%u reports, expected %u", log->count, expected);
}

static uint64_t post_pieces(uint32_t agent, uint32_t peer, uint64_t generation, uint32_t region) {
    uint32_t index[PIECES];
    uint64_t offset[PIECES], length[PIECES];
    for (uint32_t i = 0; i < PIECES; i++) {
        index[i] = 0;
        offset[i] = (uint64_t)(PIECES - 1 - i) * piece_bytes(); /* descending: none merge */
        length[i] = piece_bytes();
    }
    uint64_t op;
    const uint32_t remote_region = 1;
    CHECK_OK(kvt_xfer_post(agent, KVT_XFER_READ, peer, generation, PIECES, index, offset, index, offset, length, 1,
                           &region, 1, &remote_region, NULL, 0, &op));
    return op;
}

/*
 * A read is in flight when the source stops answering: ucx issues its first pieces, the source is
 * SIGSTOPped, then the rest goes out as requests the stopped source never answers; loopback holds the
 * read (the initiator copies loopback bytes itself) and stalls the source's progress thread.
 */
static uint64_t read_in_flight_then_stop(uint32_t agent, uint32_t peer, uint64_t generation, uint32_t region,
                                         peer_source *source) {
    if (test_backend == KVT_BACKEND_LOOPBACK) {
        CHECK_OK(kvt_fault_delay_completions(agent, KVT_DELAY_FOREVER));
        uint64_t op = post_pieces(agent, peer, generation, region);
        wait_counter_at_least(agent, KVT_COUNTER_HEARTBEAT_ANSWERS, 1); /* judged once it answered */
        source_stop(source);
        return op;
    }
    uint64_t first = 4 * piece_bytes();
    CHECK_OK(kvt_fault_pause_issue(agent, first));
    uint64_t op = post_pieces(agent, peer, generation, region);
    op_progress moving = {.agent = agent, .op = op, .bytes = first};
    wait_until(agent, op_moved_while_in_progress, &moving, "the read's first pieces", WAIT_DEADLINE_MS);
    wait_counter_at_least(agent, KVT_COUNTER_HEARTBEAT_ANSWERS, 1); /* judged once it answered */
    source_stop(source);
    CHECK_OK(kvt_fault_clear(agent));
    wait_counter_at_least(agent, KVT_COUNTER_INFLIGHT_REQUESTS, 1);
    return op;
}

/* How the source is reached: UCX_TLS for both sides (NULL: UCX's default), whether the source reads caller memory
 * and lives in a new pid namespace, and what the path to it mentions. */
typedef struct {
    const char *tls;
    bool caller_memory, new_pid_namespace;
    const char *path;
} source_path;

static void stopped_source_is_reported_then_responsive_again(source_path how) {
    if (how.tls) setenv("UCX_TLS", how.tls, 1);
    peer_source source;
    uint64_t total = (uint64_t)PIECES * piece_bytes();
    source_open(&source, total, how.caller_memory, how.new_pid_namespace);
    uint32_t agent = make_agent("heartbeat-destination");
    unsetenv("UCX_TLS");
    /* Two seconds of grace: a live source answers well within them, however loaded the machine (with
     * 500 ms, a resumed source under ASan on a 2-core machine at load 8 was reported once more). */
    const uint32_t interval_ms = 50, misses = 40;
    CHECK_OK(kvt_agent_set_heartbeat(agent, interval_ms, misses));
    uint8_t *memory;
    uint32_t region = alloc_region(agent, total, &memory);
    uint32_t peer;
    uint64_t generation;
    CHECK_OK(kvt_peer_load(agent, source.blob, source.blob_length, &peer, &generation));
    CHECK(peer_transport_mentions(agent, peer, how.path), "probes and reads go over %s", how.path);

    uint64_t op = read_in_flight_then_stop(agent, peer, generation, region, &source);
    event_log log = {.agent = agent};
    wait_events(&log, 1, "the stopped source to be reported unresponsive");
    CHECK(log.peers[0] == peer && log.kinds[0] == KVT_PEER_EVENT_UNRESPONSIVE, "report of peer %u, kind %u",
          log.peers[0], log.kinds[0]);
    char name[KVT_MAX_NAME + 1];
    CHECK_OK(kvt_peer_name(agent, log.peers[0], name, sizeof name));
    CHECK(strcmp(name, test_backend == KVT_BACKEND_UCX ? "source-process" : "heartbeat-source") == 0, "peer '%s'",
          name);
    CHECK(log.silences[0] >= (uint64_t)interval_ms * misses, "silent %llu ms when reported (%u intervals of %u ms)",
          (unsigned long long)log.silences[0], misses, interval_ms);
    CHECK(counter(agent, KVT_COUNTER_UNRESPONSIVE_PEERS) == 1, "one unresponsive peer counted");
    /* A report only: the read is still in flight and the peer still usable. */
    int32_t status = KVT_OK;
    uint32_t state = KVT_PEER_DISCONNECTED;
    CHECK_OK(kvt_xfer_status(agent, op, &status, NULL, NULL));
    CHECK_OK(kvt_peer_info(agent, peer, NULL, &state, NULL));
    CHECK(status == KVT_IN_PROGRESS && state == KVT_PEER_READY, "read %s, peer state %u after the report",
          kvt_status_name(status), state);

    source_resume(&source);
    wait_events(&log, 2, "the resumed source to be reported responsive");
    CHECK(log.peers[1] == peer && log.kinds[1] == KVT_PEER_EVENT_RESPONSIVE, "report of peer %u, kind %u", log.peers[1],
          log.kinds[1]);
    CHECK(log.silences[1] >= log.silences[0], "silent %llu ms until it answered, %llu when reported",
          (unsigned long long)log.silences[1], (unsigned long long)log.silences[0]);
    CHECK(counter(agent, KVT_COUNTER_UNRESPONSIVE_PEERS) == 0, "no unresponsive peer counted");
    CHECK_OK(kvt_fault_clear(agent));
    uint64_t done = 0;
    CHECK(wait_op(agent, op, &done) == KVT_OK && done == total, "the read completed once the source answered");
    CHECK(check_pattern(memory, total, SEED), "the bytes are the source's");
    CHECK_OK(kvt_xfer_release(agent, op));
    events_seen(&log);
    CHECK(log.count == 2, "no other report (%u)", log.count);

    source_close(&source);
    CHECK_OK(kvt_peer_unload(agent, peer));
    free_region(agent, region, memory);
    CHECK_OK(kvt_agent_destroy(agent));
}

static void stopped_source_over_tcp(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "tcp is a UCX transport (the loopback case is stalled_loopback_source)");
    stopped_source_is_reported_then_responsive_again((source_path){.tls = "tcp", .path = "tcp/lo"});
}

/* Caller memory: the reader's gets go through active messages the stopped source never serves. */
static void stopped_source_over_shared_memory(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "shared memory is a UCX transport (the loopback case is stalled_loopback_source)");
    stopped_source_is_reported_then_responsive_again((source_path){.caller_memory = true, .path = "sysv/memory"});
}

/* A source on this host in another pid namespace (a container beside this one) is reached through its network
 * address, where its answers come back: it is judged like any other, and the read of its caller memory completes. */
static void stopped_source_in_another_pid_namespace(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback peers live in one process");
    stopped_source_is_reported_then_responsive_again(
        (source_path){.caller_memory = true,
                      .new_pid_namespace = true,
                      .path = "in another pid namespace, reached through its network address"});
}

static void stalled_loopback_source(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_LOOPBACK, "the ucx cases stop a source process");
    stopped_source_is_reported_then_responsive_again((source_path){.path = "loopback: memmove"});
}

typedef struct {
    uint32_t agent, peer, region;
    uint64_t generation, probes;
} busy_reader;

/* One batch read, checked, per check; done once the reader sent `probes` probes and had them answered. */
static bool read_until_probed(void *context) {
    busy_reader *reader = context;
    uint64_t op = post_pieces(reader->agent, reader->peer, reader->generation, reader->region);
    CHECK(wait_op(reader->agent, op, NULL) == KVT_OK, "a read of the live source");
    CHECK_OK(kvt_xfer_release(reader->agent, op));
    return counter(reader->agent, KVT_COUNTER_HEARTBEATS_SENT) >= reader->probes &&
           counter(reader->agent, KVT_COUNTER_HEARTBEAT_ANSWERS) >= reader->probes;
}

/* Reads one batch after another for 150 probe rounds (over tcp the source's progress thread serves every
 * get): the live source answers the probes and is never reported. The reader also watches it, so that
 * rounds between two reads probe it too. 100 rounds of grace (2 s) keep a loaded machine's scheduling out
 * of it; a source that answered nothing would be reported after them, within the run. */
static void a_live_busy_peer_is_never_reported(void) {
    if (test_backend == KVT_BACKEND_UCX) setenv("UCX_TLS", "tcp", 1);
    peer_source source;
    uint64_t total = (uint64_t)PIECES * piece_bytes();
    source_open(&source, total, false, false);
    uint32_t agent = make_agent("heartbeat-busy");
    unsetenv("UCX_TLS");
    CHECK_OK(kvt_agent_set_heartbeat(agent, 20, 100));
    uint8_t *memory;
    busy_reader reader = {.agent = agent, .region = alloc_region(agent, total, &memory), .probes = 150};
    CHECK_OK(kvt_peer_load(agent, source.blob, source.blob_length, &reader.peer, &reader.generation));
    CHECK_OK(kvt_peer_watch(agent, reader.peer, 1));
    wait_until(0, read_until_probed, &reader, "150 probes sent and answered while reading", WAIT_DEADLINE_MS);
    event_log log = {.agent = agent};
    events_seen(&log);
    CHECK(log.count == 0, "the live source was reported (%u reports, kind %u)", log.count, log.kinds[0]);
    CHECK(counter(agent, KVT_COUNTER_UNRESPONSIVE_PEERS) == 0, "no unresponsive peer");
    source_close(&source);
    CHECK_OK(kvt_peer_unload(agent, reader.peer));
    free_region(agent, reader.region, memory);
    CHECK_OK(kvt_agent_destroy(agent));
}

typedef struct {
    uint32_t agent;
    uint64_t probes;
} probe_count;

static bool probes_sent(void *context) {
    const probe_count *count = context;
    return counter(count->agent, KVT_COUNTER_HEARTBEATS_SENT) >= count->probes;
}

static void wait_probes(uint32_t agent, uint64_t probes) {
    probe_count count = {.agent = agent, .probes = probes};
    wait_until(0, probes_sent, &count, "probes", WAIT_DEADLINE_MS);
}

/* Two readers of one idle source: the one watching it probes, the other (its own clock) sends none;
 * then the other way round. A probe round already under way when the watch ends may still send one. */
static void a_watched_idle_peer_is_probed_an_unwatched_one_is_not(void) {
    peer_source source;
    source_open(&source, piece_bytes(), false, false);
    uint32_t watching = make_agent("heartbeat-watching"), idle = make_agent("heartbeat-idle");
    CHECK_OK(kvt_agent_set_heartbeat(watching, 10, KVT_HEARTBEAT_MAX_MISSES));
    CHECK_OK(kvt_agent_set_heartbeat(idle, 10, KVT_HEARTBEAT_MAX_MISSES));
    uint32_t watched_peer, idle_peer;
    uint64_t generation;
    CHECK_OK(kvt_peer_load(watching, source.blob, source.blob_length, &watched_peer, &generation));
    CHECK_OK(kvt_peer_load(idle, source.blob, source.blob_length, &idle_peer, &generation));

    CHECK_OK(kvt_peer_watch(watching, watched_peer, 1));
    wait_probes(watching, 20);
    wait_counter_at_least(watching, KVT_COUNTER_HEARTBEAT_ANSWERS, 20);
    CHECK(counter(idle, KVT_COUNTER_HEARTBEATS_SENT) == 0, "the unwatched idle peer was probed %llu times",
          (unsigned long long)counter(idle, KVT_COUNTER_HEARTBEATS_SENT));

    CHECK_OK(kvt_peer_watch(watching, watched_peer, 0));
    uint64_t before = counter(watching, KVT_COUNTER_HEARTBEATS_SENT);
    CHECK_OK(kvt_peer_watch(idle, idle_peer, 1));
    wait_probes(idle, 20);
    uint64_t after = counter(watching, KVT_COUNTER_HEARTBEATS_SENT);
    CHECK(after <= before + 1, "%llu probes after the watch ended", (unsigned long long)(after - before));
    event_log log = {.agent = watching};
    events_seen(&log);
    CHECK(log.count == 0, "no report of the live source");

    source_close(&source);
    CHECK_OK(kvt_peer_unload(watching, watched_peer));
    CHECK_OK(kvt_peer_unload(idle, idle_peer));
    CHECK_OK(kvt_agent_destroy(watching));
    CHECK_OK(kvt_agent_destroy(idle));
}

/* A peer unloaded while reported unresponsive takes its unread report and its count with it. */
static void an_unloaded_peer_takes_its_reports_along(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_LOOPBACK, "the ucx cases cover the reports; this is bookkeeping");
    peer_source source;
    source_open(&source, piece_bytes(), false, false);
    uint32_t agent = make_agent("heartbeat-unload");
    CHECK_OK(kvt_agent_set_heartbeat(agent, 10, 2));
    uint32_t peer;
    uint64_t generation;
    CHECK_OK(kvt_peer_load(agent, source.blob, source.blob_length, &peer, &generation));
    CHECK_OK(kvt_peer_watch(agent, peer, 1));
    wait_counter_at_least(agent, KVT_COUNTER_HEARTBEAT_ANSWERS, 1);
    source_stop(&source);
    wait_counter_at_least(agent, KVT_COUNTER_UNRESPONSIVE_PEERS, 1);
    CHECK_STATUS(KVT_OK, kvt_agent_wait(agent, 0)); /* the report is pending */
    CHECK_OK(kvt_peer_unload(agent, peer));
    CHECK(counter(agent, KVT_COUNTER_UNRESPONSIVE_PEERS) == 0, "the unloaded peer is no longer counted");
    CHECK_STATUS(KVT_ERR_TIMEOUT, kvt_agent_wait(agent, 0));
    event_log log = {.agent = agent};
    events_seen(&log);
    CHECK(log.count == 0, "%u reports of an unloaded peer", log.count);
    source_resume(&source);
    source_close(&source);
    CHECK_OK(kvt_agent_destroy(agent));
}

static void bad_settings_are_refused(void) {
    uint32_t agent = make_agent("heartbeat-settings");
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_agent_set_heartbeat(agent, KVT_HEARTBEAT_MIN_INTERVAL_MS - 1, 3));
    CHECK_DETAIL("interval_ms 9 is outside 10..60000");
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_agent_set_heartbeat(agent, KVT_HEARTBEAT_MAX_INTERVAL_MS + 1, 3));
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_agent_set_heartbeat(agent, 100, 0));
    CHECK_DETAIL("misses 0 is outside 1..1000");
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_agent_set_heartbeat(agent, 100, KVT_HEARTBEAT_MAX_MISSES + 1));
    CHECK_OK(kvt_agent_set_heartbeat(agent, KVT_HEARTBEAT_MIN_INTERVAL_MS, KVT_HEARTBEAT_MAX_MISSES));
    char name[KVT_MAX_NAME + 1];
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_peer_name(agent, 7, name, sizeof name));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_peer_watch(agent, 7, 1));
    CHECK_DETAIL("has no peer 7");
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_peer_watch(agent, 7, 2));
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_fault_stall_progress(agent, 2));
    uint32_t n = 0;
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_peer_events_poll(agent, 4, NULL, NULL, NULL, &n));
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_peer_events_poll(agent, 0, NULL, NULL, NULL, NULL));
    CHECK_OK(kvt_peer_events_poll(agent, 0, NULL, NULL, NULL, &n));
    CHECK(n == 0, "no report");
    CHECK_OK(kvt_agent_destroy(agent));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_agent_set_heartbeat(agent, 100, 3));
}

/* A live, watched source in another pid namespace (only: the network namespace is this one, so UCX's
 * wake-up socket is reachable) with no network transport on either side (UCX_TLS=sm,self), so over shared memory:
 * UCX 1.13 delivers none of its answers, so it is never judged (not reported, however many probes go unanswered),
 * and unloading it force-closes the endpoint its probes still wait in (a graceful close would wait for them), also
 * once it is killed. */
static void a_peer_that_never_answered_is_not_judged(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback peers live in one process");
    source_options options = {.length = piece_bytes(), .new_pid_namespace = true, .seed = SEED};
    source_process source;
    setenv("UCX_TLS", "sm,self", 1);
    bool spawned = source_spawn(&options, &source);
    uint32_t agent = spawned ? make_agent("heartbeat-namespace") : 0;
    unsetenv("UCX_TLS");
    if (!spawned) return;
    CHECK_OK(kvt_agent_set_heartbeat(agent, 20, 10));
    uint32_t peer;
    uint64_t generation;
    CHECK_OK(kvt_peer_load(agent, source.blob, source.length, &peer, &generation));
    CHECK(peer_transport_mentions(agent, peer, "sysv/memory"), "active messages over shared memory");
    CHECK_OK(kvt_peer_watch(agent, peer, 1));
    wait_probes(agent, 50); /* five times the miss count */
    CHECK(counter(agent, KVT_COUNTER_HEARTBEAT_ANSWERS) == 0, "%llu answers across the namespaces",
          (unsigned long long)counter(agent, KVT_COUNTER_HEARTBEAT_ANSWERS));
    event_log log = {.agent = agent};
    events_seen(&log);
    CHECK(log.count == 0, "a peer that never answered was reported (%u reports)", log.count);
    source_end(&source);
    CHECK_OK(kvt_peer_unload(agent, peer));
    CHECK_OK(kvt_agent_destroy(agent));
}

/* A watched peer whose connection the transport failed (here: a notification to its destroyed loopback
 * agent) can answer no probe: it is reported at the next round, long before its misses would count
 * (60 ms × 1000 misses is past the wait). */
static void a_watched_peer_whose_connection_failed_is_reported(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_LOOPBACK, "a notification to a destroyed loopback agent fails the connection at once");
    uint32_t source = make_agent("heartbeat-failed-source");
    uint32_t agent = make_agent("heartbeat-failed-reader");
    CHECK_OK(kvt_agent_set_heartbeat(agent, 60, KVT_HEARTBEAT_MAX_MISSES));
    uint64_t generation;
    uint32_t peer = load_peer(agent, source, &generation);
    CHECK_OK(kvt_peer_watch(agent, peer, 1));
    CHECK_OK(kvt_agent_destroy(source));
    CHECK_STATUS(KVT_ERR_REMOTE_DISCONNECT, kvt_notify_send(agent, peer, generation, (const uint8_t *)"x", 1));
    event_log log = {.agent = agent};
    wait_events(&log, 1, "the report of the peer whose connection failed");
    CHECK(log.peers[0] == peer && log.kinds[0] == KVT_PEER_EVENT_DISCONNECTED, "report of peer %u, kind %u",
          log.peers[0], log.kinds[0]);
    CHECK_OK(kvt_peer_unload(agent, peer));
    CHECK_OK(kvt_agent_destroy(agent));
}

/* A watched source whose process dies before it ever answered a probe on this connection (the demo's
 * rank killed at a pin request it received while the probe was still on its way): the process is gone,
 * so it is reported at once, although a peer that never answered is otherwise not judged. Over shared
 * memory UCX 1.13 notices no such death by itself (probes sit unread in the dead process's queue). */
static void a_killed_peer_that_never_answered_is_reported(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback peers live in one process");
    source_options options = {.length = piece_bytes(), .seed = SEED};
    source_process source;
    CHECK(source_spawn(&options, &source), "spawn the source");
    uint32_t agent = make_agent("heartbeat-killed");
    CHECK_OK(kvt_agent_set_heartbeat(agent, 20, KVT_HEARTBEAT_MAX_MISSES));
    uint32_t peer;
    uint64_t generation;
    CHECK_OK(kvt_peer_load(agent, source.blob, source.length, &peer, &generation));
    source_signal(&source, SIGSTOP);
    source_wait_stopped(&source);
    CHECK_OK(kvt_peer_watch(agent, peer, 1));
    wait_probes(agent, 3);
    CHECK(counter(agent, KVT_COUNTER_HEARTBEAT_ANSWERS) == 0, "the stopped source answered");
    source_end(&source);
    /* Well within a pin's answer timeout (5 s), long before UCX's own keepalive would see the death. */
    event_log log = {.agent = agent, .expected = 1};
    wait_until(agent, events_seen, &log, "the report of the killed source", 10000);
    CHECK(log.count == 1 && log.peers[0] == peer && log.kinds[0] == KVT_PEER_EVENT_PROCESS_ENDED,
          "%u reports, the first of peer %u, kind %u", log.count, log.peers[0], log.kinds[0]);
    CHECK_OK(kvt_peer_unload(agent, peer));
    CHECK_OK(kvt_agent_destroy(agent));
}

/* A watched loopback peer whose agent is destroyed before it ever answered a probe (the demo's rank
 * closed by the pin request it read): the probe finds no target, which fails the connection, and the
 * peer is reported at the next round (60 ms × 1000 misses is past the wait). */
static void a_watched_peer_destroyed_before_answering_is_reported(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_LOOPBACK, "over UCX a killed process is judged by its pid");
    uint32_t source = make_agent("heartbeat-gone-source");
    uint32_t agent = make_agent("heartbeat-gone-reader");
    CHECK_OK(kvt_agent_set_heartbeat(agent, 60, KVT_HEARTBEAT_MAX_MISSES));
    uint64_t generation;
    uint32_t peer = load_peer(agent, source, &generation);
    CHECK_OK(kvt_agent_destroy(source));
    CHECK_OK(kvt_peer_watch(agent, peer, 1));
    event_log log = {.agent = agent, .expected = 1};
    wait_until(agent, events_seen, &log, "the report of the destroyed source", 10000);
    CHECK(log.count == 1 && log.peers[0] == peer && log.kinds[0] == KVT_PEER_EVENT_DISCONNECTED,
          "%u reports, the first of peer %u, kind %u", log.count, log.peers[0], log.kinds[0]);
    CHECK(counter(agent, KVT_COUNTER_HEARTBEAT_ANSWERS) == 0, "the destroyed source answered");
    CHECK_OK(kvt_peer_unload(agent, peer));
    CHECK_OK(kvt_agent_destroy(agent));
}

/* A peer reported unresponsive whose metadata is loaded again (a new incarnation: a new connection) is reported
 * RELOADED at once, with no silence, counts as unresponsive no more, and is judged afresh: the failure of its new
 * connection is reported in turn. */
static void a_reloaded_peer_is_judged_afresh(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_LOOPBACK, "a destroyed loopback agent's name is free again at once");
    uint32_t source = make_agent("heartbeat-reloaded-source");
    uint32_t agent = make_agent("heartbeat-reloaded-reader");
    CHECK_OK(kvt_agent_set_heartbeat(agent, 20, KVT_HEARTBEAT_MAX_MISSES));
    uint64_t generation, reloaded_generation;
    uint32_t peer = load_peer(agent, source, &generation);
    CHECK_OK(kvt_peer_watch(agent, peer, 1));
    CHECK_OK(kvt_agent_destroy(source));
    event_log log = {.agent = agent};
    wait_events(&log, 1, "the report of the destroyed source");
    CHECK(log.kinds[0] == KVT_PEER_EVENT_DISCONNECTED, "first report of kind %u", log.kinds[0]);
    CHECK(counter(agent, KVT_COUNTER_UNRESPONSIVE_PEERS) == 1, "one unresponsive peer counted");

    source = make_agent("heartbeat-reloaded-source");
    CHECK(load_peer(agent, source, &reloaded_generation) == peer && reloaded_generation > generation,
          "the same peer, its generation %llu after %llu", (unsigned long long)reloaded_generation,
          (unsigned long long)generation);
    wait_events(&log, 2, "the report of the reload");
    CHECK(log.peers[1] == peer && log.kinds[1] == KVT_PEER_EVENT_RELOADED && log.silences[1] == 0,
          "report of peer %u, kind %u, silent %llu ms", log.peers[1], log.kinds[1],
          (unsigned long long)log.silences[1]);
    CHECK(counter(agent, KVT_COUNTER_UNRESPONSIVE_PEERS) == 0, "no unresponsive peer counted");

    CHECK_OK(kvt_agent_destroy(source));
    wait_events(&log, 3, "the report of the reloaded source destroyed in turn");
    CHECK(log.peers[2] == peer && log.kinds[2] == KVT_PEER_EVENT_DISCONNECTED, "report of peer %u, kind %u",
          log.peers[2], log.kinds[2]);
    CHECK_OK(kvt_peer_unload(agent, peer));
    CHECK_OK(kvt_agent_destroy(agent));
}

typedef struct {
    event_log log;
    uint32_t peer;
} rewatched_peer;

/* Watches the peer again, then takes the reports pending; done once one was seen. */
static bool rewatch_until_reported(void *context) {
    rewatched_peer *rewatched = context;
    CHECK_OK(kvt_peer_watch(rewatched->log.agent, rewatched->peer, 1));
    return events_seen(&rewatched->log);
}

/* Watching a watched peer again changes nothing (the pin client watches its source at each pin request): a stalled
 * source watched again between every two rounds is still reported once its misses are counted. */
static void a_repeated_watch_does_not_restart_the_judgement(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_LOOPBACK, "the stall is a fault of a loopback agent in this process");
    uint32_t source = make_agent("heartbeat-rewatched-source");
    uint32_t agent = make_agent("heartbeat-rewatched-reader");
    CHECK_OK(kvt_agent_set_heartbeat(agent, 20, 10));
    uint64_t generation;
    rewatched_peer rewatched = {.log = {.agent = agent, .expected = 1}, .peer = load_peer(agent, source, &generation)};
    CHECK_OK(kvt_peer_watch(agent, rewatched.peer, 1));
    wait_counter_at_least(agent, KVT_COUNTER_HEARTBEAT_ANSWERS, 1); /* judged once it answered */
    CHECK_OK(kvt_fault_stall_progress(source, 1));
    wait_until(agent, rewatch_until_reported, &rewatched, "the report of the stalled source watched again and again",
               WAIT_DEADLINE_MS);
    CHECK(rewatched.log.count == 1 && rewatched.log.kinds[0] == KVT_PEER_EVENT_UNRESPONSIVE &&
              rewatched.log.silences[0] >= 20 * 10,
          "%u reports, the first of kind %u, silent %llu ms", rewatched.log.count, rewatched.log.kinds[0],
          (unsigned long long)rewatched.log.silences[0]);
    CHECK_OK(kvt_fault_stall_progress(source, 0));
    CHECK_OK(kvt_peer_unload(agent, rewatched.peer));
    CHECK_OK(kvt_agent_destroy(source));
    CHECK_OK(kvt_agent_destroy(agent));
}

/* Rounds on demand: a held heartbeat probes and counts misses only in the rounds asked for, each one run when the
 * call returns, so the report comes in the round that counts the last miss; cleared, it is back on its clock. */
static void heartbeat_rounds_run_on_demand(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_LOOPBACK, "the stall is a fault of a loopback agent in this process");
    uint32_t source = make_agent("heartbeat-rounds-source");
    uint32_t agent = make_agent("heartbeat-rounds-reader");
    CHECK_OK(kvt_agent_set_heartbeat(agent, KVT_HEARTBEAT_MIN_INTERVAL_MS, 3));
    CHECK_OK(kvt_fault_heartbeat_rounds(agent, 0));
    uint64_t generation;
    uint32_t peer = load_peer(agent, source, &generation);
    CHECK_OK(kvt_peer_watch(agent, peer, 1));
    CHECK_OK(kvt_fault_heartbeat_rounds(agent, 1));
    CHECK(counter(agent, KVT_COUNTER_HEARTBEATS_SENT) == 1, "%llu probes after one round",
          (unsigned long long)counter(agent, KVT_COUNTER_HEARTBEATS_SENT));
    wait_counter_at_least(agent, KVT_COUNTER_HEARTBEAT_ANSWERS, 1); /* judged once it answered */
    CHECK_OK(kvt_fault_stall_progress(source, 1));
    CHECK(kvt_fault_heartbeat_rounds(source, 1) == KVT_ERR_NOT_ALLOWED, "rounds asked of a stalled agent");
    /* The first round after the answer probes afresh; each later one counts a miss: two so far. */
    CHECK_OK(kvt_fault_heartbeat_rounds(agent, 3));
    event_log log = {.agent = agent};
    events_seen(&log);
    CHECK(log.count == 0 && counter(agent, KVT_COUNTER_HEARTBEATS_SENT) == 4, "%u reports, %llu probes", log.count,
          (unsigned long long)counter(agent, KVT_COUNTER_HEARTBEATS_SENT));
    CHECK_OK(kvt_fault_heartbeat_rounds(agent, 1));
    events_seen(&log);
    CHECK(log.count == 1 && log.peers[0] == peer && log.kinds[0] == KVT_PEER_EVENT_UNRESPONSIVE,
          "%u reports, the first of kind %u", log.count, log.kinds[0]);
    CHECK_OK(kvt_fault_stall_progress(source, 0));
    wait_events(&log, 2, "the report of the resumed source's answer");
    CHECK(log.kinds[1] == KVT_PEER_EVENT_RESPONSIVE, "second report of kind %u", log.kinds[1]);
    CHECK_OK(kvt_fault_clear(agent));
    wait_counter_at_least(agent, KVT_COUNTER_HEARTBEATS_SENT, 6); /* back on its clock */
    CHECK_OK(kvt_peer_unload(agent, peer));
    CHECK_OK(kvt_agent_destroy(source));
    CHECK_OK(kvt_agent_destroy(agent));
}

/* A stalled agent is destroyed all the same: the destroy resumes its progress thread. */
static void destroy_resumes_a_stalled_agent(void) {
    uint32_t agent = make_agent("heartbeat-stalled");
    CHECK_OK(kvt_fault_stall_progress(agent, 1));
    CHECK_OK(kvt_agent_destroy(agent));
}

TEST_MAIN("heartbeat", TEST(bad_settings_are_refused), TEST(a_watched_peer_whose_connection_failed_is_reported),
          TEST(a_watched_peer_destroyed_before_answering_is_reported), TEST(stopped_source_over_tcp),
          TEST(stopped_source_over_shared_memory), TEST(stopped_source_in_another_pid_namespace),
          TEST(stalled_loopback_source), TEST(a_live_busy_peer_is_never_reported),
          TEST(a_watched_idle_peer_is_probed_an_unwatched_one_is_not), TEST(an_unloaded_peer_takes_its_reports_along),
          TEST(a_peer_that_never_answered_is_not_judged), TEST(a_killed_peer_that_never_answered_is_reported),
          TEST(a_reloaded_peer_is_judged_afresh), TEST(a_repeated_watch_does_not_restart_the_judgement),
          TEST(heartbeat_rounds_run_on_demand), TEST(destroy_resumes_a_stalled_agent))
