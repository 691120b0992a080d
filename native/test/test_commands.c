/* The progress thread's command queue: a command posted while the thread decides to sleep is never lost.
 * The thread's side (kvt_commands_sleep_begin: "I may sleep" unless a command is pending) and a post (queue,
 * then kick only a thread that may be asleep) are run here in each order, on one thread, so every case is
 * forced rather than timed; the eventfd the thread sleeps on is read with a zero-timeout poll. */
#include "harness.h"

#include "services/commands.h"

#include <poll.h>
#include <pthread.h>

typedef struct {
    pthread_mutex_t owner;
    kvt_command_queue queue;
} bare_queue;

static void open_queue(bare_queue *q) {
    memset(q, 0, sizeof *q); /* as an agent's, which calloc zeroes */
    pthread_mutex_init(&q->owner, NULL);
    CHECK(kvt_commands_init(&q->queue, &q->owner), "an eventfd for the queue");
}

static void close_queue(bare_queue *q) {
    kvt_commands_destroy(&q->queue);
    pthread_mutex_destroy(&q->owner);
}

/* Whether a sleep on the queue's eventfd would return at once: a kick is counted there. */
static bool kicked(const bare_queue *q) {
    struct pollfd fd = {.fd = q->queue.fd, .events = POLLIN};
    return poll(&fd, 1, 0) == 1;
}

static kvt_command post_command(void) { return (kvt_command){.kind = KVT_CMD_POST}; }

/* Posts `command` to a thread that is awake: no kick, and its next decision sees the command, so it does not
 * sleep; the command is then taken. */
static void post_to_an_awake_thread(bare_queue *q, kvt_command *command) {
    kvt_command_post(&q->queue, command);
    CHECK(!kicked(q), "an awake thread is not kicked");
    CHECK(!kvt_commands_sleep_begin(&q->queue), "the thread sees the pending command and does not sleep");
    kvt_commands_sleep_end(&q->queue);
    CHECK(kvt_commands_take(&q->queue) == command, "the command is taken");
}

/* Posted before the thread looks. */
static void post_then_sleep_decision(void) {
    bare_queue q;
    open_queue(&q);
    kvt_command command = post_command();
    post_to_an_awake_thread(&q, &command);
    close_queue(&q);
}

/* Posted after the thread decided to sleep: the post kicks it, so its sleep ends at once. */
static void sleep_decision_then_post(void) {
    bare_queue q;
    open_queue(&q);
    CHECK(kvt_commands_sleep_begin(&q.queue), "with nothing pending the thread may sleep");
    CHECK(!kicked(&q), "nothing kicked it yet");
    kvt_command command = post_command();
    kvt_command_post(&q.queue, &command);
    CHECK(kicked(&q), "a thread that may be asleep is kicked");
    kvt_commands_sleep_end(&q.queue);
    CHECK(!kicked(&q), "the kick is consumed when the sleep ends");
    CHECK(kvt_commands_take(&q.queue) == &command, "the command is taken");
    CHECK(kvt_commands_take(&q.queue) == NULL, "and only it");
    close_queue(&q);
}

/* Posted after the thread woke (for something else) and before its next decision. */
static void post_between_two_sleeps(void) {
    bare_queue q;
    open_queue(&q);
    CHECK(kvt_commands_sleep_begin(&q.queue), "with nothing pending the thread may sleep");
    kvt_commands_sleep_end(&q.queue);
    kvt_command command = post_command();
    post_to_an_awake_thread(&q, &command);
    close_queue(&q);
}

TEST_MAIN("commands", TEST(post_then_sleep_decision), TEST(sleep_decision_then_post), TEST(post_between_two_sleeps))
