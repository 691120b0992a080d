/* A minimal harness for the C tests: each test file is one executable that runs its cases against
 * the backend named by KVT_TEST_BACKEND (loopback | ucx) and exits non-zero on the first failure. */
#ifndef KVT_TEST_HARNESS_H
#define KVT_TEST_HARNESS_H

#include "kvreuse_transport.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern uint32_t test_backend;    /* KVT_BACKEND_* under test */
extern bool test_under_valgrind; /* keep sizes small */

void test_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4), noreturn));
/* Has a failure of this process (test_fail, not of a child forked after this call) run `cleanup(context)` before it
 * exits, so that what a case made outside the process (a folder) goes with it; NULL stops that. One at a time. */
void test_on_failure(void (*cleanup)(void *context), void *context);

#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        if (!(cond)) test_fail(__FILE__, __LINE__, __VA_ARGS__);                                                       \
    } while (0)

/* Expects `call` to return `expected`; on mismatch prints both names and the library's detail. */
#define CHECK_STATUS(expected, call)                                                                                   \
    do {                                                                                                               \
        kvt_status got_ = (call);                                                                                      \
        if (got_ != (expected))                                                                                        \
            test_fail(__FILE__, __LINE__, "%s returned %s, expected %s (detail: %s)", #call, kvt_status_name(got_),    \
                      kvt_status_name(expected), kvt_last_error_detail());                                             \
    } while (0)

#define CHECK_OK(call) CHECK_STATUS(KVT_OK, call)

/* Skips the rest of the case on other backends; the run reports it as skipped, not passed. */
extern const char *test_skip_reason;
#define ONLY_ON_BACKEND(backend, reason)                                                                               \
    do {                                                                                                               \
        if (test_backend != (backend)) {                                                                               \
            test_skip_reason = (reason);                                                                               \
            return;                                                                                                    \
        }                                                                                                              \
    } while (0)

/* Expects the last error detail to contain `needle`. */
#define CHECK_DETAIL(needle)                                                                                           \
    CHECK(strstr(kvt_last_error_detail(), (needle)) != NULL, "detail '%s' does not mention '%s'",                      \
          kvt_last_error_detail(), (needle))

typedef void (*test_case)(void);
/* Runs every case, checks after each that the process has no live agents/registrations/operations. */
typedef struct test_entry {
    const char *name;
    test_case run;
} test_entry;
/* With arguments `--source ...` the executable is a source process (source_spawn), not a test run; with
 * `--case NAME` it runs that case alone. */
int test_main(const char *suite, const test_entry *cases, size_t count, int argc, char **argv);
#define TEST_MAIN(suite, ...)                                                                                          \
    int main(int argc, char **argv) {                                                                                  \
        static const test_entry cases_[] = {__VA_ARGS__};                                                              \
        return test_main(suite, cases_, sizeof cases_ / sizeof cases_[0], argc, argv);                                 \
    }
