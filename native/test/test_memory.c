/* Memory: allocation, registration refusals, overlap, deregistration and their counters. */
#include "harness.h"

#include <pthread.h>
#include <stdatomic.h>

#include <errno.h>
#include <linux/capability.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static void alloc_is_page_aligned_and_counted(void) {
    uint32_t agent = make_agent("alloc");
    uint64_t a = 0, b = 0;
    CHECK_OK(kvt_mem_alloc(agent, 1 << 20, 0, &a));
    CHECK_OK(kvt_mem_alloc(agent, 12345, 0, &b));
    long page = sysconf(_SC_PAGESIZE);
    CHECK(a % (uint64_t)page == 0 && b % (uint64_t)page == 0, "page-aligned: 0x%llx 0x%llx", (unsigned long long)a,
          (unsigned long long)b);
    memset((void *)(uintptr_t)a, 0xAB, 1 << 20); /* really writable */
    memset((void *)(uintptr_t)b, 0xCD, 12345);
    CHECK(counter(agent, KVT_COUNTER_LIVE_ALLOCATIONS) == 2, "two allocations");
    CHECK(counter(agent, KVT_COUNTER_ALLOCATED_BYTES) == (1 << 20) + 12345, "allocated bytes");
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_mem_free(agent, a + 4096));
    CHECK_DETAIL("not the start of an allocation");
    CHECK_OK(kvt_mem_free(agent, a));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_mem_free(agent, a));
    CHECK_OK(kvt_mem_free(agent, b));
    uint64_t c;
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_alloc(agent, 0, 0, &c));
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_alloc(agent, UINT64_MAX, 0, &c));
    CHECK_DETAIL("larger than any mapping");
    CHECK(counter(agent, KVT_COUNTER_LIVE_ALLOCATIONS) == 0, "nothing allocated");
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_alloc(agent, 4096, 0x80, &c));
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_alloc(agent, 4096, 0, NULL));
    CHECK_OK(kvt_agent_destroy(agent));
}

enum { LOCKED_LENGTH = 64 << 10 };

/* Capabilities are per thread: kvt_mem_alloc locks on the calling thread, so this thread's effective set
 * decides whether RLIMIT_MEMLOCK applies (CAP_IPC_LOCK lifts it). */
static void thread_capabilities(struct __user_cap_data_struct data[2]) {
    struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    CHECK(syscall(SYS_capget, &header, data) == 0, "capget: %s", strerror(errno));
}

static void set_thread_capabilities(struct __user_cap_data_struct data[2]) {
    struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    CHECK(syscall(SYS_capset, &header, data) == 0, "capset: %s", strerror(errno));
}

static void set_memlock_soft_limit(rlim_t soft) {
    struct rlimit limit;
    CHECK(getrlimit(RLIMIT_MEMLOCK, &limit) == 0, "getrlimit: %s", strerror(errno));
    limit.rlim_cur = soft;
    CHECK(setrlimit(RLIMIT_MEMLOCK, &limit) == 0, "setrlimit(RLIMIT_MEMLOCK, %llu): %s", (unsigned long long)soft,
          strerror(errno));
}

/* Within the limit (raised to the hard limit, or lifted by CAP_IPC_LOCK) the locked allocation succeeds. */
static void alloc_with_mlock_within_the_limit(void) {
    struct __user_cap_data_struct caps[2];
    thread_capabilities(caps);
    bool unlimited = caps[0].effective & (1u << CAP_IPC_LOCK);
    struct rlimit before;
    CHECK(getrlimit(RLIMIT_MEMLOCK, &before) == 0, "getrlimit: %s", strerror(errno));
    if (!unlimited && before.rlim_max != RLIM_INFINITY && before.rlim_max < LOCKED_LENGTH) {
        test_skip_reason = "the RLIMIT_MEMLOCK hard limit is below 64 KiB and this thread lacks CAP_IPC_LOCK";
        return;
    }
    set_memlock_soft_limit(before.rlim_max);
    uint32_t agent = make_agent("mlock");
    uint64_t address = 0;
    CHECK_OK(kvt_mem_alloc(agent, LOCKED_LENGTH, KVT_ALLOC_MLOCK, &address));
    CHECK(counter(agent, KVT_COUNTER_LIVE_ALLOCATIONS) == 1, "one allocation");
    CHECK_OK(kvt_mem_free(agent, address));
    CHECK_OK(kvt_agent_destroy(agent));
    set_memlock_soft_limit(before.rlim_cur);
}

