#include "harness.h"
#include "services/cuda_driver.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

uint32_t test_backend = KVT_BACKEND_LOOPBACK;
bool test_under_valgrind = false;
static const char *current_case = "";
const char *test_skip_reason = NULL;

static struct {
    void (*cleanup)(void *context);
    void *context;
    pid_t owner; /* a child forked after test_on_failure fails without touching what its parent still uses */
} failure_cleanup;

void test_on_failure(void (*cleanup)(void *context), void *context) {
    failure_cleanup.cleanup = cleanup;
    failure_cleanup.context = context;
    failure_cleanup.owner = getpid();
}

void test_fail(const char *file, int line, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    fprintf(stderr, "FAIL %s [%s] %s:%d: ", current_case, test_backend == KVT_BACKEND_UCX ? "ucx" : "loopback", file,
            line);
    vfprintf(stderr, fmt, args);
    fputc('\n', stderr);
    va_end(args);
    if (failure_cleanup.cleanup && failure_cleanup.owner == getpid()) failure_cleanup.cleanup(failure_cleanup.context);
    exit(1);
}

uint64_t counter(uint32_t agent, uint32_t index) {
    uint64_t values[KVT_COUNTER_COUNT];
    uint32_t n = 0;
    CHECK_OK(kvt_counters(agent, values, KVT_COUNTER_COUNT, &n));
    CHECK(n == KVT_COUNTER_COUNT && index < n, "counter %u unavailable (%u counters)", index, n);
    return values[index];
}

bool peer_transport_mentions(uint32_t agent, uint32_t peer, const char *needle) {
    char text[8192];
    uint32_t length = 0;
    CHECK_OK(kvt_peer_transport(agent, peer, text, sizeof text, &length));
    return strstr(text, needle) != NULL;
}

static void check_process_clean(void) {
    static const uint32_t gauges[] = {
        KVT_COUNTER_LIVE_AGENTS,       KVT_COUNTER_LIVE_REGISTRATIONS,  KVT_COUNTER_REGISTERED_BYTES,
        KVT_COUNTER_LIVE_ALLOCATIONS,  KVT_COUNTER_ALLOCATED_BYTES,     KVT_COUNTER_LIVE_PEERS,
        KVT_COUNTER_LIVE_OPERATIONS,   KVT_COUNTER_INFLIGHT_OPERATIONS, KVT_COUNTER_PENDING_NOTIFICATIONS,
        KVT_COUNTER_INFLIGHT_REQUESTS, KVT_COUNTER_UNRESPONSIVE_PEERS};
    for (size_t i = 0; i < sizeof gauges / sizeof gauges[0]; i++)
        CHECK(counter(0, gauges[i]) == 0, "after the case, process counter %s is %llu, expected 0",
              kvt_counter_name(gauges[i]), (unsigned long long)counter(0, gauges[i]));
}

static void __attribute__((noreturn)) source_main(int argc, char **argv);

