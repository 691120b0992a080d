/* Status codes, error details, version, capabilities and counter names. */
#include "harness.h"

#include <time.h>

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

TEST_MAIN("status", TEST(status_names_and_texts), TEST(detail_is_thread_local_and_cleared),
          TEST(version_and_capabilities), TEST(counter_names), TEST(thread_usage_counts_blocking))