/* Past the limit (soft limit 0, CAP_IPC_LOCK dropped from this thread) the lock is refused with a detail
 * naming the limit, and the memory allocated for it is freed again. */
static void alloc_with_mlock_refused_by_the_limit(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    test_skip_reason = "the sanitizers' mlock does nothing and succeeds; the valgrind run covers the refusal";
    return;
#endif
    uint32_t agent = make_agent("mlock-refused");
    struct __user_cap_data_struct caps[2], dropped[2];
    thread_capabilities(caps);
    memcpy(dropped, caps, sizeof dropped);
    dropped[0].effective &= ~(1u << CAP_IPC_LOCK);
    struct rlimit before;
    CHECK(getrlimit(RLIMIT_MEMLOCK, &before) == 0, "getrlimit: %s", strerror(errno));
    set_thread_capabilities(dropped);
    set_memlock_soft_limit(0);
    uint64_t address = 0;
    kvt_status status = kvt_mem_alloc(agent, LOCKED_LENGTH, KVT_ALLOC_MLOCK, &address);
    set_memlock_soft_limit(before.rlim_cur);
    set_thread_capabilities(caps);
    CHECK_STATUS(KVT_ERR_NOT_ALLOWED, status);
    CHECK_DETAIL("RLIMIT_MEMLOCK soft limit 0 bytes");
    CHECK(counter(agent, KVT_COUNTER_LIVE_ALLOCATIONS) == 0, "no allocation left");
    CHECK(counter(agent, KVT_COUNTER_ALLOCATED_BYTES) == 0, "no bytes left allocated");
    CHECK_OK(kvt_agent_destroy(agent));
}

static void register_refusals(void) {
    uint32_t agent = make_agent("refusals");
    uint8_t *memory = malloc(1 << 16);
    uint64_t base = (uint64_t)(uintptr_t)memory;
    uint32_t region = 0;
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_register(agent, base, 0, KVT_MEM_DRAM, 0, &region));
    CHECK_DETAIL("length is 0");
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_register(agent, 0, 4096, KVT_MEM_DRAM, 0, &region));
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_register(agent, UINT64_MAX - 10, 4096, KVT_MEM_DRAM, 0, &region));
    CHECK_DETAIL("wraps");
    /* vram's refusals, with and without a driver: test_cuda. */
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_register(agent, base, 4096, 9, 0, &region));
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_register(agent, base, 4096, KVT_MEM_DRAM, 3, &region));
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_register(agent, base, 4096, KVT_MEM_DRAM, 0, NULL));

    CHECK_OK(kvt_mem_register(agent, base + 4096, 8192, KVT_MEM_DRAM, 0, &region));
    uint32_t other = 0;
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_register(agent, base, 4097, KVT_MEM_DRAM, 0, &other));
    CHECK_DETAIL("overlaps region");
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_register(agent, base + 12287, 10, KVT_MEM_DRAM, 0, &other));
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_register(agent, base + 4096, 8192, KVT_MEM_DRAM, 0, &other));
    /* Adjacent ranges are fine. */
    CHECK_OK(kvt_mem_register(agent, base, 4096, KVT_MEM_DRAM, 0, &other));
    uint32_t third = 0;
    CHECK_OK(kvt_mem_register(agent, base + 12288, 4096, KVT_MEM_DRAM, 0, &third));
    CHECK(region != other && other != third, "distinct region ids");
    CHECK(counter(agent, KVT_COUNTER_LIVE_REGISTRATIONS) == 3, "three registrations");
    CHECK(counter(agent, KVT_COUNTER_REGISTERED_BYTES) == 16384, "registered bytes");

    uint64_t address = 0, length = 0;
    uint32_t kind = 9, device = 9;
    CHECK_OK(kvt_region_info(agent, region, &address, &length, &kind, &device));
    CHECK(address == base + 4096 && length == 8192 && kind == KVT_MEM_DRAM && device == 0, "region info");
    CHECK_OK(kvt_mem_deregister(agent, region));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_mem_deregister(agent, region));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_region_info(agent, region, NULL, NULL, NULL, NULL));
    /* The freed range can be registered again, under a new id. */
    uint32_t again = 0;
    CHECK_OK(kvt_mem_register(agent, base + 4096, 8192, KVT_MEM_DRAM, 0, &again));
    CHECK(again != region, "ids are not reused");
    CHECK_OK(kvt_mem_deregister(agent, again));
    CHECK_OK(kvt_mem_deregister(agent, other));
    CHECK_OK(kvt_mem_deregister(agent, third));
    CHECK(counter(agent, KVT_COUNTER_REGISTERED_BYTES) == 0, "no registered bytes left");
    free(memory);
    CHECK_OK(kvt_agent_destroy(agent));
}

