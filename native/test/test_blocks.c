/* Warm blocks for operations: an agent's reserve is written before its creation returns; blocks are
 * reused (the largest kept, within the count and byte bounds); a large take has the progress thread
 * prepare another; operations built in reused, dirty blocks move every byte and send their notification. */
#include "agent.h"
#include "blocks.h"
#include "harness.h"

static size_t cached_bytes(uint32_t agent_id) {
    kvt_agent *agent = NULL;
    CHECK_OK(kvt_agent_acquire(agent_id, "test", &agent));
    size_t bytes = kvt_blocks_cached_bytes(agent);
    kvt_agent_release(agent);
    return bytes;
}

static void the_reserve_is_written_before_create_returns(void) {
    uint32_t agent = make_agent("blocks-reserve");
    CHECK(cached_bytes(agent) == KVT_BLOCK_RESERVE_BYTES, "the reserve (%zu bytes) is cached (got %zu)",
          KVT_BLOCK_RESERVE_BYTES, cached_bytes(agent));
    CHECK_OK(kvt_agent_destroy(agent));
}

static void blocks_are_reused_within_the_bounds(void) {
    uint32_t id = make_agent("blocks-bounds");
    CHECK_OK(kvt_fault_stall_progress(id, 1)); /* nothing is prepared behind the test's back */
    kvt_agent *agent = NULL;
    CHECK_OK(kvt_agent_acquire(id, "test", &agent));

    uint8_t *reserve = kvt_block_take(agent, KVT_BLOCK_RESERVE_BYTES - 100);
    CHECK(reserve && kvt_blocks_cached_bytes(agent) == 0, "a take within the reserve's size takes the reserve");
    uint8_t *small = kvt_block_take(agent, 1024);
    CHECK(small && small != reserve, "a small take comes from malloc");
    kvt_block_give(agent, small);
    CHECK(kvt_blocks_cached_bytes(agent) == 0, "a small block is freed, not cached");

    uint8_t *mid[KVT_BLOCK_CACHE_COUNT + 1];
    size_t kept = 0;
    for (uint32_t i = 0; i <= KVT_BLOCK_CACHE_COUNT; i++) {
        mid[i] = kvt_block_take(agent, KVT_BLOCK_CACHED_MIN + i);
        CHECK(mid[i] != NULL, "block %u", i);
    }
    for (uint32_t i = 0; i <= KVT_BLOCK_CACHE_COUNT; i++) kvt_block_give(agent, mid[i]);
    for (uint32_t i = 1; i <= KVT_BLOCK_CACHE_COUNT; i++) kept += KVT_BLOCK_CACHED_MIN + i;
    CHECK(kvt_blocks_cached_bytes(agent) == kept, "%u blocks are kept, the smallest freed (%zu bytes, got %zu)",
          KVT_BLOCK_CACHE_COUNT, kept, kvt_blocks_cached_bytes(agent));
    kvt_block_give(agent, reserve);
    kept += KVT_BLOCK_RESERVE_BYTES - (KVT_BLOCK_CACHED_MIN + 1);
    CHECK(kvt_blocks_cached_bytes(agent) == kept, "the reserve came back in place of the smallest (%zu bytes, got %zu)",
          kept, kvt_blocks_cached_bytes(agent));
    CHECK(kvt_block_take(agent, KVT_BLOCK_RESERVE_BYTES) == reserve, "the reserve was kept");
    kvt_block_give(agent, reserve);

    kvt_agent_release(agent);
    CHECK_OK(kvt_fault_stall_progress(id, 0));
    CHECK_OK(kvt_agent_destroy(id));
}

typedef struct {
    uint32_t agent;
    size_t bytes;
} cached_at_least;

static bool has_cached(void *context) {
    const cached_at_least *c = context;
    return cached_bytes(c->agent) >= c->bytes;
}

