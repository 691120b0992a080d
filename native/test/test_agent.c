/* Agent lifecycle: names, backends, destroy refusals, the wake-up fd and waiting. */
#include "agent.h" /* kvt_agent_blocked_waits, agent->lock */
#include "harness.h"

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

static void create_and_destroy(void) {
    uint32_t a = make_agent("agent-a");
    uint32_t b = make_agent("agent-b");
    CHECK(a != b, "distinct ids");
    CHECK(counter(0, KVT_COUNTER_LIVE_AGENTS) == 2, "two live agents");
    CHECK_OK(kvt_agent_destroy(a));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_agent_destroy(a));
    CHECK_DETAIL("no live agent");
    CHECK_OK(kvt_agent_destroy(b));
    uint32_t again = make_agent("agent-a");
    CHECK(again != a, "ids are never reused");
    CHECK_OK(kvt_agent_destroy(again));
}

static void refuses_bad_names_flags_backends(void) {
    uint32_t agent = 0;
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_agent_create(NULL, test_backend, 0, &agent));
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_agent_create("has space", test_backend, 0, &agent));
    CHECK_DETAIL("0x20");
    char long_name[KVT_MAX_NAME + 2];
    memset(long_name, 'x', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_agent_create(long_name, test_backend, 0, &agent));
    long_name[KVT_MAX_NAME] = '\0';
    CHECK_OK(kvt_agent_create(long_name, test_backend, 0, &agent));
    CHECK_OK(kvt_agent_destroy(agent));
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_agent_create("flags", test_backend, KVT_AGENT_VRAM_STAGED << 1, &agent));
    CHECK_DETAIL("flags 0x2 are unknown");
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_agent_create("backend", 77, 0, &agent));
    CHECK_DETAIL("unknown backend 77");
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_agent_create("out", test_backend, 0, NULL));
    uint32_t first = make_agent("dup");
    CHECK_STATUS(KVT_ERR_NOT_ALLOWED, kvt_agent_create("dup", test_backend, 0, &agent));
    CHECK_DETAIL("'dup' already exists");
    CHECK_OK(kvt_agent_destroy(first));
}

static void destroy_refuses_while_memory_or_operations_remain(void) {
    uint32_t agent = make_agent("busy-agent");
    uint64_t address = 0;
    CHECK_OK(kvt_mem_alloc(agent, 4096, 0, &address));
    CHECK_STATUS(KVT_ERR_BUSY, kvt_agent_destroy(agent));
    CHECK_DETAIL("1 allocation(s)");
    uint32_t region = 0;
    CHECK_OK(kvt_mem_register(agent, address, 4096, KVT_MEM_DRAM, 0, &region));
    CHECK_STATUS(KVT_ERR_BUSY, kvt_agent_destroy(agent));
    CHECK_DETAIL("1 registration(s)");
    uint64_t generation = 0;
    uint32_t self = load_peer(agent, agent, &generation);
    uint64_t op = 0;
    CHECK_OK(post_one(agent, KVT_XFER_READ, self, generation, region, 0, region, 2048, 1024, &op));
    CHECK(wait_op(agent, op, NULL) == KVT_OK, "self read");
    CHECK_OK(kvt_mem_deregister(agent, region));
    CHECK_OK(kvt_mem_free(agent, address));
    CHECK_STATUS(KVT_ERR_BUSY, kvt_agent_destroy(agent));
    CHECK_DETAIL("1 operation(s)");
    CHECK_OK(kvt_xfer_release(agent, op));
    CHECK_OK(kvt_agent_destroy(agent)); /* peers go with the agent */
    CHECK(counter(0, KVT_COUNTER_ERRORS_FIRST + 5) >= 3, "BUSY refusals are counted");
}