/* Memory this process never mapped (or unmapped since), wholly or in part, is refused before the
 * backend sees it: nothing is registered. */
static void register_refuses_unmapped_memory(void) {
    uint32_t agent = make_agent("unmapped");
    uint32_t region = 0;
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_register(agent, 12345, 4096, KVT_MEM_DRAM, 0, &region));
    CHECK_DETAIL("is not mapped in this process");
    long page = sysconf(_SC_PAGESIZE);
    uint8_t *two = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(two != MAP_FAILED, "mmap");
    CHECK(munmap(two + page, (size_t)page) == 0, "munmap");
    CHECK_STATUS(KVT_ERR_INVALID_PARAM,
                 kvt_mem_register(agent, (uint64_t)(uintptr_t)two, 2 * (uint64_t)page, KVT_MEM_DRAM, 0, &region));
    CHECK_DETAIL("is not mapped in this process");
    CHECK_STATUS(KVT_ERR_INVALID_PARAM,
                 kvt_mem_register(agent, (uint64_t)(uintptr_t)(two + page), (uint64_t)page, KVT_MEM_DRAM, 0, &region));
    CHECK(counter(agent, KVT_COUNTER_LIVE_REGISTRATIONS) == 0, "nothing was registered");
    /* The page still mapped registers, even from an unaligned address inside it. */
    CHECK_OK(kvt_mem_register(agent, (uint64_t)(uintptr_t)two + 100, (uint64_t)page - 100, KVT_MEM_DRAM, 0, &region));
    CHECK_OK(kvt_mem_deregister(agent, region));
    CHECK(munmap(two, (size_t)page) == 0, "munmap");
    CHECK_OK(kvt_agent_destroy(agent));
}

static void overlap_is_per_agent(void) {
    uint32_t a = make_agent("overlap-a");
    uint32_t b = make_agent("overlap-b");
    uint8_t *memory = malloc(8192);
    uint32_t ra = 0, rb = 0;
    CHECK_OK(kvt_mem_register(a, (uint64_t)(uintptr_t)memory, 8192, KVT_MEM_DRAM, 0, &ra));
    CHECK_OK(kvt_mem_register(b, (uint64_t)(uintptr_t)memory, 8192, KVT_MEM_DRAM, 0, &rb));
    CHECK_OK(kvt_mem_deregister(a, ra));
    CHECK_OK(kvt_mem_deregister(b, rb));
    free(memory);
    CHECK_OK(kvt_agent_destroy(a));
    CHECK_OK(kvt_agent_destroy(b));
}

static void free_refuses_while_registered_inside(void) {
    uint32_t agent = make_agent("free-busy");
    uint64_t address = 0;
    CHECK_OK(kvt_mem_alloc(agent, 1 << 20, 0, &address));
    uint32_t whole = 0, part = 0;
    CHECK_OK(kvt_mem_register(agent, address, 1 << 20, KVT_MEM_DRAM, 0, &whole));
    CHECK_STATUS(KVT_ERR_BUSY, kvt_mem_free(agent, address));
    CHECK_DETAIL("still registered");
    CHECK_OK(kvt_mem_deregister(agent, whole));
    CHECK_OK(kvt_mem_register(agent, address + 4096, 4096, KVT_MEM_DRAM, 0, &part)); /* a sub-range */
    CHECK_STATUS(KVT_ERR_BUSY, kvt_mem_free(agent, address));
    CHECK_OK(kvt_mem_deregister(agent, part));
    CHECK_OK(kvt_mem_free(agent, address));
    CHECK_OK(kvt_agent_destroy(agent));
}