int test_main(const char *suite, const struct test_entry *cases, size_t count, int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--source") == 0) source_main(argc, argv);
    const char *backend = getenv("KVT_TEST_BACKEND");
    if (backend && strcmp(backend, "ucx") == 0) test_backend = KVT_BACKEND_UCX;
    test_under_valgrind = getenv("KVT_TEST_UNDER_VALGRIND") != NULL;
    const char *only = argc > 2 && strcmp(argv[1], "--case") == 0 ? argv[2] : NULL;
    for (size_t i = 0; i < count; i++) {
        if (only && strcmp(cases[i].name, only) != 0) continue;
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

/* Over ucx a new connection's wire-up request goes out on its first use (for a vram IPC move, which sends nothing,
 * the first heartbeat probe, sent later in the reader's progress round), and over shared memory the request maps a
 * segment of the peer's serving worker as it is sent: a fence of that worker (a withdrawal of a region the reader's
 * metadata names) before then fails the connection (REMOTE_DISCONNECT, UCX's "shmat ... Invalid argument") instead
 * of leaving the reader's posts to the liveness checks. A probe is answered only after the request reached the peer.
 * Misses at the maximum: a slow answer is no report. */
void wait_wired_up(uint32_t reader, uint32_t peer) {
    uint64_t answers = counter(reader, KVT_COUNTER_HEARTBEAT_ANSWERS);
    CHECK_OK(kvt_agent_set_heartbeat(reader, KVT_HEARTBEAT_MIN_INTERVAL_MS, KVT_HEARTBEAT_MAX_MISSES));
    CHECK_OK(kvt_peer_watch(reader, peer, 1));
    wait_counter_at_least(reader, KVT_COUNTER_HEARTBEAT_ANSWERS, answers + 1);
    CHECK_OK(kvt_peer_watch(reader, peer, 0));
    CHECK_OK(kvt_agent_set_heartbeat(reader, KVT_HEARTBEAT_DEFAULT_INTERVAL_MS, KVT_HEARTBEAT_DEFAULT_MISSES));
}

kvt_status post_one(uint32_t agent, uint32_t direction, uint32_t peer, uint64_t generation, uint32_t local_region,
                    uint64_t local_offset, uint32_t remote_region, uint64_t remote_offset, uint64_t length,
                    uint64_t *out_op) {
    const uint32_t zero = 0;
    return kvt_xfer_post(agent, direction, peer, generation, 1, &zero, &local_offset, &zero, &remote_offset, &length, 1,
                         &local_region, 1, &remote_region, NULL, 0, out_op);
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

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

enum { WAIT_SLICE_MS = 10 };

void wait_until(uint32_t agent, wait_condition condition, void *context, const char *what, uint32_t deadline_ms) {
    uint64_t scaled = (uint64_t)deadline_ms * (test_under_valgrind ? 10u : 1u);
    uint64_t deadline = now_ms() + scaled;
    bool left_pending = false; /* the last slice woke on something the condition leaves queued */
    while (!condition(context)) {
        if (now_ms() >= deadline)
            test_fail(__FILE__, __LINE__, "waited %llu ms for %s: it did not happen", (unsigned long long)scaled, what);
        if (agent == 0 || left_pending) {
            usleep(WAIT_SLICE_MS * 1000);
            left_pending = false;
            continue;
        }
        kvt_status waited = kvt_agent_wait(agent, WAIT_SLICE_MS);
        switch (waited) {
        case KVT_OK: /* something is pending: the condition may hold now */
            left_pending = true;
            break;
        case KVT_ERR_TIMEOUT: /* nothing pending yet */
            break;
        default:
            test_fail(__FILE__, __LINE__, "waiting for %s: kvt_agent_wait(%u) answered %s (%s)", what, agent,
                      kvt_status_name(waited), kvt_last_error_detail());
        }
    }
}

typedef struct {
    uint32_t agent;
    uint64_t op;
    int32_t status;
    uint64_t bytes;
} op_wait;

/* Reads the status first: a terminal one has its completion queued already, so the poll consumes it. */
static bool op_terminal(void *context) {
    op_wait *wait = context;
    CHECK_OK(kvt_xfer_status(wait->agent, wait->op, &wait->status, &wait->bytes, NULL));
    uint64_t ids[64], bytes[64];
    int32_t statuses[64];
    uint32_t n = 0;
    CHECK_OK(kvt_agent_poll(wait->agent, 64, ids, statuses, bytes, &n, NULL));
    return wait->status != KVT_IN_PROGRESS;
}

int32_t wait_op(uint32_t agent, uint64_t op, uint64_t *out_bytes) {
    op_wait wait = {.agent = agent, .op = op};
    char what[64];
    snprintf(what, sizeof what, "operation %llu to end", (unsigned long long)op);
    wait_until(agent, op_terminal, &wait, what, WAIT_DEADLINE_MS);
    if (out_bytes) *out_bytes = wait.bytes;
    return wait.status;
}

typedef struct {
    uint32_t agent, expected, seen;
    uint64_t bytes_each;
    bool release;
} completions_wait;

static bool completions_seen(void *context) {
    completions_wait *wait = context;
    uint64_t ids[256], bytes[256];
    int32_t statuses[256];
    uint32_t n = 0;
    CHECK_OK(kvt_agent_poll(wait->agent, 256, ids, statuses, bytes, &n, NULL));
    for (uint32_t i = 0; i < n; i++) {
        CHECK(statuses[i] == KVT_OK && bytes[i] == wait->bytes_each, "op %llu: %s, %llu bytes (expected OK, %llu)",
              (unsigned long long)ids[i], kvt_status_name(statuses[i]), (unsigned long long)bytes[i],
              (unsigned long long)wait->bytes_each);
        if (wait->release) CHECK_OK(kvt_xfer_release(wait->agent, ids[i]));
    }
    wait->seen += n;
    CHECK(wait->seen <= wait->expected, "%u completions reported, expected %u", wait->seen, wait->expected);
    return wait->seen == wait->expected;
}

void wait_completions_ok(uint32_t agent, uint32_t count, uint64_t bytes_each, bool release) {
    completions_wait wait = {.agent = agent, .expected = count, .bytes_each = bytes_each, .release = release};
    char what[64];
    snprintf(what, sizeof what, "%u completions", count);
    wait_until(agent, completions_seen, &wait, what, WAIT_DEADLINE_MS);
}

typedef struct {
    uint32_t agent, index;
    uint64_t value;
} counter_wait;

static bool counter_reached(void *context) {
    const counter_wait *wait = context;
    return counter(wait->agent, wait->index) >= wait->value;
}

void wait_counter_at_least(uint32_t agent, uint32_t index, uint64_t value) {
    counter_wait wait = {.agent = agent, .index = index, .value = value};
    char what[128];
    snprintf(what, sizeof what, "counter %s of agent %u to reach %llu", kvt_counter_name(index), agent,
             (unsigned long long)value);
    wait_until(agent, counter_reached, &wait, what, WAIT_DEADLINE_MS);
}

/* ---- source processes ------------------------------------------------------------------------- */

static void write_all(int fd, const void *data, size_t length) {
    const uint8_t *bytes = data;
    for (size_t done = 0; done < length;) {
        ssize_t n = write(fd, bytes + done, length - done);
        CHECK(n > 0, "write to the test process: %s", strerror(errno));
        done += (size_t)n;
    }
}

static void read_all(int fd, void *data, size_t length) {
    uint8_t *bytes = data;
    for (size_t done = 0; done < length;) {
        ssize_t n = read(fd, bytes + done, length - done);
        CHECK(n > 0, "read from the source process (it exited?)");
        done += (size_t)n;
    }
}

bool op_moved_while_in_progress(void *context) {
    const op_progress *progress = context;
    int32_t status = KVT_IN_PROGRESS;
    uint64_t done = 0;
    CHECK_OK(kvt_xfer_status(progress->agent, progress->op, &status, &done, NULL));
    CHECK(status == KVT_IN_PROGRESS, "operation %llu ended %s while the rest was held back",
          (unsigned long long)progress->op, kvt_status_name(status));
    return done >= progress->bytes;
}

uint8_t *file_memory_map(uint64_t length, int *out_fd) {
    int fd = memfd_create("kvreuse-test-bank", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    CHECK(fd >= 0, "memfd_create: %s", strerror(errno));
    CHECK(ftruncate(fd, (off_t)length) == 0, "ftruncate: %s", strerror(errno));
    CHECK(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) == 0, "F_ADD_SEALS: %s", strerror(errno));
    void *memory = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(memory != MAP_FAILED, "mmap: %s", strerror(errno));
    *out_fd = fd;
    return memory;
}

void vram_fill_pattern(uint64_t address, uint64_t length, uint64_t seed) {
    uint8_t *pattern = malloc(length);
    CHECK(pattern, "out of memory");
    fill_pattern(pattern, length, seed);
    CHECK(kvt_cuda.MemcpyHtoDAsync(address, pattern, length, NULL) == KVT_CUDA_SUCCESS, "vram upload");
    CHECK(kvt_cuda.StreamSynchronize(NULL) == KVT_CUDA_SUCCESS, "vram upload: synchronize");
    free(pattern);
}

/* A vram allocation on GPU 0 holding the pattern of `seed`. */
static uint64_t vram_pattern(uint32_t agent, uint64_t length, uint64_t seed) {
    uint64_t address = 0;
    CHECK_OK(kvt_mem_alloc_vram(agent, 0, length, &address));
    vram_fill_pattern(address, length, seed);
    return address;
}

/* The source's life: register, publish, wait until the test process closes the pipe or kills it; a
 * SOURCE_WITHDRAW byte deregisters the region, answered with the same byte once done. */
static void __attribute__((noreturn)) run_source(const source_options *options, int up, int down) {
    uint32_t agent = make_agent("source-process");
    uint64_t address = 0;
    int fd = -1;
    if (options->vram_memory)
        address = vram_pattern(agent, options->length, options->seed);
    else if (options->file_memory)
        address = (uint64_t)(uintptr_t)file_memory_map(options->length, &fd);
    else if (options->caller_memory)
        address = (uint64_t)(uintptr_t)malloc(options->length);
    else
        CHECK_OK(kvt_mem_alloc(agent, options->length, 0, &address));
    CHECK(address != 0, "source: out of memory");
    if (!options->vram_memory) fill_pattern((uint8_t *)(uintptr_t)address, options->length, options->seed);
    uint32_t region;
    if (options->vram_memory)
        CHECK_OK(kvt_mem_register(agent, address, options->length, KVT_MEM_VRAM, 0, &region));
    else if (options->file_memory)
        CHECK_OK(kvt_mem_register_fd(agent, address, options->length, fd, 0, &region));
    else
        CHECK_OK(kvt_mem_register(agent, address, options->length, KVT_MEM_DRAM, 0, &region));
    uint64_t blob_length = 0;
    CHECK_OK(kvt_agent_metadata(agent, NULL, 0, &blob_length));
    uint8_t *blob = malloc(blob_length);
    CHECK_OK(kvt_agent_metadata(agent, blob, blob_length, &blob_length));
    int32_t pid = getpid();
    write_all(up, &pid, sizeof pid);
    write_all(up, &blob_length, sizeof blob_length);
    write_all(up, blob, blob_length);
    char byte;
    while (read(down, &byte, 1) > 0) {
        if (byte != SOURCE_WITHDRAW) continue;
        CHECK_OK(kvt_mem_deregister(agent, region));
        write_all(up, &byte, 1);
    }
    _exit(0);
}

/* argv: --source <up fd> <down fd> <length> <memory alloc|caller|file> <seed> */
static void source_main(int argc, char **argv) {
    CHECK(argc == 7, "--source takes 5 arguments (got %d)", argc - 2);
    source_options options = {.length = strtoull(argv[4], NULL, 10),
                              .caller_memory = strcmp(argv[5], "caller") == 0,
                              .file_memory = strcmp(argv[5], "file") == 0,
                              .vram_memory = strcmp(argv[5], "vram") == 0,
                              .seed = strtoull(argv[6], NULL, 10)};
    const char *backend = getenv("KVT_TEST_BACKEND");
    if (backend && strcmp(backend, "ucx") == 0) test_backend = KVT_BACKEND_UCX;
    run_source(&options, atoi(argv[2]), atoi(argv[3]));
}

/* Replaces this (forked) process with a fresh run of this executable as a source. Under valgrind the
 * source runs natively: it is not what is under test. */
static void __attribute__((noreturn)) exec_source(const source_options *options, int up, int down) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(n > 0, "readlink /proc/self/exe: %s", strerror(errno));
    self[n] = '\0';
    char up_text[16], down_text[16], length[32], seed[32];
    snprintf(up_text, sizeof up_text, "%d", up);
    snprintf(down_text, sizeof down_text, "%d", down);
    snprintf(length, sizeof length, "%llu", (unsigned long long)options->length);
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)options->seed);
    char *memory = options->vram_memory     ? "vram"
                   : options->file_memory   ? "file"
                   : options->caller_memory ? "caller"
                                            : "alloc";
    char *const args[] = {self, "--source", up_text, down_text, length, memory, seed, NULL};
    execv(self, args);
    test_fail(__FILE__, __LINE__, "execv %s: %s", self, strerror(errno));
}

