/* Bounded cancellation over UCX's tcp transport (the path two hosts take), against a source process:
 * an operation cancelled while the source is stopped with requests in flight becomes terminal (CANCELED)
 * and its memory deregisters; requests that cannot end get their endpoint force-closed; UCX
 * requests never exceed KVT_MAX_REQUEST_BYTES. */
#include "harness.h"

#include <signal.h>

#define PIECES 2352u
#define SEED 9u

static uint64_t piece_bytes(void) { return test_under_valgrind ? 16u << 10 : 128u << 10; }

typedef struct {
    source_process source;
    uint32_t agent, region, peer;
    uint8_t *memory;
    uint64_t generation, length;
} tcp_pair;

static void pair_open(tcp_pair *p, uint64_t length) {
    setenv("UCX_TLS", "tcp", 1);
    source_options options = {.length = length, .seed = SEED};
    CHECK(source_spawn(&options, &p->source), "spawn the source");
    p->length = length;
    p->agent = make_agent("tcp-destination");
    unsetenv("UCX_TLS");
    p->region = alloc_region(p->agent, length, &p->memory);
    CHECK_OK(kvt_peer_load(p->agent, p->source.blob, p->source.length, &p->peer, &p->generation));
}

static void pair_close(tcp_pair *p) {
    source_end(&p->source);
    CHECK_OK(kvt_peer_unload(p->agent, p->peer));
    free_region(p->agent, p->region, p->memory);
    CHECK_OK(kvt_agent_destroy(p->agent));
}

/* `count` pieces of `piece` bytes at the same offsets on both sides, in descending order (so none
 * merge) or ascending (so all merge into one descriptor). */
static uint64_t post_pieces(const tcp_pair *p, uint32_t direction, uint32_t count, uint64_t piece, bool descending) {
    uint32_t *index = calloc(count, sizeof *index);
    uint64_t *offset = calloc(count, sizeof *offset), *length = calloc(count, sizeof *length);
    CHECK(index && offset && length, "out of memory");
    for (uint32_t i = 0; i < count; i++) {
        offset[i] = (uint64_t)(descending ? count - 1 - i : i) * piece;
        length[i] = piece;
    }
    uint64_t op;
    const uint32_t remote_region = 1;
    CHECK_OK(kvt_xfer_post(p->agent, direction, p->peer, p->generation, count, index, offset, index, offset, length, 1,
                           &p->region, 1, &remote_region, NULL, 0, &op));
    free(index);
    free(offset);
    free(length);
    return op;
}

static uint64_t bytes_done(const tcp_pair *p, uint64_t op, int32_t *status) {
    uint64_t done = 0;
    CHECK_OK(kvt_xfer_status(p->agent, op, status, &done, NULL));
    return done;
}

typedef struct {
    const tcp_pair *pair;
    uint64_t op, bytes;
} moving_batch;

static bool no_request_in_flight(void *context) {
    const tcp_pair *p = context;
    return counter(p->agent, KVT_COUNTER_INFLIGHT_REQUESTS) == 0;
}

/* The batch has `bytes` done and is still in progress (the rest is held back by kvt_fault_pause_issue). */
static bool first_bytes_moved(void *context) {
    const moving_batch *moving = context;
    int32_t status = KVT_IN_PROGRESS;
    uint64_t done = bytes_done(moving->pair, moving->op, &status);
    CHECK(status == KVT_IN_PROGRESS, "the batch ended %s while the rest was held back", kvt_status_name(status));
    return done >= moving->bytes;
}

/* After the source resumes, loading its metadata again (a no-op when the endpoint still stands, a new
 * endpoint when it was force-closed) gives a peer that reads. */
static void reload_and_read(tcp_pair *p) {
    source_signal(&p->source, SIGCONT);
    CHECK_OK(kvt_peer_load(p->agent, p->source.blob, p->source.length, &p->peer, &p->generation));
    memset(p->memory, 0, piece_bytes());
    uint64_t op;
    CHECK_OK(post_one(p->agent, KVT_XFER_READ, p->peer, p->generation, p->region, 0, 1, 0, piece_bytes(), &op));
    CHECK(wait_op(p->agent, op, NULL) == KVT_OK, "a read after the reload");
    CHECK_OK(kvt_xfer_release(p->agent, op));
}

/* Cancels `op`: it ends CANCELED (the source cannot end it: it is stopped), nothing is left in flight,
 * and its memory deregisters (it is registered again for what follows). */
