/* Fault injection: failing the Nth registration, post and completion; holding completions to prove
 * that busy memory, operations and agents refuse to go away. */
#include "harness.h"

static uint64_t errors(uint32_t agent, kvt_status code) {
    return counter(agent, KVT_COUNTER_ERRORS_FIRST + (uint32_t)(-code - 1));
}

static void fail_nth_registration(void) {
    uint32_t agent = make_agent("fault-register");
    uint8_t *memory = malloc(3 * 4096);
    uint64_t base = (uint64_t)(uintptr_t)memory;
    CHECK_OK(kvt_fault_fail(agent, KVT_FAULT_REGISTER, 2, KVT_ERR_BACKEND));
    uint32_t r0, r1, r2;
    CHECK_OK(kvt_mem_register(agent, base, 4096, KVT_MEM_DRAM, 0, &r0));
    CHECK_STATUS(KVT_ERR_BACKEND, kvt_mem_register(agent, base + 4096, 4096, KVT_MEM_DRAM, 0, &r1));
    CHECK_DETAIL("injected fault (register)");
    CHECK(counter(agent, KVT_COUNTER_LIVE_REGISTRATIONS) == 1, "the failed registration left nothing behind");
    CHECK_OK(kvt_mem_register(agent, base + 4096, 4096, KVT_MEM_DRAM, 0, &r1)); /* one-shot */
    CHECK_OK(kvt_fault_fail(agent, KVT_FAULT_REGISTER, 1, KVT_ERR_NO_MEMORY));
    CHECK_OK(kvt_fault_clear(agent));
    CHECK_OK(kvt_mem_register(agent, base + 8192, 4096, KVT_MEM_DRAM, 0, &r2)); /* cleared */
    CHECK(errors(agent, KVT_ERR_BACKEND) == 1, "one BACKEND error counted");
    CHECK_OK(kvt_mem_deregister(agent, r0));
    CHECK_OK(kvt_mem_deregister(agent, r1));
    CHECK_OK(kvt_mem_deregister(agent, r2));
    free(memory);
    CHECK_OK(kvt_agent_destroy(agent));
}

static void fail_nth_post_and_completion(void) {
    uint32_t agent = make_agent("fault-post");
    uint8_t *memory;
    uint32_t region = alloc_region(agent, 65536, &memory);
    fill_pattern(memory, 32768, 11);
    memset(memory + 32768, 0, 32768);
    uint64_t generation;
    uint32_t self = load_peer(agent, agent, &generation);
    uint64_t op = 0;
    CHECK_OK(kvt_fault_fail(agent, KVT_FAULT_POST, 1, KVT_ERR_REMOTE_DISCONNECT));
    CHECK_STATUS(KVT_ERR_REMOTE_DISCONNECT,
                 post_one(agent, KVT_XFER_READ, self, generation, region, 32768, region, 0, 32768, &op));
    CHECK_DETAIL("injected fault (post)");
    CHECK(counter(agent, KVT_COUNTER_LIVE_OPERATIONS) == 0, "no operation");
    for (int i = 32768; i < 65536; i++) CHECK(memory[i] == 0, "nothing moved");

    CHECK_OK(kvt_fault_fail(agent, KVT_FAULT_COMPLETION, 2, KVT_ERR_TIMEOUT));
    uint64_t first, second, done = 0;
    CHECK_OK(post_one(agent, KVT_XFER_READ, self, generation, region, 32768, region, 0, 16384, &first));
    CHECK(wait_op(agent, first, NULL) == KVT_OK, "first completion untouched");
    CHECK_OK(post_one(agent, KVT_XFER_READ, self, generation, region, 49152, region, 16384, 16384, &second));
    CHECK(wait_op(agent, second, &done) == KVT_ERR_TIMEOUT, "second completion fails as injected");
    CHECK(done == 16384, "its bytes moved nevertheless (%llu)", (unsigned long long)done);
    CHECK(errors(agent, KVT_ERR_TIMEOUT) == 1, "the failed completion is counted");
    CHECK_OK(kvt_xfer_release(agent, first));
    CHECK_OK(kvt_xfer_release(agent, second));

    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_fault_fail(agent, KVT_FAULT_ALLOCATION + 1, 1, KVT_ERR_BACKEND));
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_fault_fail(agent, KVT_FAULT_POST, 0, KVT_ERR_BACKEND));
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_fault_fail(agent, KVT_FAULT_POST, 1, KVT_OK));
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_fault_fail(agent, KVT_FAULT_POST, 1, -77));
    free_region(agent, region, memory);
    CHECK_OK(kvt_agent_destroy(agent));
}