static void wake_fd_signals_completions(void) {
    uint32_t agent = make_agent("waker");
    int32_t fd = -1;
    CHECK_OK(kvt_agent_wake_fd(agent, &fd));
    CHECK(fd >= 0, "a file descriptor");
    struct pollfd p = {.fd = fd, .events = POLLIN};
    CHECK(poll(&p, 1, 0) == 0, "nothing pending at first");
    CHECK_STATUS(KVT_ERR_TIMEOUT, kvt_agent_wait(agent, 1));
    uint8_t *memory;
    uint32_t region = alloc_region(agent, 8192, &memory);
    uint64_t generation;
    uint32_t self = load_peer(agent, agent, &generation);
    uint64_t ops[3];
    for (int i = 0; i < 3; i++)
        CHECK_OK(post_one(agent, KVT_XFER_WRITE, self, generation, region, 0, region, 4096, 4096, &ops[i]));
    CHECK(poll(&p, 1, 60000) == 1, "the wake fd becomes readable");
    char buffer[16];
    CHECK(read(fd, buffer, sizeof buffer) >= 1, "a wake byte");
    /* Collect all three completions through the batched poll. */
    wait_completions_ok(agent, 3, 4096, false);
    uint32_t n = 7;
    CHECK_OK(kvt_agent_poll(agent, 0, NULL, NULL, NULL, &n, NULL));
    CHECK(n == 0, "each completion is reported once");
    for (int i = 0; i < 3; i++) CHECK_OK(kvt_xfer_release(agent, ops[i]));
    free_region(agent, region, memory);
    CHECK_OK(kvt_agent_destroy(agent));
}

static void stale_handles_are_not_found(void) {
    uint32_t agent = make_agent("stale");
    CHECK_OK(kvt_agent_destroy(agent));
    int32_t fd;
    uint64_t address;
    uint32_t n;
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_agent_wake_fd(agent, &fd));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_mem_alloc(agent, 4096, 0, &address));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_agent_poll(agent, 0, NULL, NULL, NULL, &n, NULL));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_agent_wait(agent, 0));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_agent_destroy(0));
}

typedef struct {
    uint32_t agent;
    uint8_t *memory;
    _Atomic int registered;
} churn_args;

/* Registers and deregisters until the agent is gone. Its destroy lands anywhere in this loop: a call
 * that finds the agent gone ends the loop, and every other answer is the one a live agent gives. */
static void *churn(void *arg) {
    churn_args *args = arg;
    for (;;) {
        uint32_t region;
        kvt_status status =
            kvt_mem_register(args->agent, (uint64_t)(uintptr_t)args->memory, 4096, KVT_MEM_DRAM, 0, &region);
        if (status == KVT_ERR_NOT_FOUND) return NULL;
        CHECK(status == KVT_OK, "register: %s (%s)", kvt_status_name(status), kvt_last_error_detail());
        args->registered++;
        CHECK_OK(kvt_mem_deregister(args->agent, region)); /* the destroy is refused while the region lives */
        uint32_t n = 0;
        status = kvt_agent_poll(args->agent, 0, NULL, NULL, NULL, &n, NULL);
        if (status == KVT_ERR_NOT_FOUND) return NULL;
        CHECK(status == KVT_OK, "poll: %s (%s)", kvt_status_name(status), kvt_last_error_detail());
    }
}

static bool churned_fifty_times(void *context) {
    const churn_args *args = context;
    return args->registered >= 50;
}

static void destroy_races_other_calls(void) {
    uint32_t agent = make_agent("racer");
    churn_args args = {.agent = agent, .memory = malloc(4096)};
    pthread_t churner;
    CHECK(pthread_create(&churner, NULL, churn, &args) == 0, "thread");
    wait_until(agent, churned_fifty_times, &args, "fifty registrations by the churning thread", WAIT_DEADLINE_MS);
    for (;;) { /* BUSY while the churner holds a registration */
        kvt_status status = kvt_agent_destroy(agent);
        if (status == KVT_OK) break;
        CHECK(status == KVT_ERR_BUSY, "destroy: %s", kvt_status_name(status));
    }
    pthread_join(churner, NULL);
    free(args.memory);
}

