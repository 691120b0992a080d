/* Sharing a core with Node's thread: the agent's thread is a batch thread called kvt-progress (its wake-ups do
 * not preempt the thread that woke it), and in a long stretch of work it yields the core once a millisecond. */
#include "harness.h"
#include "services/stretch.h"
#include "services/util.h"

#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

/* Whether thread `tid` of this process is called `name`. */
static bool named(pid_t tid, const char *name) {
    char path[64], comm[32] = "";
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)tid);
    FILE *file = fopen(path, "r");
    if (!file) return false; /* ended meanwhile */
    bool read = fgets(comm, sizeof comm, file) != NULL;
    fclose(file);
    comm[strcspn(comm, "\n")] = '\0';
    return read && strcmp(comm, name) == 0;
}

/* How many of this process's threads run under `policy` (and are called `name`, unless NULL). */
static int threads_under(int policy, const char *name) {
    DIR *tasks = opendir("/proc/self/task");
    CHECK(tasks != NULL, "/proc/self/task lists this process's threads");
    int count = 0;
    for (struct dirent *task; (task = readdir(tasks));) {
        if (task->d_name[0] == '.') continue;
        pid_t tid = (pid_t)atoi(task->d_name);
        if (sched_getscheduler(tid) == policy && (!name || named(tid, name))) count++;
    }
    closedir(tasks);
    return count;
}

static void the_agents_thread_is_a_batch_thread(void) {
    CHECK(threads_under(SCHED_BATCH, NULL) == 0, "no batch thread before the agent");
    uint32_t agent = make_agent("batch");
    CHECK(threads_under(SCHED_BATCH, NULL) >= 1, "the agent's thread runs as SCHED_BATCH");
    CHECK(threads_under(SCHED_BATCH, "kvt-progress") == 1, "it is called kvt-progress");
    CHECK(sched_getscheduler(0) == SCHED_OTHER, "the caller's thread keeps its policy");
    CHECK_OK(kvt_agent_destroy(agent));
    CHECK(threads_under(SCHED_BATCH, NULL) == 0, "gone with the agent");
}

static void *create_under_the_idle_policy(void *arg) {
    (void)arg;
    struct sched_param param = {.sched_priority = 0};
    CHECK(pthread_setschedparam(pthread_self(), SCHED_IDLE, &param) == 0, "this thread runs as SCHED_IDLE");
    uint32_t agent = make_agent("idle");
    CHECK(threads_under(SCHED_BATCH, NULL) == 0, "an agent's thread under the application's own policy keeps it");
    CHECK(threads_under(SCHED_IDLE, NULL) >= 2, "the agent's thread runs as SCHED_IDLE, like its creator");
    CHECK_OK(kvt_agent_destroy(agent));
    return NULL;
}

static void a_policy_of_the_applications_own_is_kept(void) {
    pthread_t creator;
    CHECK(pthread_create(&creator, NULL, create_under_the_idle_policy, NULL) == 0, "creator thread started");
    CHECK(pthread_join(creator, NULL) == 0, "creator thread joined");
}

/* Spins until `stretch_ns` has passed since `since`. */
static void work_until(uint64_t since, uint64_t stretch_ns) {
    while (kvt_now_ns() - since < stretch_ns) {
    }
}

static void a_stretch_yields_once_it_has_lasted_a_millisecond(void) {
    uint64_t since = kvt_now_ns();
    work_until(since, 2 * KVT_STRETCH_NS);
    CHECK(!kvt_stretch_check(), "a thread that never began a stretch (not an agent's thread) never yields");
    kvt_stretch_begin();
    since = kvt_now_ns();
    work_until(since, KVT_STRETCH_NS);
    CHECK(kvt_stretch_check(), "a stretch of a millisecond yields");
    since = kvt_now_ns();
    work_until(since, KVT_STRETCH_NS);
    CHECK(kvt_stretch_check(), "and so does the next one, begun by that yield");
}

TEST_MAIN("stretch", TEST(the_agents_thread_is_a_batch_thread), TEST(a_policy_of_the_applications_own_is_kept),
          TEST(a_stretch_yields_once_it_has_lasted_a_millisecond))
