/* Status codes, error details, version, capabilities and counter names. */
#include "harness.h"
#include "services/util.h"

#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

static void status_names_and_texts(void) {
    CHECK(strcmp(kvt_status_name(KVT_OK), "KVT_OK") == 0, "KVT_OK name");
    CHECK(strcmp(kvt_status_name(KVT_ERR_BUSY), "KVT_ERR_BUSY") == 0, "BUSY name");
    CHECK(strcmp(kvt_status_name(KVT_ERR_NO_MEMORY), "KVT_ERR_NO_MEMORY") == 0, "NO_MEMORY name");
    CHECK(strcmp(kvt_status_name(-999), "KVT_UNKNOWN_STATUS") == 0, "unknown name");
    for (int32_t code = -KVT_ERROR_CODE_COUNT; code <= KVT_IN_PROGRESS; code++) {
        CHECK(strncmp(kvt_status_name(code), "KVT_", 4) == 0, "code %d has a name", code);
        CHECK(strcmp(kvt_strerror(code), "unknown status") != 0, "code %d has a text", code);
    }
    CHECK(strcmp(kvt_strerror(12345), "unknown status") == 0, "unknown text");
}

static void detail_is_thread_local_and_cleared(void) {
    uint32_t agent = 0;
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_agent_create("", test_backend, 0, &agent));
    CHECK_DETAIL("name");
    uint32_t n = 0;
    uint64_t values[KVT_CAP_COUNT];
    CHECK_OK(kvt_capabilities(values, KVT_CAP_COUNT, &n));
    CHECK(kvt_last_error_detail()[0] == '\0', "a successful call clears the detail");
}

static void version_and_capabilities(void) {
    uint32_t major = 99, minor = 99, patch = 99;
    CHECK_OK(kvt_version(&major, &minor, &patch));
    CHECK(major == KVT_VERSION_MAJOR && minor == KVT_VERSION_MINOR && patch == KVT_VERSION_PATCH, "version");
    CHECK(strstr(kvt_version_string(), "loopback") != NULL, "version string names the backends");
    uint64_t values[KVT_CAP_COUNT + 4];
    uint32_t n = 0;
    CHECK_OK(kvt_capabilities(values, KVT_CAP_COUNT + 4, &n));
    CHECK(n == KVT_CAP_COUNT, "capability count %u", n);
    CHECK(values[KVT_CAP_BACKENDS] & (1u << KVT_BACKEND_LOOPBACK), "loopback is always built");
    /* Its value on each kind of machine: test_cuda. */
    CHECK(strncmp(kvt_capability_detail(KVT_CAP_VRAM), values[KVT_CAP_VRAM] ? "yes: " : "no: ", 3) == 0,
          "the vram reason agrees with the value");
    CHECK(values[KVT_CAP_MAX_DESCRIPTORS] == KVT_MAX_DESCRIPTORS, "max descriptors");
    CHECK(values[KVT_CAP_MAX_NOTIFICATION] == KVT_MAX_NOTIFICATION, "max notification");
    if (test_backend == KVT_BACKEND_UCX)
        CHECK(values[KVT_CAP_BACKENDS] & (1u << KVT_BACKEND_UCX), "the ucx backend under test is built");
    for (uint32_t cap = 0; cap < KVT_CAP_COUNT; cap++) CHECK(kvt_capability_detail(cap) != NULL, "detail %u", cap);
    CHECK(kvt_capability_detail(KVT_CAP_COUNT) == NULL, "unknown capability");
    CHECK_OK(kvt_capabilities(values, 2, &n));
    CHECK(n == 2, "a short array gets a prefix");
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_capabilities(NULL, 3, &n));
}

static void counter_names(void) {
    CHECK(strcmp(kvt_counter_name(KVT_COUNTER_LIVE_REGISTRATIONS), "live_registrations") == 0, "name");
    CHECK(strcmp(kvt_counter_name(KVT_COUNTER_ERRORS_FIRST + 5), "errors.KVT_ERR_BUSY") == 0, "busy counter name");
    CHECK(kvt_counter_name(KVT_COUNTER_COUNT) == NULL, "past the end");
    for (uint32_t i = 0; i < KVT_COUNTER_COUNT; i++) CHECK(kvt_counter_name(i) != NULL, "counter %u has a name", i);
}