static void many_regions(void) {
    uint32_t agent = make_agent("many");
    enum { N = 200 };
    uint8_t *memory = malloc(N * 4096);
    uint32_t regions[N];
    for (int i = 0; i < N; i++)
        CHECK_OK(kvt_mem_register(agent, (uint64_t)(uintptr_t)memory + (uint64_t)i * 4096, 4096, KVT_MEM_DRAM, 0,
                                  &regions[i]));
    CHECK(counter(0, KVT_COUNTER_LIVE_REGISTRATIONS) == N, "process-wide registrations");
    for (int i = N - 1; i >= 0; i--) CHECK_OK(kvt_mem_deregister(agent, regions[i]));
    free(memory);
    CHECK_OK(kvt_agent_destroy(agent));
}

typedef struct {
    uint32_t reader, peer, local, remote;
    uint64_t generation;
    _Atomic bool stop;
    _Atomic uint32_t reads;
} reading;

static void *read_until_stopped(void *context) {
    reading *r = context;
    while (!atomic_load(&r->stop)) {
        uint64_t op;
        CHECK_OK(post_one(r->reader, KVT_XFER_READ, r->peer, r->generation, r->local, 0, r->remote, 0, 4096, &op));
        CHECK(wait_op(r->reader, op, NULL) == KVT_OK, "a read while the source's table grows");
        CHECK_OK(kvt_xfer_release(r->reader, op));
        atomic_fetch_add(&r->reads, 1);
    }
    return NULL;
}

typedef struct {
    const reading *r;
    uint32_t after;
} reads_past;

static bool a_read_ended_since(void *context) {
    const reads_past *past = context;
    return atomic_load(&past->r->reads) > past->after;
}

/* Registrations grow an agent's region table (16, 32, 64, 128, 256 entries) while another agent's
 * loopback reads look regions up in it from that agent's progress thread: the table moves only under
 * the region lock those readers hold (ThreadSanitizer reports the race, ASan the read of the freed
 * table, when it moves under another lock). */
static void the_table_grows_under_loopback_reads(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_LOOPBACK, "only loopback reads look regions up in another agent's table");
    uint32_t source = make_agent("growing-source");
    reading r = {.reader = make_agent("growing-reader")};
    uint8_t *source_memory, *reader_memory;
    r.remote = alloc_region(source, 4096, &source_memory);
    r.local = alloc_region(r.reader, 4096, &reader_memory);
    r.peer = load_peer(r.reader, source, &r.generation);
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, read_until_stopped, &r) == 0, "reader thread");
    enum { N = 200 };
    uint8_t *memory = malloc(N * 4096);
    uint32_t regions[N];
    /* After each registration a read ends before the next: reads run all through the growth. */
    for (int i = 0; i < N; i++) {
        reads_past past = {.r = &r, .after = atomic_load(&r.reads)};
        CHECK_OK(kvt_mem_register(source, (uint64_t)(uintptr_t)memory + (uint64_t)i * 4096, 4096, KVT_MEM_DRAM, 0,
                                  &regions[i]));
        wait_until(0, a_read_ended_since, &past, "a read after the registration", WAIT_DEADLINE_MS);
    }
    atomic_store(&r.stop, true);
    CHECK(pthread_join(thread, NULL) == 0, "reader thread joined");
    CHECK(atomic_load(&r.reads) >= N, "a read ended after each of the %d registrations (%u reads)", N,
          atomic_load(&r.reads));
    for (int i = N - 1; i >= 0; i--) CHECK_OK(kvt_mem_deregister(source, regions[i]));
    free(memory);
    CHECK_OK(kvt_peer_unload(r.reader, r.peer));
    free_region(r.reader, r.local, reader_memory);
    free_region(source, r.remote, source_memory);
    CHECK_OK(kvt_agent_destroy(r.reader));
    CHECK_OK(kvt_agent_destroy(source));
}

