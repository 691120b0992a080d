#include "harness.h"

#include <stdarg.h>
#include <string.h>

uint32_t test_backend = KVT_BACKEND_LOOPBACK;
bool test_under_valgrind = false;
static const char *current_case = "";
const char *test_skip_reason = NULL;

void test_fail(const char *file, int line, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    fprintf(stderr, "FAIL %s [%s] %s:%d: ", current_case, test_backend == KVT_BACKEND_UCX ? "ucx" : "loopback", file,
            line);
    vfprintf(stderr, fmt, args);
    fputc('\n', stderr);
    va_end(args);
    exit(1);
}

uint64_t counter(uint32_t agent, uint32_t index) {
    uint64_t values[KVT_COUNTER_COUNT];
    uint32_t n = 0;
    CHECK_OK(kvt_counters(agent, values, KVT_COUNTER_COUNT, &n));
    CHECK(n == KVT_COUNTER_COUNT && index < n, "counter %u unavailable (%u counters)", index, n);
    return values[index];
}

static void check_process_clean(void) {
    static const uint32_t gauges[] = {KVT_COUNTER_LIVE_AGENTS,       KVT_COUNTER_LIVE_REGISTRATIONS,
                                      KVT_COUNTER_REGISTERED_BYTES,  KVT_COUNTER_LIVE_ALLOCATIONS,
                                      KVT_COUNTER_ALLOCATED_BYTES,   KVT_COUNTER_LIVE_PEERS,
                                      KVT_COUNTER_LIVE_OPERATIONS,   KVT_COUNTER_INFLIGHT_OPERATIONS,
                                      KVT_COUNTER_PENDING_NOTIFICATIONS};
    for (size_t i = 0; i < sizeof gauges / sizeof gauges[0]; i++)
        CHECK(counter(0, gauges[i]) == 0, "after the case, process counter %s is %llu, expected 0",
              kvt_counter_name(gauges[i]), (unsigned long long)counter(0, gauges[i]));
}

int test_main(const char *suite, const struct test_entry *cases, size_t count) {
    const char *backend = getenv("KVT_TEST_BACKEND");
    if (backend && strcmp(backend, "ucx") == 0) test_backend = KVT_BACKEND_UCX;
    test_under_valgrind = getenv("KVT_TEST_UNDER_VALGRIND") != NULL;
    for (size_t i = 0; i < count; i++) {
        current_case = cases[i].name;
        test_skip_reason = NULL;
        cases[i].run();
        check_process_clean();
        const char *backend_name = test_backend == KVT_BACKEND_UCX ? "ucx" : "loopback";
        if (test_skip_reason)
            printf("skip %s/%s [%s]: %s\n", suite, cases[i].name, backend_name, test_skip_reason);
        else
            printf("ok %s/%s [%s]\n", suite, cases[i].name, backend_name);
        fflush(stdout);
    }
    return 0;
}

uint32_t make_agent(const char *name) {
    uint32_t agent = 0;
    CHECK_OK(kvt_agent_create(name, test_backend, 0, &agent));
    return agent;
}

uint32_t alloc_region(uint32_t agent, uint64_t length, uint8_t **out_memory) {
    uint64_t address = 0;
    uint32_t region = 0;
    CHECK_OK(kvt_mem_alloc(agent, length, 0, &address));
    CHECK_OK(kvt_mem_register(agent, address, length, KVT_MEM_DRAM, 0, &region));
    *out_memory = (uint8_t *)(uintptr_t)address;
    return region;
}

void free_region(uint32_t agent, uint32_t region, uint8_t *memory) {
    CHECK_OK(kvt_mem_deregister(agent, region));
    CHECK_OK(kvt_mem_free(agent, (uint64_t)(uintptr_t)memory));
}

uint32_t load_peer(uint32_t into, uint32_t source, uint64_t *out_generation) {
    uint64_t length = 0;
    CHECK_OK(kvt_agent_metadata(source, NULL, 0, &length));
    uint8_t *blob = malloc(length);
    CHECK(blob != NULL, "out of memory");
    CHECK_OK(kvt_agent_metadata(source, blob, length, &length));
    uint32_t peer = 0;
    uint64_t generation = 0;
    CHECK_OK(kvt_peer_load(into, blob, length, &peer, &generation));
    free(blob);
    if (out_generation) *out_generation = generation;
    return peer;
}

int32_t wait_op(uint32_t agent, uint64_t op, uint64_t *out_bytes) {
    for (int rounds = 0; rounds < 6000; rounds++) {
        kvt_status waited = kvt_agent_wait(agent, 10);
        CHECK(waited == KVT_OK || waited == KVT_ERR_TIMEOUT, "kvt_agent_wait: %s", kvt_status_name(waited));
        uint64_t ids[64], bytes[64];
        int32_t statuses[64];
        uint32_t n = 0;
        CHECK_OK(kvt_agent_poll(agent, 64, ids, statuses, bytes, &n));
        int32_t status = KVT_IN_PROGRESS;
        uint64_t done = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (ids[i] == op) {
                status = statuses[i];
                done = bytes[i];
            }
        }
        if (status != KVT_IN_PROGRESS) {
            if (out_bytes) *out_bytes = done;
            return status;
        }
        int32_t current = KVT_IN_PROGRESS;
        CHECK_OK(kvt_xfer_status(agent, op, &current, NULL, NULL));
        if (current != KVT_IN_PROGRESS && n == 0) {
            /* Reported to an earlier poll that consumed it: take the status directly. */
            CHECK_OK(kvt_xfer_status(agent, op, &current, out_bytes, NULL));
            return current;
        }
    }
    test_fail(__FILE__, __LINE__, "operation %llu did not finish within 60 s", (unsigned long long)op);
}

kvt_status post_one(uint32_t agent, uint32_t direction, uint32_t peer, uint64_t generation, uint32_t local_region,
                    uint64_t local_offset, uint32_t remote_region, uint64_t remote_offset, uint64_t length,
                    uint64_t *out_op) {
    const uint32_t zero = 0;
    return kvt_xfer_post(agent, direction, peer, generation, 1, &zero, &local_offset, &zero, &remote_offset, &length,
                         1, &local_region, 1, &remote_region, NULL, 0, out_op);
}

static uint8_t pattern_byte(uint64_t position, uint64_t seed) {
    uint64_t x = (position + 1) * 0x9E3779B97F4A7C15ull ^ seed * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    return (uint8_t)(x ^ (x >> 17));
}

void fill_pattern(uint8_t *memory, uint64_t length, uint64_t seed) {
    for (uint64_t i = 0; i < length; i++) memory[i] = pattern_byte(i, seed);
}

bool check_pattern(const uint8_t *memory, uint64_t length, uint64_t seed) {
    for (uint64_t i = 0; i < length; i++)
        if (memory[i] != pattern_byte(i, seed)) return false;
    return true;
}