/* In a new pid namespace (and mount namespace, for its own /proc; with `ipc`, a new IPC namespace too) the first
 * child is pid 1. */
static bool enter_pid_namespace(bool ipc) {
    if (unshare(CLONE_NEWPID | CLONE_NEWNS | (ipc ? CLONE_NEWIPC : 0)) != 0) return false;
    return mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) == 0; /* type ignored: a propagation change */
}

bool source_spawn(const source_options *options, source_process *out) {
    int up[2], down[2], probe[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0 && pipe(probe) == 0, "pipe");
    fflush(NULL);
    pid_t child = fork();
    CHECK(child >= 0, "fork");
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test exits at once: its sources (stopped or not) go too */
        close(up[0]);
        close(down[1]);
        close(probe[0]);
        if (!options->new_pid_namespace) exec_source(options, up[1], down[0]);
        char entered = enter_pid_namespace(options->new_ipc_namespace) ? 1 : 0;
        write_all(probe[1], &entered, 1);
        if (!entered) _exit(0);
        pid_t init = fork(); /* as `unshare --fork`: pid 1 of the new namespace */
        CHECK(init >= 0, "fork into the namespace");
        if (init == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            CHECK(mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == 0, "mount /proc: %s",
                  strerror(errno));
            close(probe[1]);
            exec_source(options, up[1], down[0]);
        }
        /* Tell the test process the pid it can signal, then wait for the source like `unshare` does. */
        int32_t outside = init;
        write_all(probe[1], &outside, sizeof outside);
        int status = 0;
        waitpid(init, &status, 0);
        _exit(0);
    }
    close(up[1]);
    close(down[0]);
    close(probe[1]);
    *out = (source_process){.pid = child, .child = child, .to_child = down[1], .from_child = up[0]};
    if (options->new_pid_namespace) {
        char entered = 0;
        read_all(probe[0], &entered, 1);
        if (!entered) {
            close(probe[0]);
            close(up[0]);
            close(down[1]);
            waitpid(child, NULL, 0);
            test_skip_reason = "a new pid namespace needs CAP_SYS_ADMIN (run as root)";
            return false;
        }
        int32_t outside = 0;
        read_all(probe[0], &outside, sizeof outside);
        out->pid = outside;
    }
    close(probe[0]);
    int32_t inside = 0;
    read_all(up[0], &inside, sizeof inside);
    CHECK(!options->new_pid_namespace || inside == 1, "the source in a new pid namespace is pid %d there, not 1",
          inside);
    read_all(up[0], &out->length, sizeof out->length);
    out->blob = malloc(out->length);
    CHECK(out->blob != NULL, "out of memory");
    read_all(up[0], out->blob, out->length);
    return true;
}

