/* The progress thread's rounds over the operations in flight (kvt_ops_run), on backends of the test's own:
 * one whose every advance is one slice that never finishes (which operations a round reaches, and in what
 * order, with and without a caller waiting on a command), and one that finishes every operation in one
 * slice (when the consumer is woken for the completions). Backend-independent. */
#include <sched.h>
#include <sys/ioctl.h>

#include "agent.h"
#include "harness.h"

enum { OPS = 4, ROUNDS = 3 };

static uint64_t advanced[OPS * ROUNDS];
static unsigned advances;

static void one_slice(kvt_agent *agent, kvt_op *op) {
    (void)agent;
    if (advances < OPS * ROUNDS) advanced[advances] = op->id;
    advances++;
}

static const kvt_backend slicing_backend = {.advance = one_slice};

typedef struct {
    kvt_agent agent;
    kvt_op ops[OPS];
} round_world;

static round_world *world_with_ops(void) {
    round_world *world = calloc(1, sizeof *world);
    CHECK(world != NULL, "out of memory");
    world->agent.backend = &slicing_backend;
    atomic_init(&world->agent.poster_cpu, -1);
    for (unsigned i = 0; i < OPS; i++) {
        world->ops[i].id = i + 1;
        kvt_command post = {.kind = KVT_CMD_POST, .op = &world->ops[i]};
        kvt_ops_run(&world->agent, &post);
    }
    advances = 0;
    return world;
}

static void every_operation_gets_a_slice_per_round_in_posting_order(void) {
    round_world *world = world_with_ops();
    for (unsigned round = 0; round < ROUNDS; round++) kvt_ops_run(&world->agent, NULL);
    CHECK(advances == OPS * ROUNDS, "%u slices in %u rounds of %u operations", advances, ROUNDS, OPS);
    for (unsigned i = 0; i < OPS * ROUNDS; i++)
        CHECK(advanced[i] == i % OPS + 1, "slice %u went to operation %llu, not %u", i, (unsigned long long)advanced[i],
              i % OPS + 1);
    free(world);
}

/* Without the early end, a waiting caller waits for a slice of every operation: up to a few milliseconds
 * each (ISSUE_BUDGET_BYTES of copies), the JavaScript thread held all along. */
static void a_waiting_caller_ends_the_round_after_one_slice_and_the_next_round_goes_on_from_there(void) {
    round_world *world = world_with_ops();
    for (unsigned round = 0; round < OPS; round++) {
        atomic_store(&world->agent.commands.caller_waiting, true);
        kvt_ops_run(&world->agent, NULL);
        CHECK(advances == round + 1, "round %u with a caller waiting: %u slices in all, expected one per round", round,
              advances);
        CHECK(advanced[round] == round + 1,
              "round %u went to operation %llu: each round goes on where the last stopped", round,
              (unsigned long long)advanced[round]);
    }
    atomic_store(&world->agent.commands.caller_waiting, false);
    kvt_ops_run(&world->agent, NULL);
    CHECK(advances == 2 * OPS, "a round without a waiting caller reaches all %u operations (%u slices)", OPS,
          advances - OPS);
    for (unsigned i = OPS; i < 2 * OPS; i++)
        CHECK(advanced[i] == i - OPS + 1, "after the rotations the order is the posting order again (slice %u: %llu)",
              i, (unsigned long long)advanced[i]);
    unsigned count = 0;
    for (kvt_op *op = world->agent.active; op; op = op->next_active) count++;
    CHECK(count == OPS, "%u operations still listed as active, expected %u", count, OPS);
    CHECK(*world->agent.active_tail == NULL && world->agent.active_tail == &world->ops[OPS - 1].next_active,
          "the list's tail is the last operation's link");
    free(world);
}

static void issue_a_page(kvt_agent *agent, kvt_op *op) {
    (void)agent;
    op->bytes_issued += 4096;
}

static const kvt_backend issuing_backend = {.advance = issue_a_page};

/* A round that moved nothing says so, and the progress thread gives up its core (agent.c); a round that
 * copied or issued bytes says it moved, or every such round would pay a system call and maybe its slice. */