static void held_read_keeps_everything_busy(void) {
    uint32_t source = make_agent("held-source"), reader = make_agent("held-reader");
    uint64_t length = 1u << 20;
    uint8_t *sm, *rm;
    uint32_t sr = alloc_region(source, length, &sm), rr = alloc_region(reader, length, &rm);
    fill_pattern(sm, length, 13);
    uint64_t generation;
    uint32_t peer = load_peer(reader, source, &generation);
    CHECK_OK(kvt_fault_delay_completions(reader, KVT_DELAY_FOREVER));
    uint64_t op;
    CHECK_OK(post_one(reader, KVT_XFER_READ, peer, generation, rr, 0, sr, 0, length, &op));

    /* In flight: the destination region, the operation and the agent all refuse to go. */
    CHECK_STATUS(KVT_ERR_BUSY, kvt_mem_deregister(reader, rr));
    char expected[64];
    snprintf(expected, sizeof expected, "operation %llu", (unsigned long long)op);
    CHECK_DETAIL(expected);
    CHECK_STATUS(KVT_ERR_BUSY, kvt_xfer_release(reader, op));
    CHECK_STATUS(KVT_ERR_BUSY, kvt_agent_destroy(reader));
    CHECK_STATUS(KVT_ERR_BUSY, kvt_mem_free(reader, (uint64_t)(uintptr_t)rm));
    uint64_t job = 0;
    CHECK_STATUS(KVT_ERR_BUSY, kvt_mem_deregister_begin(reader, rr, &job));
    CHECK_DETAIL(expected);
    CHECK_STATUS(KVT_ERR_BUSY, kvt_mem_free_begin(reader, (uint64_t)(uintptr_t)rm, &job));
    int32_t status = 0;
    CHECK_OK(kvt_xfer_status(reader, op, &status, NULL, NULL));
    CHECK(status == KVT_IN_PROGRESS, "held in progress");
    CHECK(counter(reader, KVT_COUNTER_INFLIGHT_OPERATIONS) == 1, "one in flight");
    CHECK(errors(reader, KVT_ERR_BUSY) == 6, "six BUSY refusals counted on the agent");

    CHECK_OK(kvt_fault_clear(reader));
    CHECK(wait_op(reader, op, NULL) == KVT_OK, "completes once released");
    CHECK(memcmp(rm, sm, length) == 0, "bytes");
    CHECK_OK(kvt_xfer_release(reader, op));
    free_region(reader, rr, rm);
    free_region(source, sr, sm);
    CHECK_OK(kvt_agent_destroy(reader));
    CHECK_OK(kvt_agent_destroy(source));
}

static void finite_delay_completes(void) {
    uint32_t agent = make_agent("delay");
    uint8_t *memory;
    uint32_t region = alloc_region(agent, 8192, &memory);
    uint64_t generation;
    uint32_t self = load_peer(agent, agent, &generation);
    CHECK_OK(kvt_fault_delay_completions(agent, 20));
    uint64_t op;
    CHECK_OK(post_one(agent, KVT_XFER_WRITE, self, generation, region, 0, region, 4096, 4096, &op));
    CHECK(wait_op(agent, op, NULL) == KVT_OK, "a delayed completion still completes");
    CHECK_OK(kvt_xfer_release(agent, op));
    CHECK_OK(kvt_fault_clear(agent));
    free_region(agent, region, memory);
    CHECK_OK(kvt_agent_destroy(agent));
}

static bool nothing_in_flight(void *context) {
    return counter(*(uint32_t *)context, KVT_COUNTER_INFLIGHT_OPERATIONS) == 0;
}

/* An operation is its own completion record: the only allocation is its record at post (refused whole
 * when it fails), so every posted operation is reported exactly once, however many end before a poll. */