static void thread_usage_counts_blocking(void) {
    uint64_t before[3] = {0}, after[3] = {0}, prefix[2] = {0, 77};
    CHECK_OK(kvt_thread_usage(before, 3));
    struct timespec nap = {.tv_sec = 0, .tv_nsec = 2000000};
    nanosleep(&nap, NULL); /* the thread sleeps: a voluntary context switch */
    CHECK_OK(kvt_thread_usage(after, 3));
    CHECK(after[0] >= before[0], "cpu time does not go back (%llu, %llu)", (unsigned long long)before[0],
          (unsigned long long)after[0]);
    CHECK(after[1] >= before[1] + 1, "the sleep counts as blocked (%llu, %llu)", (unsigned long long)before[1],
          (unsigned long long)after[1]);
    CHECK(after[2] >= before[2], "preemptions do not go back");
    CHECK_OK(kvt_thread_usage(prefix, 1));
    CHECK(prefix[1] == 77, "a short array gets a prefix");
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_thread_usage(NULL, 3));
    CHECK_DETAIL("values");
}

static atomic_bool spinner_runs, spinner_stop;

static void *spin_until_stopped(void *unused) {
    (void)unused;
    atomic_store(&spinner_runs, true);
    while (!atomic_load(&spinner_stop)) {
    }
    return NULL;
}

static uint64_t run_delay_now(void) {
    uint64_t values[4] = {0};
    CHECK_OK(kvt_thread_usage(values, 4));
    return values[3];
}

/* The thread shares one CPU with a thread that spins: it cannot run all the time, so its run-queue delay
 * must grow (the scheduler's fairness forces the hand-over; the loop ends at the first one). */
static void thread_usage_counts_waiting_for_a_core(void) {
    if (access("/proc/thread-self/schedstat", R_OK) != 0) {
        CHECK(run_delay_now() == UINT64_MAX, "a kernel without schedstat reports the delay as unknown");
        return;
    }
    uint64_t before = run_delay_now();
    CHECK(before != UINT64_MAX, "the kernel reports the delay");
    cpu_set_t saved, one;
    CHECK(sched_getaffinity(0, sizeof saved, &saved) == 0, "affinity read");
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0, "pinned to one CPU");
    atomic_store(&spinner_runs, false);
    atomic_store(&spinner_stop, false);
    pthread_t spinner;
    CHECK(pthread_create(&spinner, NULL, spin_until_stopped, NULL) == 0, "spinner started"); /* inherits the pin */
    uint64_t deadline = kvt_now_ns() + 30ull * 1000000000ull;
    uint64_t after = before;
    while ((after == before || !atomic_load(&spinner_runs)) && kvt_now_ns() < deadline) after = run_delay_now();
    atomic_store(&spinner_stop, true);
    pthread_join(spinner, NULL);
    CHECK(sched_setaffinity(0, sizeof saved, &saved) == 0, "affinity restored");
    CHECK(atomic_load(&spinner_runs), "the spinner ran on the shared CPU");
    CHECK(after > before, "the wait for the core counts (%llu ns, then %llu ns)", (unsigned long long)before,
          (unsigned long long)after);
}

static int open_fds(void) {
    DIR *dir = opendir("/proc/self/fd");
    int count = 0;
    while (dir && readdir(dir)) count++;
    if (dir) closedir(dir);
    return count;
}

static void *read_run_delay(void *out) {
    *(uint64_t *)out = run_delay_now();
    return NULL;
}

/* The file a thread reads its delay from goes with the thread. */
static void a_thread_that_read_its_delay_leaves_no_file_open(void) {
    int before = open_fds();
    for (int i = 0; i < 4; i++) {
        uint64_t delay = 0;
        pthread_t reader;
        CHECK(pthread_create(&reader, NULL, read_run_delay, &delay) == 0, "reader started");
        pthread_join(reader, NULL);
    }
    CHECK(open_fds() == before, "no file left open (%d before, %d after)", before, open_fds());
}

TEST_MAIN("status", TEST(status_names_and_texts), TEST(detail_is_thread_local_and_cleared),
          TEST(version_and_capabilities), TEST(counter_names), TEST(thread_usage_counts_blocking),
          TEST(thread_usage_counts_waiting_for_a_core), TEST(a_thread_that_read_its_delay_leaves_no_file_open))
