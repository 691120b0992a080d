/* The progress thread's rounds over the operations in flight (kvt_ops_run), on a backend of the test's own
 * whose every advance is one slice that never finishes: which operations a round reaches, and in what
 * order, with and without a caller waiting on a command. Backend-independent. */
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

TEST_MAIN("rounds", TEST(every_operation_gets_a_slice_per_round_in_posting_order),
          TEST(a_waiting_caller_ends_the_round_after_one_slice_and_the_next_round_goes_on_from_there));