static void a_round_says_whether_an_operation_moved(void) {
    round_world *world = world_with_ops();
    CHECK(!kvt_ops_run(&world->agent, NULL), "a round whose operations issued nothing moved nothing");
    world->agent.backend = &issuing_backend;
    CHECK(kvt_ops_run(&world->agent, NULL), "a round whose operations issued bytes moved");
    free(world);
}

/* ---- announcing completions ---------------------------------------------------------------------- */

/* A backend whose every advance moves the whole operation, noting first how many wake-up bytes the
 * consumer has waiting on the pipe as that operation's slice begins. */
static int wake_read_fd;
static int waiting_at_slice[OPS];

static int wake_bytes_waiting(void) {
    int bytes = 0;
    CHECK(ioctl(wake_read_fd, FIONREAD, &bytes) == 0, "FIONREAD on the wake-up pipe failed");
    return bytes;
}

static void whole_operation(kvt_agent *agent, kvt_op *op) {
    (void)agent;
    waiting_at_slice[op->id - 1] = wake_bytes_waiting();
    atomic_store(&op->bytes_done, op->bytes_total);
    op->phase = KVT_PHASE_MOVED;
}

static const kvt_backend finishing_backend = {.advance = whole_operation};

typedef struct {
    kvt_agent agent;
    kvt_peer peer;
    kvt_conn conn;
    kvt_op ops[OPS];
} finishing_world;

/* OPS operations of `bytes` each, posted, on an agent with a real delivery (queue and wake-up pipe). */
static finishing_world *finishing_world_with_ops(uint64_t bytes) {
    finishing_world *world = calloc(1, sizeof *world);
    CHECK(world != NULL, "out of memory");
    kvt_agent *agent = &world->agent;
    agent->backend = &finishing_backend;
    atomic_init(&agent->poster_cpu, -1); /* as an agent no post reached yet */
    pthread_mutex_init(&agent->lock, NULL);
    CHECK_OK(kvt_delivery_init(&agent->delivery, &agent->lock, &agent->counters, NULL));
    wake_read_fd = agent->delivery.wake_pipe[0];
    world->conn.refs = OPS + 1; /* never the last reference: the world frees it */
    world->peer.conn = &world->conn;
    for (unsigned i = 0; i < OPS; i++) {
        kvt_op *op = &world->ops[i];
        op->id = i + 1;
        op->bytes_total = bytes;
        op->status = KVT_IN_PROGRESS;
        op->peer = &world->peer;
        op->conn = &world->conn;
        world->peer.busy++;
        /* As kvt_op_start_locked counts a posted operation: finishing it counts it down again. */
        kvt_counter_add(&agent->counters, KVT_COUNTER_INFLIGHT_OPERATIONS, 1);
        kvt_command post = {.kind = KVT_CMD_POST, .op = op};
        kvt_ops_run(agent, &post);
    }
    return world;
}

static void free_finishing_world(finishing_world *world) {
    kvt_delivery_destroy(&world->agent.delivery);
    pthread_mutex_destroy(&world->agent.lock);
    free(world);
}

static size_t queued_completions(kvt_agent *agent) {
    pthread_mutex_lock(&agent->delivery.lock);
    size_t count = agent->delivery.completion_count;
    pthread_mutex_unlock(&agent->delivery.lock);
    return count;
}

/* Keeps this thread on the core it is on (the rounds below ask which core they run on); restore_cores undoes
 * it. The core's number. */
static int pin_here(cpu_set_t *before) {
    CHECK(sched_getaffinity(0, sizeof *before, before) == 0, "sched_getaffinity failed");
    int cpu = sched_getcpu();
    CHECK(cpu >= 0, "sched_getcpu failed");
    cpu_set_t here;
    CPU_ZERO(&here);
    CPU_SET(cpu, &here);
    CHECK(sched_setaffinity(0, sizeof here, &here) == 0, "sched_setaffinity failed");
    return sched_getcpu();
}