static void cancel_ends_the_batch(tcp_pair *p, uint64_t op) {
    CHECK_STATUS(KVT_IN_PROGRESS, kvt_xfer_cancel(p->agent, op));
    int32_t status = wait_op(p->agent, op, NULL);
    CHECK(status == KVT_ERR_CANCELED, "the cancelled batch ended %s, expected CANCELED", kvt_status_name(status));
    CHECK(counter(p->agent, KVT_COUNTER_INFLIGHT_REQUESTS) == 0, "no request is left in flight");
    CHECK_OK(kvt_xfer_release(p->agent, op));
    CHECK_OK(kvt_mem_deregister(p->agent, p->region));
    CHECK_OK(kvt_mem_register(p->agent, (uint64_t)(uintptr_t)p->memory, p->length, KVT_MEM_DRAM, 0, &p->region));
}

/* A batch moves while the source runs; once its first pieces are done the source is stopped, the rest
 * goes out as requests the stopped source never answers, and the batch is cancelled: it ends CANCELED,
 * and its memory deregisters. */
static void cancel_with_the_source_stopped_mid_batch(uint32_t direction) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "the loopback backend has no peer process to stop");
    tcp_pair p;
    uint64_t total = (uint64_t)PIECES * piece_bytes();
    pair_open(&p, total);
    /* The first pieces go out and complete; the rest is held back until the source is stopped, so the
     * batch is mid-way, with requests in flight that the stopped source never answers, whatever the
     * machine's speed. */
    uint64_t first = 4 * piece_bytes();
    CHECK_OK(kvt_fault_pause_issue(p.agent, first));
    uint64_t op = post_pieces(&p, direction, PIECES, piece_bytes(), true);
    moving_batch moving = {.pair = &p, .op = op, .bytes = first};
    wait_until(p.agent, first_bytes_moved, &moving, "the batch's first pieces to complete", WAIT_DEADLINE_MS);
    source_signal(&p.source, SIGSTOP);
    source_wait_stopped(&p.source);
    CHECK_OK(kvt_fault_clear(p.agent));
    wait_counter_at_least(p.agent, KVT_COUNTER_INFLIGHT_REQUESTS, 1);
    int32_t status = KVT_IN_PROGRESS;
    uint64_t before = bytes_done(&p, op, &status);
    CHECK(status == KVT_IN_PROGRESS && before >= first && before < total,
          "the batch (%llu bytes) is mid-way when the source stopped (%llu done, status %s)", (unsigned long long)total,
          (unsigned long long)before, kvt_status_name(status));
    cancel_ends_the_batch(&p, op);
    reload_and_read(&p);
    if (direction == KVT_XFER_READ) CHECK(check_pattern(p.memory, piece_bytes(), SEED), "the bytes are the source's");
    pair_close(&p);
}

static void cancel_read_from_a_stopped_source(void) { cancel_with_the_source_stopped_mid_batch(KVT_XFER_READ); }
static void cancel_write_to_a_stopped_source(void) { cancel_with_the_source_stopped_mid_batch(KVT_XFER_WRITE); }

/* kvt_fault_pause_issue: the pieces up to the limit are issued and complete, then nothing more is issued
 * (nothing in flight, the batch still in progress) until the pause is cleared; then the rest moves. */
static void a_paused_issue_holds_the_rest_of_a_batch(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "the loopback backend has no issue to pause");
    tcp_pair p;
    uint64_t total = 64 * piece_bytes(), first = 4 * piece_bytes();
    pair_open(&p, total);
    uint64_t issued = counter(p.agent, KVT_COUNTER_REQUESTS_ISSUED);
    CHECK_OK(kvt_fault_pause_issue(p.agent, first));
    uint64_t op = post_pieces(&p, KVT_XFER_READ, 64, piece_bytes(), true);
    moving_batch moving = {.pair = &p, .op = op, .bytes = first};
    wait_until(p.agent, first_bytes_moved, &moving, "the pieces before the pause to complete", WAIT_DEADLINE_MS);
    wait_until(p.agent, no_request_in_flight, &p, "the issued requests to end", WAIT_DEADLINE_MS);
    int32_t status = KVT_IN_PROGRESS;
    CHECK(bytes_done(&p, op, &status) == first && status == KVT_IN_PROGRESS, "paused at %llu of %llu bytes (status %s)",
          (unsigned long long)first, (unsigned long long)total, kvt_status_name(status));
    CHECK(counter(p.agent, KVT_COUNTER_REQUESTS_ISSUED) - issued == 4, "4 requests before the pause, not %llu",
          (unsigned long long)(counter(p.agent, KVT_COUNTER_REQUESTS_ISSUED) - issued));
    CHECK_OK(kvt_fault_clear(p.agent));
    uint64_t done = 0;
    CHECK(wait_op(p.agent, op, &done) == KVT_OK && done == total, "the rest moved after the pause (%llu bytes)",
          (unsigned long long)done);
    CHECK_OK(kvt_xfer_release(p.agent, op));
    CHECK(check_pattern(p.memory, total, SEED), "the bytes are the source's");
    pair_close(&p);
}