/* Every page of an allocation is backed by the time kvt_mem_alloc returns (prefaulted). */
static void allocations_are_prefaulted(void) {
    uint32_t agent = make_agent("prefault");
    uint64_t length = 4u << 20, address = 0;
    CHECK_OK(kvt_mem_alloc(agent, length, 0, &address));
    size_t pages = length / (uint64_t)sysconf(_SC_PAGESIZE), resident = 0;
    unsigned char *vector = malloc(pages);
    CHECK(vector && mincore((void *)(uintptr_t)address, length, vector) == 0, "mincore: %s", strerror(errno));
    for (size_t i = 0; i < pages; i++) resident += vector[i] & 1u;
    free(vector);
    CHECK(resident == pages, "%zu of %zu pages resident right after kvt_mem_alloc", resident, pages);
    CHECK_OK(kvt_mem_free(agent, address));
    CHECK_OK(kvt_agent_destroy(agent));
}

/* The outcome of a memory job, once the wake-up pipe announced it. */
static kvt_status job_outcome(uint32_t agent, uint64_t job) {
    kvt_status status;
    while ((status = kvt_mem_job_status(agent, job)) == KVT_IN_PROGRESS) await_wakeup(agent);
    return status;
}

/* kvt_mem_alloc_begin counts the allocation at once, backs it on the progress thread and answers once. */
static void begun_allocations_are_populated_off_the_calling_thread(void) {
    uint32_t agent = make_agent("alloc-begin");
    uint64_t length = 4u << 20, address = 0, job = 0;
    CHECK_STATUS(KVT_IN_PROGRESS, kvt_mem_alloc_begin(agent, length, 0, &address, &job));
    CHECK(address != 0 && counter(agent, KVT_COUNTER_LIVE_ALLOCATIONS) == 1 &&
              counter(agent, KVT_COUNTER_ALLOCATED_BYTES) == length,
          "the allocation is counted while it is populated");
    CHECK_OK(job_outcome(agent, job));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_mem_job_status(agent, job));
    CHECK_DETAIL("not yet answered");
    size_t pages = length / (uint64_t)sysconf(_SC_PAGESIZE), resident = 0;
    unsigned char *vector = malloc(pages);
    CHECK(vector && mincore((void *)(uintptr_t)address, length, vector) == 0, "mincore: %s", strerror(errno));
    for (size_t i = 0; i < pages; i++) resident += vector[i] & 1u;
    free(vector);
    CHECK(resident == pages, "%zu of %zu pages resident once the outcome is OK", resident, pages);
    uint32_t region = 0;
    CHECK_OK(kvt_mem_register(agent, address, length, KVT_MEM_DRAM, 0, &region));
    CHECK_OK(kvt_mem_deregister(agent, region));
    CHECK_OK(kvt_mem_free(agent, address));
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_alloc_begin(agent, 0, 0, &address, &job));
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_alloc_begin(agent, 4096, 0x80, &address, &job));
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_alloc_begin(agent, 4096, 0, &address, NULL));
    CHECK(counter(agent, KVT_COUNTER_LIVE_ALLOCATIONS) == 0 && counter(agent, KVT_COUNTER_ALLOCATED_BYTES) == 0,
          "nothing left allocated");
    CHECK_OK(kvt_agent_destroy(agent));
}

typedef struct {
    uint32_t agent;
    uint64_t length, begun, job, allocated;
    kvt_status statuses[3];
    pthread_mutex_t lock;
    pthread_cond_t done_cond;
    bool done;
} allocation_calls;

static void *make_allocation_calls(void *arg) {
    allocation_calls *calls = arg;
    calls->statuses[0] = kvt_mem_alloc_begin(calls->agent, calls->length, 0, &calls->begun, &calls->job);
    calls->statuses[1] = kvt_mem_alloc(calls->agent, calls->length, 0, &calls->allocated);
    calls->statuses[2] = kvt_mem_free(calls->agent, calls->allocated);
    pthread_mutex_lock(&calls->lock);
    calls->done = true;
    pthread_cond_signal(&calls->done_cond);
    pthread_mutex_unlock(&calls->lock);
    return NULL;
}

/* Allocating and freeing never wait for the progress thread: the calls end while it is stalled (a thread
 * makes them, so that a call that waited fails the check instead of hanging the test); the begun
 * allocation's pages are backed once the thread runs again. */