typedef struct {
    uint32_t agent, timeout_ms;
    kvt_status waited;
} long_wait;

static void *wait_long(void *arg) {
    long_wait *wait = arg;
    wait->waited = kvt_agent_wait(wait->agent, wait->timeout_ms);
    return NULL;
}

typedef struct {
    uint32_t agent, count;
} blocked_waits;

static bool waits_blocked(void *context) {
    const blocked_waits *expected = context;
    uint32_t count = 0;
    CHECK_OK(kvt_agent_blocked_waits(expected->agent, &count));
    return count == expected->count;
}

/* Starts a thread that waits on `agent` and returns once that wait is blocked. */
static pthread_t start_blocked_wait(long_wait *wait) {
    pthread_t waiter;
    CHECK(pthread_create(&waiter, NULL, wait_long, wait) == 0, "thread");
    blocked_waits one = {.agent = wait->agent, .count = 1};
    wait_until(wait->agent, waits_blocked, &one, "the waiting thread to block in kvt_agent_wait", WAIT_DEADLINE_MS);
    return waiter;
}

/* The test hook the next case orders its calls by: it counts a wait while it blocks, and only then. */
static void blocked_waits_are_counted(void) {
    uint32_t agent = make_agent("blocked-waits");
    uint32_t count = 7;
    CHECK_OK(kvt_agent_blocked_waits(agent, &count));
    CHECK(count == 0, "no wait at first (%u)", count);
    uint8_t *memory;
    uint32_t region = alloc_region(agent, 8192, &memory);
    uint64_t generation;
    uint32_t self = load_peer(agent, agent, &generation);
    long_wait wait = {.agent = agent, .timeout_ms = 600000, .waited = KVT_IN_PROGRESS};
    pthread_t waiter = start_blocked_wait(&wait);
    uint64_t op;
    CHECK_OK(post_one(agent, KVT_XFER_WRITE, self, generation, region, 0, region, 4096, 4096, &op));
    pthread_join(waiter, NULL);
    CHECK(wait.waited == KVT_OK, "the blocked wait ended on the completion (%s)", kvt_status_name(wait.waited));
    CHECK_OK(kvt_agent_blocked_waits(agent, &count));
    CHECK(count == 0, "no wait is counted once it returned (%u)", count);
    CHECK(wait_op(agent, op, NULL) == KVT_OK, "the write");
    CHECK_OK(kvt_xfer_release(agent, op));
    free_region(agent, region, memory);
    CHECK_OK(kvt_agent_destroy(agent));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_agent_blocked_waits(agent, &count));
}

typedef struct {
    uint32_t agent;
    uint64_t op_id, bytes;
    int32_t op_status;
    uint32_t completions, notifications, peer_events;
    char sender[KVT_MAX_NAME + 1];
    uint8_t data[KVT_MAX_NOTIFICATION];
    uint32_t data_length;
    atomic_bool done;
} consumer_polls;

/* What a consumer does after a wake-up: every poll once. */
static void *poll_everything(void *arg) {
    consumer_polls *polls = arg;
    CHECK_OK(
        kvt_agent_poll(polls->agent, 1, &polls->op_id, &polls->op_status, &polls->bytes, &polls->completions, NULL));
    CHECK_OK(kvt_notify_poll(polls->agent, polls->sender, sizeof polls->sender, polls->data, sizeof polls->data,
                             &polls->data_length, &polls->notifications));
    uint32_t peer_id, kind;
    uint64_t silence_ms;
    CHECK_OK(kvt_peer_events_poll(polls->agent, 1, &peer_id, &kind, &silence_ms, &polls->peer_events));
    atomic_store(&polls->done, true);
    return NULL;
}

static bool polled(void *context) { return atomic_load(&((consumer_polls *)context)->done); }

typedef struct {
    uint32_t agent;
    uint64_t op;
} op_ref;