static void completions_are_never_dropped(void) {
    enum { POSTS = 200, REFUSED = 150, RELEASED_UNPOLLED = 7 };
    uint32_t agent = make_agent("fault-allocation");
    uint8_t *memory;
    uint32_t region = alloc_region(agent, 2 * 4096, &memory);
    uint64_t generation;
    uint32_t self = load_peer(agent, agent, &generation);
    CHECK_OK(kvt_fault_delay_completions(agent, KVT_DELAY_FOREVER)); /* all end together, before any poll */
    CHECK_OK(kvt_fault_fail(agent, KVT_FAULT_ALLOCATION, REFUSED, KVT_ERR_NO_MEMORY));
    CHECK_OK(kvt_fault_fail(agent, KVT_FAULT_COMPLETION, 10, KVT_ERR_TIMEOUT));
    uint64_t ops[POSTS];
    uint32_t posted = 0;
    for (uint32_t i = 1; i <= POSTS; i++) {
        uint64_t op = 0;
        kvt_status status = post_one(agent, KVT_XFER_READ, self, generation, region, 4096, region, 0, 64, &op);
        if (i == REFUSED) {
            CHECK(status == KVT_ERR_NO_MEMORY, "post %u: %s, expected the injected NO_MEMORY", i,
                  kvt_status_name(status));
            CHECK_DETAIL("injected fault (allocation)");
            CHECK(counter(agent, KVT_COUNTER_LIVE_OPERATIONS) == posted, "the refused post left nothing behind");
            continue;
        }
        CHECK(status == KVT_OK, "post %u: %s (%s)", i, kvt_status_name(status), kvt_last_error_detail());
        ops[posted++] = op;
    }
    CHECK(counter(agent, KVT_COUNTER_ERRORS_FIRST + (uint32_t)(-KVT_ERR_NO_MEMORY - 1)) == 1, "one refusal counted");
    CHECK_OK(kvt_fault_delay_completions(agent, 0));
    wait_until(0, nothing_in_flight, &agent, "every operation to end", WAIT_DEADLINE_MS);
    CHECK_OK(kvt_xfer_release(agent, ops[RELEASED_UNPOLLED]));

    uint32_t seen[POSTS] = {0}, failed = 0, total = 0, n = 0;
    do {
        uint64_t ids[7], bytes[7];
        int32_t statuses[7];
        CHECK_OK(kvt_agent_poll(agent, 7, ids, statuses, bytes, &n, NULL));
        for (uint32_t k = 0; k < n; k++) {
            uint32_t index = posted;
            for (uint32_t i = 0; i < posted; i++)
                if (ops[i] == ids[k]) index = i;
            CHECK(index < posted, "polled an unknown operation %llu", (unsigned long long)ids[k]);
            seen[index]++;
            total++;
            if (statuses[k] == KVT_ERR_TIMEOUT)
                failed++;
            else
                CHECK(statuses[k] == KVT_OK && bytes[k] == 64, "op %llu: %s after %llu bytes",
                      (unsigned long long)ids[k], kvt_status_name(statuses[k]), (unsigned long long)bytes[k]);
        }
    } while (n > 0);
    for (uint32_t i = 0; i < posted; i++)
        CHECK(seen[i] == (i == RELEASED_UNPOLLED ? 0u : 1u), "operation %llu reported %u times",
              (unsigned long long)ops[i], seen[i]);
    CHECK(total == posted - 1 && failed == 1, "%u reports, %u with the injected completion fault", total, failed);
    for (uint32_t i = 0; i < posted; i++)
        if (i != RELEASED_UNPOLLED) CHECK_OK(kvt_xfer_release(agent, ops[i]));
    CHECK(counter(agent, KVT_COUNTER_LIVE_OPERATIONS) == 0, "every operation released");
    free_region(agent, region, memory);
    CHECK_OK(kvt_agent_destroy(agent));
}

TEST_MAIN("fault", TEST(fail_nth_registration), TEST(fail_nth_post_and_completion),
          TEST(held_read_keeps_everything_busy), TEST(finite_delay_completes), TEST(completions_are_never_dropped))
