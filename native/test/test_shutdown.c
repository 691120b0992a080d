/* Shutting an agent down without waiting on its peers: kvt_agent_shutdown answers at once, the progress
 * thread closes the endpoints gracefully until the deadline and force-closes those a stopped peer never
 * acknowledges, then reports through the wake-up pipe and kvt_agent_shutdown_status; kvt_agent_destroy
 * then only joins. Against a source process stopped (SIGSTOP) over UCX's tcp transport and over shared
 * memory. */
#include "harness.h"

#include <poll.h>
#include <signal.h>
#include <time.h>

#define SEED 5u
#define SOURCE_BYTES (1u << 20)
#define DEADLINE_MS 500u
/* Only guards against a hang: the shutdown ends by its deadline plus at most a second of force-closes
 * (ten times as long under valgrind). */
#define GENEROUS_BOUND_MS (test_under_valgrind ? 50000 : 5000)

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

typedef struct {
    source_process source;
    uint32_t agent, peer;
    uint64_t generation;
} stopped_pair;

/* A destination that loaded a source (over `tls`, or UCX's choice when NULL) and, when `used`, read from it
 * and sent it a notification before the source was stopped; another notification goes out after. */
static void open_stopped_pair(stopped_pair *p, const char *tls, bool used) {
    if (tls) setenv("UCX_TLS", tls, 1);
    source_options options = {.length = SOURCE_BYTES, .seed = SEED};
    CHECK(source_spawn(&options, &p->source), "spawn the source");
    p->agent = make_agent("shutdown-destination");
    if (tls) unsetenv("UCX_TLS");
    if (!used) {
        source_signal(&p->source, SIGSTOP);
        source_wait_stopped(&p->source);
    }
    CHECK_OK(kvt_peer_load(p->agent, p->source.blob, p->source.length, &p->peer, &p->generation));
    if (!used) return;
    uint8_t *memory;
    uint32_t region = alloc_region(p->agent, SOURCE_BYTES, &memory);
    uint64_t op;
    CHECK_OK(post_one(p->agent, KVT_XFER_READ, p->peer, p->generation, region, 0, 1, 0, 4096, &op));
    CHECK(wait_op(p->agent, op, NULL) == KVT_OK, "a read before the source stops");
    CHECK(check_pattern(memory, 4096, SEED), "the bytes are the source's");
    CHECK_OK(kvt_xfer_release(p->agent, op));
    free_region(p->agent, region, memory);
    CHECK_OK(kvt_notify_send(p->agent, p->peer, p->generation, (const uint8_t *)"before", 6));
    source_signal(&p->source, SIGSTOP);
    source_wait_stopped(&p->source);
    CHECK_OK(kvt_notify_send(p->agent, p->peer, p->generation, (const uint8_t *)"after", 5));
}

/* Watches the (stopped) peer and waits until a probe went out to it: one it cannot answer. */
static void watch_until_probed(const stopped_pair *p) {
    uint64_t probes = counter(p->agent, KVT_COUNTER_HEARTBEATS_SENT);
    CHECK_OK(kvt_peer_watch(p->agent, p->peer, 1));
    wait_counter_at_least(p->agent, KVT_COUNTER_HEARTBEATS_SENT, probes + 1);
}

/* Waits (on the wake-up pipe, within GENEROUS_BOUND_MS) until `outcome(agent)` is not KVT_IN_PROGRESS. */
static kvt_status wait_on_wake_pipe(uint32_t agent, kvt_status (*outcome)(uint32_t)) {
    int32_t fd = -1;
    CHECK_OK(kvt_agent_wake_fd(agent, &fd));
    double started = now_ms();
    kvt_status status = outcome(agent);
    while (status == KVT_IN_PROGRESS) {
        struct pollfd wake = {.fd = fd, .events = POLLIN};
        int left = GENEROUS_BOUND_MS - (int)(now_ms() - started);
        CHECK(left > 0 && poll(&wake, 1, left) == 1, "agent %u did not report within %d ms", agent, GENEROUS_BOUND_MS);
        char bytes[16];
        CHECK(read(fd, bytes, sizeof bytes) > 0, "the wake-up pipe has a byte");
        status = outcome(agent);
    }
    return status;
}

/* Shuts the agent down with DEADLINE_MS, waits for the wake-up pipe, and returns the shutdown's outcome
 * (its detail stays readable). The agent is refused to every other call meanwhile. */
static kvt_status shut_down(uint32_t agent) {
    CHECK_STATUS(KVT_IN_PROGRESS, kvt_agent_shutdown(agent, DEADLINE_MS));
    uint64_t length = 0;
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_agent_metadata(agent, NULL, 0, &length));
    return wait_on_wake_pipe(agent, kvt_agent_shutdown_status);
}

static void a_stopped_tcp_peer_is_force_closed_at_the_deadline(bool used, bool probed) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "the loopback backend has no peer process to stop");
    stopped_pair p;
    open_stopped_pair(&p, "tcp", used);
    if (probed) watch_until_probed(&p);
    CHECK_STATUS(KVT_ERR_TIMEOUT, shut_down(p.agent));
    CHECK_DETAIL("'source-process'");
    CHECK_DETAIL("force-closed");
    CHECK_OK(kvt_agent_destroy(p.agent));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_agent_shutdown_status(p.agent));
    source_end(&p.source);
}