/* Gets issued after the source stopped can never complete, and ucp_request_cancel does not end them:
 * the cancel force-closes the endpoint. The peer is then disconnected (posts refused) until its
 * metadata is loaded again, which connects a new endpoint. */
static void cancel_force_closes_the_endpoint_of_requests_that_cannot_end(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "the loopback backend has no peer process to stop");
    tcp_pair p;
    pair_open(&p, (uint64_t)PIECES * piece_bytes());
    source_signal(&p.source, SIGSTOP);
    source_wait_stopped(&p.source);
    uint64_t op = post_pieces(&p, KVT_XFER_READ, PIECES, piece_bytes(), true);
    wait_counter_at_least(p.agent, KVT_COUNTER_INFLIGHT_REQUESTS, 1);
    cancel_ends_the_batch(&p, op);
    uint32_t state;
    CHECK_OK(kvt_peer_info(p.agent, p.peer, NULL, &state, NULL));
    CHECK(state == KVT_PEER_DISCONNECTED, "the peer is disconnected (state %u)", state);
    CHECK(peer_transport_mentions(p.agent, p.peer, "is closed"), "its endpoint was closed");
    CHECK_STATUS(KVT_ERR_REMOTE_DISCONNECT,
                 post_one(p.agent, KVT_XFER_READ, p.peer, p.generation, p.region, 0, 1, 0, piece_bytes(), &op));
    uint64_t old_generation = p.generation;
    reload_and_read(&p);
    CHECK(p.generation > old_generation, "the reload is a new generation");
    CHECK(check_pattern(p.memory, piece_bytes(), SEED), "the bytes are the source's");
    pair_close(&p);
}

/* One merged descriptor of several KVT_MAX_REQUEST_BYTES is issued as that many requests, both ways. */
static void merged_descriptors_are_issued_in_capped_requests(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "the loopback backend issues no requests");
    tcp_pair p;
    const uint32_t requests = 3;
    uint64_t total = (uint64_t)requests * KVT_MAX_REQUEST_BYTES, piece = 64u << 10;
    pair_open(&p, total);
    for (uint32_t direction = KVT_XFER_READ; direction <= KVT_XFER_WRITE; direction++) {
        if (direction == KVT_XFER_WRITE) fill_pattern(p.memory, total, SEED + 1);
        uint64_t issued = counter(p.agent, KVT_COUNTER_REQUESTS_ISSUED);
        uint64_t op = post_pieces(&p, direction, (uint32_t)(total / piece), piece, false);
        CHECK(wait_op(p.agent, op, NULL) == KVT_OK, "the merged batch moved");
        CHECK_OK(kvt_xfer_release(p.agent, op));
        CHECK(counter(p.agent, KVT_COUNTER_REQUESTS_ISSUED) - issued == requests,
              "%llu requests for %llu bytes in one merged descriptor (expected %u of at most %u bytes)",
              (unsigned long long)(counter(p.agent, KVT_COUNTER_REQUESTS_ISSUED) - issued), (unsigned long long)total,
              requests, KVT_MAX_REQUEST_BYTES);
    }
    /* What was written is what the source now holds: read it back into a cleared buffer. */
    memset(p.memory, 0, total);
    uint64_t op = post_pieces(&p, KVT_XFER_READ, (uint32_t)(total / piece), piece, false);
    CHECK(wait_op(p.agent, op, NULL) == KVT_OK, "the read back");
    CHECK_OK(kvt_xfer_release(p.agent, op));
    CHECK(check_pattern(p.memory, total, SEED + 1), "the bytes written arrived");
    pair_close(&p);
}

TEST_MAIN("cancel", TEST(merged_descriptors_are_issued_in_capped_requests),
          TEST(a_paused_issue_holds_the_rest_of_a_batch), TEST(cancel_read_from_a_stopped_source),
          TEST(cancel_write_to_a_stopped_source), TEST(cancel_force_closes_the_endpoint_of_requests_that_cannot_end))