void source_signal(const source_process *source, int signal) {
    CHECK(kill(source->pid, signal) == 0, "kill(%d, %d): %s", source->pid, signal, strerror(errno));
}

/* The state letter of a /proc stat file (`T` stopped), or '?' when it cannot be read (the thread exited). */
static char stat_state(const char *path) {
    char line[512];
    FILE *file = fopen(path, "r");
    if (!file) return '?';
    bool ok = fgets(line, sizeof line, file) != NULL;
    fclose(file);
    const char *after_name = ok ? strrchr(line, ')') : NULL;
    return after_name && after_name[1] == ' ' ? after_name[2] : '?';
}

/* Whether every thread of the process is stopped: the kernel stops them one by one after a SIGSTOP, and until the
 * last one is, the others run on. A thread that exited meanwhile counts as stopped. */
static bool all_threads_stopped(void *context) {
    int pid = *(const int *)context;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *tasks = opendir(path);
    if (!tasks) return false;
    bool stopped = true;
    for (struct dirent *task; stopped && (task = readdir(tasks));) {
        if (task->d_name[0] == '.') continue;
        char stat_path[300];
        snprintf(stat_path, sizeof stat_path, "/proc/%d/task/%s/stat", pid, task->d_name);
        char state = stat_state(stat_path);
        stopped = state == 'T' || state == '?';
    }
    closedir(tasks);
    return stopped;
}