static void allocation_calls_do_not_wait_for_the_progress_thread(void) {
    allocation_calls calls = {.agent = make_agent("allocation-calls"),
                              .length = 1u << 20,
                              .done_cond = PTHREAD_COND_INITIALIZER,
                              .lock = PTHREAD_MUTEX_INITIALIZER};
    CHECK_OK(kvt_fault_stall_progress(calls.agent, 1));
    pthread_t caller;
    CHECK(pthread_create(&caller, NULL, make_allocation_calls, &calls) == 0, "thread");
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 60;
    pthread_mutex_lock(&calls.lock);
    while (!calls.done && pthread_cond_timedwait(&calls.done_cond, &calls.lock, &deadline) == 0) {
    }
    bool done = calls.done;
    pthread_mutex_unlock(&calls.lock);
    bool job_waits = done && kvt_mem_job_status(calls.agent, calls.job) == KVT_IN_PROGRESS;
    CHECK_OK(kvt_fault_stall_progress(calls.agent, 0));
    pthread_join(caller, NULL);
    CHECK(done, "the allocation calls ended while the progress thread was stalled");
    CHECK(job_waits, "the begun allocation's pages wait for the progress thread");
    CHECK(calls.statuses[0] == KVT_IN_PROGRESS, "kvt_mem_alloc_begin: %s", kvt_status_name(calls.statuses[0]));
    CHECK(calls.statuses[1] == KVT_OK && calls.statuses[2] == KVT_OK, "kvt_mem_alloc: %s, kvt_mem_free: %s",
          kvt_status_name(calls.statuses[1]), kvt_status_name(calls.statuses[2]));
    CHECK_OK(job_outcome(calls.agent, calls.job));
    CHECK_OK(kvt_mem_free(calls.agent, calls.begun));
    CHECK_OK(kvt_agent_destroy(calls.agent));
}

/* Exports the agent's metadata, as publishing it does: readers may now hold its regions' keys. */
static void export_metadata(uint32_t agent) {
    uint64_t blob_length = 0;
    CHECK_OK(kvt_agent_metadata(agent, NULL, 0, &blob_length));
    uint8_t *blob = malloc(blob_length);
    CHECK(blob != NULL, "out of memory");
    CHECK_OK(kvt_agent_metadata(agent, blob, blob_length, &blob_length));
    free(blob);
}

/* Deregistration and free begun while the progress thread is stalled: the region and the allocation
 * leave the tables at once, their outcomes wait for the thread, which runs them in the order begun. */
static void begun_deregistration_and_free_leave_at_once_and_answer_once(void) {
    uint32_t agent = make_agent("release-begin");
    uint64_t length = 4u << 20, address = 0, deregistration = 0, release = 0;
    CHECK_OK(kvt_mem_alloc(agent, length, 0, &address));
    uint32_t region = 0;
    CHECK_OK(kvt_mem_register(agent, address, length, KVT_MEM_DRAM, 0, &region));
    export_metadata(agent); /* exported: UCX fences on the way out */

    CHECK_OK(kvt_fault_stall_progress(agent, 1));
    CHECK_STATUS(KVT_IN_PROGRESS, kvt_mem_deregister_begin(agent, region, &deregistration));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_region_info(agent, region, NULL, NULL, NULL, NULL));
    CHECK(counter(agent, KVT_COUNTER_LIVE_REGISTRATIONS) == 0 && counter(agent, KVT_COUNTER_REGISTERED_BYTES) == 0,
          "the region is uncounted at once");
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_mem_deregister_begin(agent, region, &deregistration));
    CHECK_STATUS(KVT_IN_PROGRESS, kvt_mem_job_status(agent, deregistration));
    CHECK_STATUS(KVT_IN_PROGRESS, kvt_mem_free_begin(agent, address, &release));
    CHECK(release != deregistration, "each job has its own id");
    CHECK(counter(agent, KVT_COUNTER_LIVE_ALLOCATIONS) == 0 && counter(agent, KVT_COUNTER_ALLOCATED_BYTES) == 0,
          "the allocation is uncounted at once");
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_mem_free_begin(agent, address, &release));
    CHECK_STATUS(KVT_IN_PROGRESS, kvt_mem_job_status(agent, release));

    CHECK_OK(kvt_fault_stall_progress(agent, 0));
    CHECK_OK(job_outcome(agent, release)); /* the later job answered first: the earlier one ran before it */
    CHECK_OK(kvt_mem_job_status(agent, deregistration));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_mem_job_status(agent, deregistration));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_mem_job_status(agent, release));
    CHECK_DETAIL("has no job");
    CHECK_OK(kvt_agent_destroy(agent));
}