/* Whether the op is terminal, read by status alone: its completion stays queued for the polls. */
static bool op_ended(void *context) {
    const op_ref *ref = context;
    int32_t status;
    uint64_t bytes;
    CHECK_OK(kvt_xfer_status(ref->agent, ref->op, &status, &bytes, NULL));
    return status != KVT_IN_PROGRESS;
}

/* The polls a consumer makes after a wake-up never wait for the agent lock, which the progress thread takes
 * while it works (and may be preempted holding): here the test holds it through all of them. */
static void polls_do_not_wait_for_the_agent_lock(void) {
    uint32_t agent_id = make_agent("lock-free-polls");
    uint8_t *memory;
    uint32_t region = alloc_region(agent_id, 8192, &memory);
    uint64_t generation;
    uint32_t self = load_peer(agent_id, agent_id, &generation);
    uint64_t op;
    CHECK_OK(post_one(agent_id, KVT_XFER_WRITE, self, generation, region, 0, region, 4096, 4096, &op));
    op_ref ref = {.agent = agent_id, .op = op};
    wait_until(agent_id, op_ended, &ref, "the write to end", WAIT_DEADLINE_MS);
    CHECK_OK(kvt_notify_send(agent_id, self, generation, (const uint8_t *)"ping", 4));
    wait_counter_at_least(agent_id, KVT_COUNTER_NOTIFICATIONS_RECEIVED, 1);

    kvt_agent *agent;
    CHECK_OK(kvt_agent_acquire(agent_id, "test", &agent));
    pthread_mutex_lock(&agent->lock);
    consumer_polls polls = {.agent = agent_id};
    pthread_t consumer;
    CHECK(pthread_create(&consumer, NULL, poll_everything, &polls) == 0, "thread");
    wait_until(0, polled, &polls, "the polls while the agent lock is held", WAIT_DEADLINE_MS);
    pthread_mutex_unlock(&agent->lock);
    kvt_agent_release(agent);
    pthread_join(consumer, NULL);

    CHECK(polls.completions == 1 && polls.op_id == op && polls.op_status == KVT_OK && polls.bytes == 4096,
          "the completion (%u: op %llu, %s, %llu bytes)", polls.completions, (unsigned long long)polls.op_id,
          kvt_status_name(polls.op_status), (unsigned long long)polls.bytes);
    CHECK(polls.notifications == 1 && polls.data_length == 4 && memcmp(polls.data, "ping", 4) == 0 &&
              strcmp(polls.sender, "lock-free-polls") == 0,
          "the notification (%u, from '%s')", polls.notifications, polls.sender);
    CHECK(polls.peer_events == 0, "no peer report (%u)", polls.peer_events);
    CHECK_OK(kvt_xfer_release(agent_id, op));
    free_region(agent_id, region, memory);
    CHECK_OK(kvt_agent_destroy(agent_id));
}

/* Reads every byte on the wake-up pipe: whether there was any. */
static bool drain_wake_bytes(int32_t fd) {
    char buffer[16];
    bool any = false;
    while (read(fd, buffer, sizeof buffer) > 0) any = true;
    return any;
}

/* Waits for a byte the progress thread writes (after it released its locks), then reads every byte. */
static bool awaited_wake_bytes(int32_t fd) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, WAIT_DEADLINE_MS) == 1 && drain_wake_bytes(fd);
}

/* Posts a self-write and waits for its end by status alone, leaving its completion queued. */
static uint64_t ended_write(uint32_t agent, uint32_t self, uint64_t generation, uint32_t region) {
    uint64_t op;
    CHECK_OK(post_one(agent, KVT_XFER_WRITE, self, generation, region, 0, region, 4096, 4096, &op));
    op_ref ref = {.agent = agent, .op = op};
    wait_until(agent, op_ended, &ref, "the write to end", WAIT_DEADLINE_MS);
    return op;
}

/* kvt_agent_poll says what else is queued, re-arms the wake-up edge in the same hold of the delivery lock (a
 * byte exactly when something is left), and whatever is queued after it writes a byte again. */