void process_wait_stopped(int pid) {
    char what[64];
    snprintf(what, sizeof what, "every thread of pid %d to stop", pid);
    wait_until(0, all_threads_stopped, &pid, what, WAIT_DEADLINE_MS);
}

void source_wait_stopped(const source_process *source) { process_wait_stopped(source->pid); }

void source_withdraw(const source_process *source) {
    char byte = SOURCE_WITHDRAW;
    write_all(source->to_child, &byte, 1);
    read_all(source->from_child, &byte, 1);
    CHECK(byte == SOURCE_WITHDRAW, "the source answered its withdrawal with %d", byte);
}

void source_end(source_process *source) {
    kill(source->pid, SIGKILL);
    kill(source->pid, SIGCONT);
    close(source->to_child);
    close(source->from_child);
    waitpid(source->child, NULL, 0);
    free(source->blob);
    source->blob = NULL;
}

void await_wakeup(uint32_t agent) {
    int fd = -1;
    CHECK_OK(kvt_agent_wake_fd(agent, &fd));
    struct pollfd p = {.fd = fd, .events = POLLIN};
    CHECK(poll(&p, 1, 60000) == 1, "the wake-up pipe announces the job's outcome");
    char bytes[64];
    while (read(fd, bytes, sizeof bytes) > 0) {
    }
}