#define TEST(fn)                                                                                                       \
    { #fn, fn }

/* Helpers. */
uint32_t make_agent(const char *name);
/* Registers `length` bytes from a fresh kvt_mem_alloc; returns the region id and the address. */
uint32_t alloc_region(uint32_t agent, uint64_t length, uint8_t **out_memory);
void free_region(uint32_t agent, uint32_t region, uint8_t *memory);
/* Loads `source`'s metadata into `into`; returns the peer id and generation. */
uint32_t load_peer(uint32_t into, uint32_t source, uint64_t *out_generation);
/* Waits until `reader`'s connection to `peer` carried a round trip (a probe answered), so that it is wired up before
 * the peer's serving worker may be fenced (harness.c says why). Leaves the reader's heartbeat at its defaults. */
void wait_wired_up(uint32_t reader, uint32_t peer);
/* Waits until `condition(context)` holds. Between checks it blocks in short kvt_agent_wait slices on
 * `agent` (so a completion or notification wakes it at once), or sleeps a slice when `agent` is 0 (nothing to
 * wake on). `deadline_ms` only guards against a hang (scaled by 10 under valgrind): when it passes first, or
 * when kvt_agent_wait answers anything but "something pending" or "nothing yet", the test fails naming `what`.
 * A condition that waits for something pending should consume it (poll), or the slices return at once. */
typedef bool (*wait_condition)(void *context);
#define WAIT_DEADLINE_MS 60000u
void wait_until(uint32_t agent, wait_condition condition, void *context, const char *what, uint32_t deadline_ms);
/* Waits until `op` is terminal; returns its status and bytes done. Consumes its completion. */
int32_t wait_op(uint32_t agent, uint64_t op, uint64_t *out_bytes);
/* Collects `count` completions through kvt_agent_poll, checking that each ended KVT_OK having moved
 * `bytes_each` bytes; releases each one reported when `release`. */
void wait_completions_ok(uint32_t agent, uint32_t count, uint64_t bytes_each, bool release);
/* Posts a single-descriptor transfer. */
kvt_status post_one(uint32_t agent, uint32_t direction, uint32_t peer, uint64_t generation, uint32_t local_region,
                    uint64_t local_offset, uint32_t remote_region, uint64_t remote_offset, uint64_t length,
                    uint64_t *out_op);
uint64_t counter(uint32_t agent, uint32_t index);
/* Whether kvt_peer_transport's description of the path to `peer` mentions `needle`. */
bool peer_transport_mentions(uint32_t agent, uint32_t peer, const char *needle);
/* An operation expected to have moved `bytes` while still in progress (the rest held back, e.g. by
 * kvt_fault_pause_issue). op_moved_while_in_progress(&progress) is a wait_condition: true once it has, and
 * the test fails if the operation ended meanwhile. */
typedef struct {
    uint32_t agent;
    uint64_t op, bytes;
} op_progress;
bool op_moved_while_in_progress(void *context);
/* Waits until counter `index` of `agent` is at least `value`. */
void wait_counter_at_least(uint32_t agent, uint32_t index, uint64_t value);

/* A source agent in another process — this executable started afresh (exec), so that nothing of this
 * process's UCX state carries over: it allocates (kvt_mem_alloc, malloc with `caller_memory`, or a memfd
 * mapping registered with kvt_mem_register_fd with `file_memory`), fills with the pattern of `seed` and
 * registers `length` bytes, sends its metadata back and waits.
 * With `new_pid_namespace` it runs as `unshare --pid --fork --mount-proc` would run it: pid 1 of a new
 * pid namespace with its own /proc; with `new_ipc_namespace` too, in a new IPC namespace as well (`--ipc`), as a
 * container's process runs. */
typedef struct {
    uint64_t length;
    bool caller_memory;
    bool
        file_memory; /* caller memory that is a shared mapping of a sealed memfd, registered with kvt_mem_register_fd */
    bool new_pid_namespace;
    bool new_ipc_namespace; /* with new_pid_namespace */
    bool vram_memory;       /* kvt_mem_alloc_vram on GPU 0 of the driver KVT_CUDA_LIBRARY names, registered as vram */
    uint64_t seed;
} source_options;
typedef struct {
    int pid;   /* the source process, as this process sees it (signal this one) */
    int child; /* this process's child (the source, or the process that entered the namespace) */
    int to_child;
    int from_child;
    uint8_t *blob; /* its metadata */
    uint64_t length;
} source_process;
/* False (with test_skip_reason set) when a new pid namespace cannot be made here (not root). */
bool source_spawn(const source_options *options, source_process *out);
#define SOURCE_WITHDRAW 'w'
/* Has the source deregister its region, and waits until it did. */
void source_withdraw(const source_process *source);
void source_signal(const source_process *source, int signal);
/* Waits until every thread of the process `pid` is stopped (T in /proc/<pid>/task/<tid>/stat). */
void process_wait_stopped(int pid);
/* Waits until the source is stopped (process_wait_stopped). */
void source_wait_stopped(const source_process *source);
/* SIGKILLs the source (resuming it first if stopped), reaps it and frees the blob. */
void source_end(source_process *source);
/* `length` bytes of a new memfd (sealed against shrinking) mapped shared; its fd in *out_fd. */
uint8_t *file_memory_map(uint64_t length, int *out_fd);
/* Writes `agent`'s metadata blob to `fd`, its length first; receive_metadata reads one (malloc'd). For a
 * reader in another process, over a pipe. */
void send_metadata(uint32_t agent, int fd);
/* Runs `body` in a forked child process with the environment variables `variables` names set there (name,
 * value pairs ending with a NULL name; a NULL value leaves its variable as it is); fails when the child fails. */
void run_in_child(const char *const *variables, void (*body)(void));
uint8_t *receive_metadata(int fd, uint64_t *out_length);
/* Waits (at most 60 s) until the agent's wake-up pipe is readable, then empties it: a job's outcome may be
 * asked again. */
void await_wakeup(uint32_t agent);

void fill_pattern(uint8_t *memory, uint64_t length, uint64_t seed);
/* The same into vram at `address` (through the CUDA driver the library loaded; its context current). */
void vram_fill_pattern(uint64_t address, uint64_t length, uint64_t seed);
bool check_pattern(const uint8_t *memory, uint64_t length, uint64_t seed);

#endif