static void shutdown_with_a_stopped_tcp_peer_it_read_from(void) {
    a_stopped_tcp_peer_is_force_closed_at_the_deadline(true, false);
}
/* Loading a stopped peer does not wait for it (UCX wires the endpoint up later); its close never ends. */
static void shutdown_with_a_stopped_tcp_peer_only_loaded(void) {
    a_stopped_tcp_peer_is_force_closed_at_the_deadline(false, false);
}
/* A stopped peer probed (watched) before the shutdown never answers: its endpoint too is closed gracefully until the
 * deadline, then force-closed and named. Before, an endpoint whose probe was not answered yet was force-closed at
 * once and the shutdown answered OK, as though the peer had acknowledged. */
static void a_stopped_peer_with_a_probe_unanswered_is_named(void) {
    a_stopped_tcp_peer_is_force_closed_at_the_deadline(false, true);
}

/* A peer unloaded before the shutdown, whose close is still flushing past its own bound (1 s: the stopped peer never
 * acknowledges it) when the shutdown begins, as when the progress thread fell behind: the shutdown force-closes it at
 * its deadline and names it. Before, the progress round between the shutdown's checks force-closed it unnamed and the
 * shutdown answered OK (a CI run under ASan on a busy machine). */
static void a_close_past_its_own_bound_when_the_shutdown_begins_is_named(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "the loopback backend has no peer process to stop");
    stopped_pair p;
    open_stopped_pair(&p, "tcp", true);
    CHECK_OK(kvt_peer_unload(p.agent, p.peer));
    /* The progress thread begins the unloaded endpoint's close in the round that runs this registration and its
     * removal; the stall takes hold only after that round. */
    uint8_t *memory;
    uint32_t region = alloc_region(p.agent, 4096, &memory);
    free_region(p.agent, region, memory);
    CHECK_OK(kvt_fault_stall_progress(p.agent, 1));
    usleep(1100 * 1000); /* past the close's own bound, with no progress round to force-close it */
    CHECK_STATUS(KVT_ERR_TIMEOUT, shut_down(p.agent));
    CHECK_DETAIL("'source-process'");
    CHECK_DETAIL("force-closed");
    CHECK_OK(kvt_agent_destroy(p.agent));
    source_end(&p.source);
}

/* A peer killed with a probe unanswered over shared memory (where UCX 1.13 notices no death, and the probe waits for
 * the peer's answer to its wireup): its process is gone, so nothing is left to acknowledge; its endpoint is
 * force-closed at once and the shutdown answers OK. */
static void a_killed_peer_with_a_probe_unanswered_is_closed_at_once(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "the loopback backend has no peer process to kill");
    stopped_pair p;
    open_stopped_pair(&p, NULL, false);
    CHECK(peer_transport_mentions(p.agent, p.peer, "posix"), "the path to the source is shared memory");
    watch_until_probed(&p);
    source_end(&p.source);
    CHECK_OK(shut_down(p.agent));
    CHECK_OK(kvt_agent_destroy(p.agent));
}

/* Over shared memory the flush completes without the peer (what was sent sits in its queue), so the
 * endpoint closes gracefully although the peer is stopped. */
static void shutdown_with_a_stopped_shared_memory_peer(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "the loopback backend has no peer process to stop");
    stopped_pair p;
    open_stopped_pair(&p, NULL, true);
    CHECK(peer_transport_mentions(p.agent, p.peer, "posix"), "the path to the source is shared memory");
    CHECK_OK(shut_down(p.agent));
    CHECK_OK(kvt_agent_destroy(p.agent));
    source_end(&p.source);
}

/* A live peer over tcp, read from, sent a notification and unloaded: its endpoint's graceful close ends at once (the
 * flush answered, the force-close after it done inline), so the shutdown ends long before its deadline, OK. Before,
 * an endpoint whose force-close UCX finished inline was never freed, and every shutdown after a tcp peer waited for
 * its whole deadline. */
static void shutdown_after_a_live_tcp_peer_ends_before_its_deadline(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "the loopback backend has no peer process");
    setenv("UCX_TLS", "tcp", 1);
    source_process source;
    CHECK(source_spawn(&(source_options){.length = SOURCE_BYTES, .seed = SEED}, &source), "spawn the source");
    uint32_t agent = make_agent("shutdown-after-tcp");
    unsetenv("UCX_TLS");
    uint32_t peer;
    uint64_t generation;
    CHECK_OK(kvt_peer_load(agent, source.blob, source.length, &peer, &generation));
    uint8_t *memory;
    uint32_t region = alloc_region(agent, SOURCE_BYTES, &memory);
    uint64_t op;
    CHECK_OK(post_one(agent, KVT_XFER_READ, peer, generation, region, 0, 1, 0, 4096, &op));
    CHECK(wait_op(agent, op, NULL) == KVT_OK, "a read");
    CHECK_OK(kvt_xfer_release(agent, op));
    free_region(agent, region, memory);
    CHECK_OK(kvt_notify_send(agent, peer, generation, (const uint8_t *)"bye", 3));
    CHECK_OK(kvt_peer_unload(agent, peer));
    CHECK_STATUS(KVT_IN_PROGRESS, kvt_agent_shutdown(agent, KVT_MAX_SHUTDOWN_MS));
    CHECK_OK(wait_on_wake_pipe(agent, kvt_agent_shutdown_status));
    CHECK_OK(kvt_agent_destroy(agent));
    source_end(&source);
}