static void poll_reports_what_is_pending(void) {
    uint32_t agent = make_agent("pending-bits");
    int32_t fd = -1;
    CHECK_OK(kvt_agent_wake_fd(agent, &fd));
    uint8_t *memory;
    uint32_t region = alloc_region(agent, 8192, &memory);
    uint64_t generation;
    uint32_t self = load_peer(agent, agent, &generation);
    uint64_t first = ended_write(agent, self, generation, region);
    CHECK_OK(kvt_notify_send(agent, self, generation, (const uint8_t *)"ping", 4));
    wait_counter_at_least(agent, KVT_COUNTER_NOTIFICATIONS_RECEIVED, 1);
    CHECK(awaited_wake_bytes(fd), "a byte for what became pending (one: the edge fired once)");

    uint64_t id, bytes;
    int32_t status;
    uint32_t n = 7, pending = 0;
    CHECK_OK(kvt_agent_poll(agent, 0, NULL, NULL, NULL, &n, &pending));
    CHECK(n == 0 && pending == (KVT_PENDING_COMPLETIONS | KVT_PENDING_NOTIFICATIONS), "both pending (%u)", pending);
    CHECK(drain_wake_bytes(fd), "a byte for what the poll left");
    CHECK_OK(kvt_agent_poll(agent, 1, &id, &status, &bytes, &n, &pending));
    CHECK(n == 1 && id == first && pending == KVT_PENDING_NOTIFICATIONS, "the notification left (%u)", pending);
    CHECK(drain_wake_bytes(fd), "a byte for the notification left");
    char sender[KVT_MAX_NAME + 1];
    uint8_t data[8];
    uint32_t length, got;
    CHECK_OK(kvt_notify_poll(agent, sender, sizeof sender, data, sizeof data, &length, &got));
    CHECK(got == 1, "the notification");
    CHECK_OK(kvt_agent_poll(agent, 1, &id, &status, &bytes, &n, &pending));
    CHECK(n == 0 && pending == 0, "nothing left (%u, %u)", n, pending);
    CHECK(!drain_wake_bytes(fd), "no byte when nothing is left");

    uint64_t second = ended_write(agent, self, generation, region);
    CHECK(awaited_wake_bytes(fd), "a completion after the poll writes a byte");
    CHECK_OK(kvt_agent_poll(agent, 1, &id, &status, &bytes, &n, NULL));
    CHECK(n == 1 && id == second, "the second completion without the bits");
    CHECK(!drain_wake_bytes(fd), "no byte when nothing is left");
    CHECK_OK(kvt_xfer_release(agent, first));
    CHECK_OK(kvt_xfer_release(agent, second));
    free_region(agent, region, memory);
    CHECK_OK(kvt_agent_destroy(agent));
}

/* A wait already blocked when the destroy starts is cut short: nothing pending, so KVT_ERR_TIMEOUT long
 * before its 600 s. A wait that starts after the destroy finds no agent. */
static void destroy_cuts_a_blocked_wait_short(void) {
    uint32_t agent = make_agent("cut-short");
    long_wait wait = {.agent = agent, .timeout_ms = 600000, .waited = KVT_IN_PROGRESS};
    pthread_t waiter = start_blocked_wait(&wait);
    CHECK_OK(kvt_agent_destroy(agent));
    pthread_join(waiter, NULL);
    CHECK(wait.waited == KVT_ERR_TIMEOUT, "the blocked wait ended %s, expected TIMEOUT", kvt_status_name(wait.waited));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_agent_wait(agent, 600000));
}

TEST_MAIN("agent", TEST(create_and_destroy), TEST(refuses_bad_names_flags_backends),
          TEST(destroy_refuses_while_memory_or_operations_remain), TEST(wake_fd_signals_completions),
          TEST(stale_handles_are_not_found), TEST(destroy_races_other_calls), TEST(blocked_waits_are_counted),
          TEST(destroy_cuts_a_blocked_wait_short), TEST(polls_do_not_wait_for_the_agent_lock),
          TEST(poll_reports_what_is_pending))