/* Exported regions deregistered together (begun before the first one ran, as a drain does) are fenced
 * once: the first withdrawal's fence comes after every other withdrawal, so it cuts off every reader of
 * them. A region exported after that fence needs one of its own; one never exported needs none. */
static void deregistrations_begun_together_fence_readers_once(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback readers read through the owner's table: nothing to fence");
    enum { REGIONS = 4 };
    uint32_t agent = make_agent("fence-once");
    uint64_t length = 1u << 20, addresses[REGIONS], jobs[REGIONS];
    uint32_t regions[REGIONS];
    for (uint32_t i = 0; i < REGIONS; i++) {
        CHECK_OK(kvt_mem_alloc(agent, length, 0, &addresses[i]));
        CHECK_OK(kvt_mem_register(agent, addresses[i], length, KVT_MEM_DRAM, 0, &regions[i]));
    }
    export_metadata(agent);
    CHECK_OK(kvt_fault_stall_progress(agent, 1)); /* every deregistration is begun before the first one runs */
    for (uint32_t i = 0; i < REGIONS; i++)
        CHECK_STATUS(KVT_IN_PROGRESS, kvt_mem_deregister_begin(agent, regions[i], &jobs[i]));
    CHECK_OK(kvt_fault_stall_progress(agent, 0));
    for (uint32_t i = 0; i < REGIONS; i++) CHECK_OK(job_outcome(agent, jobs[i]));
    CHECK(counter(agent, KVT_COUNTER_READER_FENCES) == 1, "%llu fences for %u regions deregistered together",
          (unsigned long long)counter(agent, KVT_COUNTER_READER_FENCES), REGIONS);

    uint32_t unexported = 0, exported = 0;
    CHECK_OK(kvt_mem_register(agent, addresses[0], length, KVT_MEM_DRAM, 0, &unexported));
    uint64_t job = 0;
    CHECK_STATUS(KVT_IN_PROGRESS, kvt_mem_deregister_begin(agent, unexported, &job));
    CHECK_OK(job_outcome(agent, job));
    CHECK(counter(agent, KVT_COUNTER_READER_FENCES) == 1, "a region no metadata named is not fenced");
    CHECK_OK(kvt_mem_register(agent, addresses[1], length, KVT_MEM_DRAM, 0, &exported));
    export_metadata(agent);
    CHECK_STATUS(KVT_IN_PROGRESS, kvt_mem_deregister_begin(agent, exported, &job));
    CHECK_OK(job_outcome(agent, job));
    CHECK(counter(agent, KVT_COUNTER_READER_FENCES) == 2, "a region exported after the last fence is fenced");
    for (uint32_t i = 0; i < REGIONS; i++) CHECK_OK(kvt_mem_free(agent, addresses[i]));
    CHECK_OK(kvt_agent_destroy(agent));
}

/* Jobs that end in one batch of the thread's commands wake the consumer once, after the last of them: begun
 * while the thread is stalled, frees all end before the one byte they write, which is all the pipe holds. */
static void jobs_ended_together_wake_the_consumer_once(void) {
    enum { ALLOCATIONS = 3 };
    uint32_t agent = make_agent("jobs-one-wake");
    uint64_t length = 1u << 20, addresses[ALLOCATIONS], jobs[ALLOCATIONS];
    for (uint32_t i = 0; i < ALLOCATIONS; i++) CHECK_OK(kvt_mem_alloc(agent, length, 0, &addresses[i]));
    int32_t fd = -1;
    CHECK_OK(kvt_agent_wake_fd(agent, &fd));
    char bytes[64];
    while (read(fd, bytes, sizeof bytes) > 0) {
    }
    CHECK_OK(kvt_fault_stall_progress(agent, 1));
    for (uint32_t i = 0; i < ALLOCATIONS; i++)
        CHECK_STATUS(KVT_IN_PROGRESS, kvt_mem_free_begin(agent, addresses[i], &jobs[i]));
    CHECK_OK(kvt_fault_stall_progress(agent, 0));
    struct pollfd p = {.fd = fd, .events = POLLIN};
    CHECK(poll(&p, 1, 60000) == 1, "the jobs' byte arrives");
    for (uint32_t i = 0; i < ALLOCATIONS; i++) CHECK_OK(kvt_mem_job_status(agent, jobs[i]));
    CHECK(read(fd, bytes, sizeof bytes) == 1, "one byte for %u jobs", ALLOCATIONS);
    CHECK_OK(kvt_agent_destroy(agent));
}