/* Destroy without a shutdown first still ends against a stopped peer: it shuts down with the default
 * deadline and waits for it. */
static void destroy_alone_ends_with_a_stopped_tcp_peer(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "the loopback backend has no peer process to stop");
    stopped_pair p;
    open_stopped_pair(&p, "tcp", true);
    CHECK_OK(kvt_agent_destroy(p.agent));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_agent_shutdown_status(p.agent));
    source_end(&p.source);
}

static void shutdown_refusals_and_repeats(void) {
    uint32_t agent = make_agent("shutdown-refusals");
    CHECK_STATUS(KVT_ERR_NOT_ALLOWED, kvt_agent_shutdown_status(agent));
    CHECK_DETAIL("not shutting down");
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_agent_shutdown(agent, KVT_MAX_SHUTDOWN_MS + 1));
    CHECK_DETAIL("deadline_ms");
    uint8_t *memory;
    uint32_t region = alloc_region(agent, 4096, &memory);
    CHECK_STATUS(KVT_ERR_BUSY, kvt_agent_shutdown(agent, DEADLINE_MS));
    CHECK_DETAIL("1 registration(s)");
    free_region(agent, region, memory); /* the refusal changed nothing: the agent still works */
    CHECK_OK(shut_down(agent));
    CHECK_STATUS(KVT_IN_PROGRESS, kvt_agent_shutdown(agent, DEADLINE_MS)); /* a repeat joins the first */
    CHECK_OK(kvt_agent_shutdown_status(agent));
    CHECK_OK(kvt_agent_destroy(agent));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_agent_destroy(agent));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_agent_shutdown(agent, DEADLINE_MS));
}

/* An agent created without waiting reports its start through the wake-up pipe, then works. */
static void create_begin_reports_the_start_through_the_wake_pipe(void) {
    uint32_t agent = 0;
    CHECK_STATUS(KVT_IN_PROGRESS, kvt_agent_create_begin("begun", test_backend, 0, &agent));
    CHECK_OK(wait_on_wake_pipe(agent, kvt_agent_start_status));
    CHECK(counter(0, KVT_COUNTER_LIVE_AGENTS) == 1, "the started agent is live");
    uint64_t length = 0;
    CHECK_OK(kvt_agent_metadata(agent, NULL, 0, &length));
    CHECK_OK(shut_down(agent));
    CHECK_OK(kvt_agent_destroy(agent));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_agent_start_status(agent));
}

/* A backend that cannot start (UCX with no usable transport) is reported by kvt_agent_start_status with
 * UCX's reason; the agent is refused to other calls, and destroying it frees its name. */
static void create_begin_reports_a_failed_start(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "the loopback backend always starts");
    setenv("UCX_TLS", "rc", 1); /* InfiniBand reliable connections: no device here */
    uint32_t agent = 0;
    CHECK_STATUS(KVT_IN_PROGRESS, kvt_agent_create_begin("cannot-start", test_backend, 0, &agent));
    kvt_status started = wait_on_wake_pipe(agent, kvt_agent_start_status); /* the progress thread reads UCX_TLS */
    unsetenv("UCX_TLS");
    CHECK_STATUS(KVT_ERR_BACKEND, started);
    CHECK_DETAIL("ucp_init");
    uint64_t length = 0;
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_agent_metadata(agent, NULL, 0, &length));
    CHECK_STATUS(KVT_ERR_NOT_ALLOWED, kvt_agent_shutdown(agent, DEADLINE_MS));
    CHECK_OK(kvt_agent_destroy(agent));
    uint32_t again = make_agent("cannot-start");
    CHECK(again != agent, "ids are never reused");
    CHECK_OK(kvt_agent_destroy(again));
}

TEST_MAIN("shutdown", TEST(create_begin_reports_the_start_through_the_wake_pipe),
          TEST(create_begin_reports_a_failed_start), TEST(shutdown_refusals_and_repeats),
          TEST(shutdown_with_a_stopped_tcp_peer_it_read_from), TEST(shutdown_with_a_stopped_tcp_peer_only_loaded),
          TEST(a_close_past_its_own_bound_when_the_shutdown_begins_is_named),
          TEST(a_stopped_peer_with_a_probe_unanswered_is_named),
          TEST(a_killed_peer_with_a_probe_unanswered_is_closed_at_once),
          TEST(shutdown_with_a_stopped_shared_memory_peer), TEST(destroy_alone_ends_with_a_stopped_tcp_peer),
          TEST(shutdown_after_a_live_tcp_peer_ends_before_its_deadline))