static void restore_cores(const cpu_set_t *before) {
    CHECK(sched_setaffinity(0, sizeof *before, before) == 0, "sched_setaffinity failed");
}

/* Small operations that end in one round share one wake-up at its end, rather than one each with the
 * consumer woken (and the progress thread often preempted by it) between every two of them: so it goes
 * when the consumer posts from this thread's core. */
static void small_operations_ending_in_one_round_share_one_wake_up_at_its_end(void) {
    finishing_world *world = finishing_world_with_ops(KVT_WAKE_DEFER_BYTES / OPS);
    cpu_set_t before;
    atomic_store(&world->agent.poster_cpu, pin_here(&before));
    kvt_ops_run(&world->agent, NULL);
    restore_cores(&before);
    for (unsigned i = 0; i < OPS; i++)
        CHECK(waiting_at_slice[i] == 0, "operation %u's slice began with %d wake-up byte(s) already written", i + 1,
              waiting_at_slice[i]);
    CHECK(wake_bytes_waiting() == 1, "%d wake-up bytes after the round, expected one", wake_bytes_waiting());
    CHECK(queued_completions(&world->agent) == OPS, "%zu completions queued, expected %u",
          queued_completions(&world->agent), OPS);
    free_finishing_world(world);
}

/* A consumer that posts from another core hears of the round's first completions once the operations left
 * in the round have at most KVT_WAKE_AHEAD_BYTES to move: it posts the next ones while those move, and the
 * rest of the round's completions share the wake-up at its end. */
static void another_cores_consumer_hears_before_the_round_runs_out(void) {
    finishing_world *world = finishing_world_with_ops(KVT_WAKE_AHEAD_BYTES / 2);
    cpu_set_t before;
    atomic_store(&world->agent.poster_cpu, pin_here(&before) + 1);
    kvt_ops_run(&world->agent, NULL);
    restore_cores(&before);
    for (unsigned i = 0; i < OPS; i++) {
        int expected = i < 2 ? 0 : 1; /* after two, the last two have KVT_WAKE_AHEAD_BYTES left */
        CHECK(waiting_at_slice[i] == expected,
              "operation %u's slice began with %d wake-up byte(s) written, expected %d", i + 1, waiting_at_slice[i],
              expected);
    }
    CHECK(wake_bytes_waiting() == 1, "%d wake-up bytes after the round: one edge until the consumer polls",
          wake_bytes_waiting());
    CHECK(queued_completions(&world->agent) == OPS, "%zu completions queued, expected %u",
          queued_completions(&world->agent), OPS);
    free_finishing_world(world);
}

/* A completion is announced before a slice that may copy more than KVT_WAKE_DEFER_BYTES: the consumer
 * posts its next operation while that slice runs. */
static void a_completion_is_announced_before_a_large_slice(void) {
    finishing_world *world = finishing_world_with_ops(2 * (uint64_t)KVT_WAKE_DEFER_BYTES);
    kvt_ops_run(&world->agent, NULL);
    CHECK(waiting_at_slice[0] == 0, "the first slice began with a wake-up byte written");
    for (unsigned i = 1; i < OPS; i++)
        CHECK(waiting_at_slice[i] == 1,
              "operation %u's slice began with %d wake-up byte(s) written, expected the first completion's", i + 1,
              waiting_at_slice[i]);
    CHECK(wake_bytes_waiting() == 1, "%d wake-up bytes after the round: one edge until the consumer polls",
          wake_bytes_waiting());
    CHECK(queued_completions(&world->agent) == OPS, "%zu completions queued, expected %u",
          queued_completions(&world->agent), OPS);
    free_finishing_world(world);
}

TEST_MAIN("rounds", TEST(every_operation_gets_a_slice_per_round_in_posting_order),
          TEST(a_round_says_whether_an_operation_moved),
          TEST(a_waiting_caller_ends_the_round_after_one_slice_and_the_next_round_goes_on_from_there),
          TEST(small_operations_ending_in_one_round_share_one_wake_up_at_its_end),
          TEST(another_cores_consumer_hears_before_the_round_runs_out),
          TEST(a_completion_is_announced_before_a_large_slice));
