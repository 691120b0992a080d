/* Small helpers: clock, CRC-32, randomness and a uint64 → pointer map. */
#include "services/util.h"

#include "services/status.h"

#include <fcntl.h>
#include <pthread.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

uint64_t kvt_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t kvt_thread_cpu_ns(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Each thread that asks for its run-queue delay keeps its schedstat file open (read again from its start
 * each time: one system call); the key's destructor closes it when the thread ends. Stored as fd + 1. */
static pthread_key_t schedstat_key;
static pthread_once_t schedstat_once = PTHREAD_ONCE_INIT;
static bool schedstat_key_ready;

static void close_schedstat(void *stored) { close((int)(intptr_t)stored - 1); }

static void schedstat_key_init(void) { schedstat_key_ready = pthread_key_create(&schedstat_key, close_schedstat) == 0; }

/* The time the calling thread has waited on a run queue (runnable, without a core) in ns, the second field of
 * /proc/thread-self/schedstat; UINT64_MAX when the kernel does not report it. */
static uint64_t thread_run_delay_ns(void) {
    pthread_once(&schedstat_once, schedstat_key_init);
    if (!schedstat_key_ready) return UINT64_MAX;
    int fd = (int)(intptr_t)pthread_getspecific(schedstat_key) - 1;
    if (fd < 0) {
        fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
        if (fd < 0) return UINT64_MAX;
        if (pthread_setspecific(schedstat_key, (void *)(intptr_t)(fd + 1)) != 0) {
            close(fd);
            return UINT64_MAX;
        }
    }
    char text[96];
    ssize_t length = pread(fd, text, sizeof text - 1, 0);
    if (length <= 0) return UINT64_MAX;
    text[length] = '\0';
    unsigned long long running_ns, waiting_ns;
    if (sscanf(text, "%llu %llu", &running_ns, &waiting_ns) != 2) return UINT64_MAX;
    return (uint64_t)waiting_ns;
}

int32_t kvt_thread_usage(uint64_t *values, uint32_t capacity) {
    if (!values) return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_thread_usage: values is NULL");
    struct rusage usage;
    if (getrusage(RUSAGE_THREAD, &usage) != 0)
        return kvt_fail(KVT_ERR_BACKEND, "kvt_thread_usage: getrusage(RUSAGE_THREAD) failed");
    /* The CPU time from the thread's clock: getrusage's is the scheduler's sum split by ticks between
     * user and system time, which can differ from it by a tick. */
    const uint64_t all[3] = {kvt_thread_cpu_ns(), (uint64_t)usage.ru_nvcsw, (uint64_t)usage.ru_nivcsw};
    for (uint32_t i = 0; i < capacity && i < 3; i++) values[i] = all[i];
    if (capacity > 3) values[3] = thread_run_delay_ns(); /* read only when asked for: a file read */
    return KVT_OK;
}

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

uint32_t kvt_crc32(const uint8_t *data, size_t length) {
    pthread_once(&crc_once, crc_init);
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < length; i++) crc = crc_table[(crc ^ data[i]) & 0xFFu] ^ (crc >> 8);
    return crc ^ 0xFFFFFFFFu;
}

uint64_t kvt_random64(void) {
    uint64_t value = 0;
    if (getrandom(&value, sizeof value, 0) != (ssize_t)sizeof value) value = kvt_now_ns() ^ (uint64_t)(uintptr_t)&value;
    return value ? value : 1;
}

static size_t map_slot(uint64_t key, size_t capacity) {
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 17) & (capacity - 1);
}

void *kvt_map_get(const kvt_map *map, uint64_t key) {
    if (map->capacity == 0) return NULL;
    for (size_t i = map_slot(key, map->capacity);; i = (i + 1) & (map->capacity - 1)) {
        if (map->keys[i] == key) return map->values[i];
        if (map->keys[i] == 0) return NULL;
    }
}

static bool map_grow(kvt_map *map) {
    size_t capacity = map->capacity ? map->capacity * 2 : 64;
    uint64_t *keys = calloc(capacity, sizeof *keys);
    void **values = calloc(capacity, sizeof *values);
    if (!keys || !values) {
        free(keys);
        free(values);
        return false;
    }
    for (size_t i = 0; i < map->capacity; i++) {
        if (map->keys[i] == 0) continue;
        size_t j = map_slot(map->keys[i], capacity);
        while (keys[j] != 0) j = (j + 1) & (capacity - 1);
        keys[j] = map->keys[i];
        values[j] = map->values[i];
    }
    free(map->keys);
    free(map->values);
    map->keys = keys;
    map->values = values;
    map->capacity = capacity;
    return true;
}

bool kvt_map_put(kvt_map *map, uint64_t key, void *value) {
    if ((map->size + 1) * 2 > map->capacity && !map_grow(map)) return false;
    size_t i = map_slot(key, map->capacity);
    while (map->keys[i] != 0 && map->keys[i] != key) i = (i + 1) & (map->capacity - 1);
    if (map->keys[i] == 0) map->size++;
    map->keys[i] = key;
    map->values[i] = value;
    return true;
}

void kvt_map_remove(kvt_map *map, uint64_t key) {
    if (map->capacity == 0) return;
    size_t mask = map->capacity - 1;
    size_t i = map_slot(key, map->capacity);
    while (map->keys[i] != key) {
        if (map->keys[i] == 0) return;
        i = (i + 1) & mask;
    }
    /* Backward-shift deletion keeps probe chains intact without tombstones. */
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (map->keys[j] == 0) break;
        size_t home = map_slot(map->keys[j], map->capacity);
        bool movable = (j > i) ? (home <= i || home > j) : (home <= i && home > j);
        if (movable) {
            map->keys[i] = map->keys[j];
            map->values[i] = map->values[j];
            i = j;
        }
    }
    map->keys[i] = 0;
    map->values[i] = NULL;
    map->size--;
}

void kvt_map_free(kvt_map *map) {
    free(map->keys);
    free(map->values);
    *map = (kvt_map){0};
}