static void a_large_take_has_the_progress_thread_prepare_another(void) {
    uint32_t id = make_agent("blocks-prepare");
    CHECK_OK(kvt_fault_stall_progress(id, 1));
    kvt_agent *agent = NULL;
    CHECK_OK(kvt_agent_acquire(id, "test", &agent));
    size_t larger = KVT_BLOCK_RESERVE_BYTES + (1u << 20);
    uint8_t *taken = kvt_block_take(agent, larger);
    CHECK(taken && kvt_blocks_cached_bytes(agent) == KVT_BLOCK_RESERVE_BYTES,
          "a take larger than any cached block is fresh");
    memset(taken, 0xA5, larger); /* the caller's whole block is its own */
    CHECK_OK(kvt_fault_stall_progress(id, 0));
    cached_at_least wanted = {.agent = id, .bytes = KVT_BLOCK_RESERVE_BYTES + larger};
    wait_until(0, has_cached, &wanted, "the progress thread prepared a block of the larger size", WAIT_DEADLINE_MS);
    kvt_block_give(agent, taken);
    CHECK(kvt_blocks_cached_bytes(agent) == KVT_BLOCK_RESERVE_BYTES + 2 * larger, "the taken block came back");
    kvt_agent_release(agent);
    CHECK_OK(kvt_agent_destroy(id));
}

/* Reversed pieces (no two merge), so that the descriptor table is larger than a cached block's minimum. */
static void post_reversed(uint32_t reader, uint32_t peer, uint64_t generation, uint32_t local_region,
                          uint32_t remote_region, uint32_t count, uint64_t piece, const uint8_t *note,
                          uint32_t note_length, uint64_t *op) {
    uint32_t *index = calloc(count, sizeof *index);
    uint64_t *local_offset = malloc(count * sizeof *local_offset),
             *remote_offset = malloc(count * sizeof *remote_offset);
    uint64_t *length = malloc(count * sizeof *length);
    CHECK(index && local_offset && remote_offset && length, "out of memory");
    for (uint32_t i = 0; i < count; i++) {
        local_offset[i] = (uint64_t)i * piece;
        remote_offset[i] = (uint64_t)(count - 1 - i) * piece;
        length[i] = piece;
    }
    CHECK_OK(kvt_xfer_post(reader, KVT_XFER_READ, peer, generation, count, index, local_offset, index, remote_offset,
                           length, 1, &local_region, 1, &remote_region, note, note_length, op));
    free(index);
    free(local_offset);
    free(remote_offset);
    free(length);
}

static bool reversed_equal(const uint8_t *reader, const uint8_t *source, uint32_t count, uint64_t piece) {
    for (uint32_t i = 0; i < count; i++)
        if (memcmp(reader + (uint64_t)i * piece, source + (uint64_t)(count - 1 - i) * piece, piece) != 0) return false;
    return true;
}

static void operations_in_reused_blocks_move_every_byte(void) {
    const uint64_t piece = 256;
    const uint32_t count = 8192; /* 256 KiB of descriptors */
    const uint64_t length = count * piece;
    uint32_t source = make_agent("blocks-source"), reader = make_agent("blocks-reader");
    uint8_t *source_memory, *reader_memory;
    uint32_t source_region = alloc_region(source, length, &source_memory);
    uint32_t reader_region = alloc_region(reader, length, &reader_memory);
    uint64_t generation = 0;
    uint32_t peer = load_peer(reader, source, &generation);
    const uint8_t note[] = "blocks-done";
    for (uint32_t round = 0; round < 3; round++) {
        fill_pattern(source_memory, length, 17 + round);
        memset(reader_memory, 0, length);
        bool notify = round == 0; /* later rounds reuse the block the first one left a notification in */
        uint64_t op = 0, bytes = 0;
        post_reversed(reader, peer, generation, reader_region, source_region, count, piece, notify ? note : NULL,
                      notify ? (uint32_t)sizeof note : 0, &op);
        CHECK(wait_op(reader, op, &bytes) == KVT_OK && bytes == length, "round %u moves every byte", round);
        CHECK(reversed_equal(reader_memory, source_memory, count, piece), "round %u: every piece in place", round);
        CHECK_OK(kvt_xfer_release(reader, op));
        CHECK(cached_bytes(reader) >= KVT_BLOCK_RESERVE_BYTES, "round %u: the block came back", round);
    }
    CHECK(counter(reader, KVT_COUNTER_NOTIFICATIONS_SENT) == 1, "only the first round sent a notification");
    CHECK_OK(kvt_peer_unload(reader, peer));
    free_region(reader, reader_region, reader_memory);
    free_region(source, source_region, source_memory);
    CHECK_OK(kvt_agent_destroy(reader));
    CHECK_OK(kvt_agent_destroy(source));
}

TEST_MAIN("blocks", TEST(the_reserve_is_written_before_create_returns), TEST(blocks_are_reused_within_the_bounds),
          TEST(a_large_take_has_the_progress_thread_prepare_another), TEST(operations_in_reused_blocks_move_every_byte))
