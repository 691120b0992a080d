/* A peer process that dies: operations against it end with KVT_ERR_REMOTE_DISCONNECT and never hang.
 * The source runs in a forked child (same pid namespace: judged by its pid) that is SIGKILLed. */
#include "harness.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

/* Posts a read of the whole region and returns how it ended: refused at post or ended later. */
static int32_t read_outcome(uint32_t reader, uint32_t peer, uint64_t generation, uint32_t region, uint64_t length) {
    uint64_t op;
    kvt_status posted = post_one(reader, KVT_XFER_READ, peer, generation, region, 0, 1, 0, length, &op);
    if (posted != KVT_OK) return posted;
    int32_t status = wait_op(reader, op, NULL);
    CHECK_OK(kvt_xfer_release(reader, op));
    return status;
}

#define BATCH_PARTS 4u
#define SMALL_READ 4096u /* copied by the poster when the source's bank is mapped here (xfer.c) */

/* Reads the region in BATCH_PARTS slices posted while the reader's progress thread is stalled, so that they
 * move in one round, where one liveness check serves them all; returns how many ended with `expected`
 * (a post refused with it counts). */
static uint32_t batch_outcomes(uint32_t reader, uint32_t peer, uint64_t generation, uint32_t region, uint64_t length,
                               int32_t expected) {
    uint64_t slice = length / BATCH_PARTS, ops[BATCH_PARTS];
    uint32_t matching = 0;
    bool posted[BATCH_PARTS];
    CHECK_OK(kvt_fault_stall_progress(reader, 1));
    for (uint32_t i = 0; i < BATCH_PARTS; i++) {
        kvt_status status =
            post_one(reader, KVT_XFER_READ, peer, generation, region, i * slice, 1, i * slice, slice, &ops[i]);
        posted[i] = status == KVT_OK;
        if (!posted[i]) matching += status == expected;
    }
    CHECK_OK(kvt_fault_stall_progress(reader, 0));
    for (uint32_t i = 0; i < BATCH_PARTS; i++) {
        if (!posted[i]) continue;
        matching += wait_op(reader, ops[i], NULL) == expected;
        CHECK_OK(kvt_xfer_release(reader, ops[i]));
    }
    return matching;
}

static void read_from_a_killed_source(bool caller_memory) {
    uint64_t length = 8u << 20;
    source_options options = {.length = length, .caller_memory = caller_memory, .seed = 21};
    source_process child;
    CHECK(source_spawn(&options, &child), "spawn the source");
    uint32_t reader = make_agent("survivor");
    uint8_t *memory;
    uint32_t region = alloc_region(reader, length, &memory);
    uint32_t peer;
    uint64_t generation;
    CHECK_OK(kvt_peer_load(reader, child.blob, child.length, &peer, &generation));
    CHECK(read_outcome(reader, peer, generation, region, SMALL_READ) == KVT_OK, "a small read from the live source");
    CHECK(counter(reader, KVT_COUNTER_INLINE_OPERATIONS) == !caller_memory,
          "moved inline exactly when the source's bank is mapped here");
    CHECK(read_outcome(reader, peer, generation, region, length) == KVT_OK, "a read from the live source");
    CHECK(check_pattern(memory, length, 21), "the bytes read are the source's");
    memset(memory, 0, length);
    CHECK(batch_outcomes(reader, peer, generation, region, length, KVT_OK) == BATCH_PARTS,
          "a batch from the live source");
    CHECK(check_pattern(memory, length, 21), "the batch's bytes are the source's");

    if (caller_memory) {
        /* Stopped, the source cannot serve the read; killed, the liveness check ends it. */
        source_signal(&child, SIGSTOP);
        source_wait_stopped(&child);
        uint64_t op;
        CHECK_OK(post_one(reader, KVT_XFER_READ, peer, generation, region, 0, 1, 0, length, &op));
        wait_counter_at_least(reader, KVT_COUNTER_INFLIGHT_REQUESTS, 1); /* a request to the stopped source */
        source_signal(&child, SIGKILL);
        CHECK(wait_op(reader, op, NULL) == KVT_ERR_REMOTE_DISCONNECT, "the read in flight ends REMOTE_DISCONNECT");
        CHECK_OK(kvt_xfer_release(reader, op));
    }
    source_signal(&child, SIGKILL);
    waitpid(child.child, NULL, 0);
    /* First after the kill, before anything marked the peer: the small read's copy is not trusted either. */
    CHECK(read_outcome(reader, peer, generation, region, SMALL_READ) == KVT_ERR_REMOTE_DISCONNECT,
          "a small read after the kill");
    CHECK(counter(reader, KVT_COUNTER_INLINE_OPERATIONS) == !caller_memory, "it did not end inline");
    /* Once the process is gone, every read ends with REMOTE_DISCONNECT: a mapped region's bytes are
     * not trusted (fail closed), and once the peer is marked the post itself is refused. */
    CHECK(batch_outcomes(reader, peer, generation, region, length, KVT_ERR_REMOTE_DISCONNECT) == BATCH_PARTS,
          "every read of a batch after the kill ends REMOTE_DISCONNECT");
    CHECK(read_outcome(reader, peer, generation, region, length) == KVT_ERR_REMOTE_DISCONNECT, "a read after the kill");
    CHECK_STATUS(KVT_ERR_REMOTE_DISCONNECT,
                 post_one(reader, KVT_XFER_READ, peer, generation, region, 0, 1, 0, length, &(uint64_t){0}));
    uint32_t state;
    CHECK_OK(kvt_peer_info(reader, peer, NULL, &state, NULL));
    CHECK(state == KVT_PEER_DISCONNECTED, "the peer shows as disconnected (state %u)", state);
    CHECK_STATUS(KVT_ERR_REMOTE_DISCONNECT, kvt_notify_send(reader, peer, generation, (const uint8_t *)"x", 1));
    /* Loading the dead process's metadata again is refused. */
    CHECK_OK(kvt_peer_unload(reader, peer));
    CHECK_STATUS(KVT_ERR_REMOTE_DISCONNECT, kvt_peer_load(reader, child.blob, child.length, &peer, &generation));
    CHECK_DETAIL("is gone");
    close(child.to_child);
    free(child.blob);
    free_region(reader, region, memory);
    CHECK_OK(kvt_agent_destroy(reader));
}

static void killed_source_with_kvreuse_memory(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback peers live in one process (test_xfer covers a destroyed source)");
    read_from_a_killed_source(false);
}

static void killed_source_with_caller_memory(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback peers live in one process (test_xfer covers a destroyed source)");
    read_from_a_killed_source(true);
}

TEST_MAIN("disconnect", TEST(killed_source_with_kvreuse_memory), TEST(killed_source_with_caller_memory))