/* What kvt_mem_deregister and kvt_mem_free refuse, the begun forms refuse at once, changing nothing. */
static void begun_deregistration_and_free_refusals(void) {
    uint32_t agent = make_agent("release-refusals");
    uint64_t length = 1u << 20, address = 0, job = 0;
    CHECK_OK(kvt_mem_alloc(agent, length, 0, &address));
    uint32_t region = 0;
    CHECK_OK(kvt_mem_register(agent, address, length, KVT_MEM_DRAM, 0, &region));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_mem_deregister_begin(agent, region + 1, &job));
    CHECK_DETAIL("has no region");
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_deregister_begin(agent, region, NULL));
    CHECK_STATUS(KVT_ERR_BUSY, kvt_mem_free_begin(agent, address, &job));
    CHECK_DETAIL("still registered inside");
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_mem_free_begin(agent, address + 4096, &job));
    CHECK_DETAIL("not the start of an allocation");
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_free_begin(agent, address, NULL));
    CHECK(counter(agent, KVT_COUNTER_LIVE_REGISTRATIONS) == 1 && counter(agent, KVT_COUNTER_LIVE_ALLOCATIONS) == 1,
          "the refusals changed nothing");
    CHECK_OK(kvt_mem_deregister(agent, region));
    CHECK_OK(kvt_mem_free(agent, address));
    CHECK_OK(kvt_agent_destroy(agent));
}

/* A destroy while begun deregistrations and frees wait on a stalled thread: the shutdown runs them first
 * (the region is unmapped before the backend stops), and the unanswered outcomes go with the agent. */
static void destroy_waits_for_begun_deregistration_and_free(void) {
    uint32_t agent = make_agent("release-destroy");
    uint64_t length = 1u << 20, address = 0, deregistration = 0, release = 0;
    CHECK_OK(kvt_mem_alloc(agent, length, 0, &address));
    uint32_t region = 0;
    CHECK_OK(kvt_mem_register(agent, address, length, KVT_MEM_DRAM, 0, &region));
    CHECK_OK(kvt_fault_stall_progress(agent, 1));
    CHECK_STATUS(KVT_IN_PROGRESS, kvt_mem_deregister_begin(agent, region, &deregistration));
    CHECK_STATUS(KVT_IN_PROGRESS, kvt_mem_free_begin(agent, address, &release));
    CHECK_STATUS(KVT_IN_PROGRESS, kvt_mem_job_status(agent, release));
    CHECK_OK(kvt_agent_destroy(agent));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_mem_job_status(agent, release));
}

TEST_MAIN("memory", TEST(alloc_is_page_aligned_and_counted), TEST(alloc_with_mlock_within_the_limit),
          TEST(alloc_with_mlock_refused_by_the_limit), TEST(register_refusals), TEST(register_refuses_unmapped_memory),
          TEST(overlap_is_per_agent), TEST(free_refuses_while_registered_inside), TEST(many_regions),
          TEST(the_table_grows_under_loopback_reads), TEST(allocations_are_prefaulted),
          TEST(begun_allocations_are_populated_off_the_calling_thread),
          TEST(allocation_calls_do_not_wait_for_the_progress_thread),
          TEST(begun_deregistration_and_free_leave_at_once_and_answer_once),
          TEST(begun_deregistration_and_free_refusals), TEST(deregistrations_begun_together_fence_readers_once),
          TEST(jobs_ended_together_wake_the_consumer_once), TEST(destroy_waits_for_begun_deregistration_and_free))