void send_metadata(uint32_t agent, int fd) {
    uint64_t length = 0;
    CHECK_OK(kvt_agent_metadata(agent, NULL, 0, &length));
    uint8_t *blob = malloc(length);
    CHECK(blob, "out of memory");
    CHECK_OK(kvt_agent_metadata(agent, blob, length, &length));
    CHECK(write(fd, &length, sizeof length) == (ssize_t)sizeof length && write(fd, blob, length) == (ssize_t)length,
          "the metadata sent");
    free(blob);
}

uint8_t *receive_metadata(int fd, uint64_t *out_length) {
    CHECK(read(fd, out_length, sizeof *out_length) == (ssize_t)sizeof *out_length, "the metadata's length");
    uint8_t *blob = malloc(*out_length);
    CHECK(blob, "out of memory");
    for (uint64_t got = 0; got < *out_length;) {
        ssize_t n = read(fd, blob + got, *out_length - got);
        CHECK(n > 0, "the metadata");
        got += (uint64_t)n;
    }
    return blob;
}

void run_in_child(const char *const *variables, void (*body)(void)) {
    fflush(NULL);
    pid_t child = fork();
    CHECK(child >= 0, "fork failed");
    if (child == 0) {
        for (size_t i = 0; variables[i]; i += 2)
            if (variables[i + 1]) setenv(variables[i], variables[i + 1], 1);
        body();
        fflush(NULL);
        exit(0);
    }
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child process failed (status 0x%x)", status);
}
