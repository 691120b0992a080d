#include "harness.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#define SEED 5u
static double now_s(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }

static void experiment(const char *tls, bool stop_before_load) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "x");
    if (tls) setenv("UCX_TLS", tls, 1);
    source_process source;
    source_options options = {.length = 1 << 20, .seed = SEED};
    CHECK(source_spawn(&options, &source), "spawn");
    uint32_t agent = make_agent("exp");
    if (tls) unsetenv("UCX_TLS");
    uint8_t *memory;
    uint32_t region = alloc_region(agent, 1 << 20, &memory);
    uint32_t peer; uint64_t generation;
    if (stop_before_load) { source_signal(&source, SIGSTOP); source_wait_stopped(&source); }
    double t0 = now_s();
    CHECK_OK(kvt_peer_load(agent, source.blob, source.length, &peer, &generation));
    fprintf(stderr, "load took %.3f s\n", now_s() - t0);
    if (!stop_before_load) {
        uint64_t op;
        CHECK_OK(post_one(agent, KVT_XFER_READ, peer, generation, region, 0, 1, 0, 4096, &op));
        CHECK(wait_op(agent, op, NULL) == KVT_OK, "read");
        CHECK_OK(kvt_xfer_release(agent, op));
        CHECK_OK(kvt_notify_send(agent, peer, generation, (const uint8_t *)"hi", 2));
        source_signal(&source, SIGSTOP); source_wait_stopped(&source);
        CHECK_OK(kvt_notify_send(agent, peer, generation, (const uint8_t *)"hi", 2));
    }
    free_region(agent, region, memory);
    t0 = now_s();
    alarm(20);
    CHECK_OK(kvt_agent_destroy(agent));
    fprintf(stderr, "destroy took %.3f s\n", now_s() - t0);
    source_end(&source);
}
static void tcp_after_read(void) { experiment("tcp", false); }
static void shm_after_read(void) { experiment(NULL, false); }
static void tcp_stopped_load(void) { experiment("tcp", true); }
static void shm_stopped_load(void) { experiment(NULL, true); }

TEST_MAIN("shutdown", TEST(tcp_after_read), TEST(shm_after_read), TEST(tcp_stopped_load), TEST(shm_stopped_load))
