/* Agents: the process-wide table, lifecycle, the progress thread, completion delivery, counters and
 * fault injection. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t agents_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t agents_cond = PTHREAD_COND_INITIALIZER; /* an agent's api_refs dropped */
static kvt_agent **agents;
static uint32_t agent_count, agent_capacity;
static uint32_t next_agent_id = 1;
static _Atomic uint64_t process_counters[KVT_COUNTER_COUNT];

#define STALL_POLL_MS 50 /* a stalled progress thread looks for the end of the stall this often */
/* How long the progress thread keeps progressing after its last operation ended before it sleeps: a
 * consumer that posts the next operation as it learns of the last one (measured: 60-110 us from the
 * completion to the next post here) finds it awake instead of paying its wake-up. */
#define LINGER_NS 200000u

/* ---- counters ------------------------------------------------------------------------------------ */

void kvt_counter_add(kvt_agent *agent, uint32_t index, int64_t delta) {
    atomic_fetch_add_explicit(&process_counters[index], (uint64_t)delta, memory_order_relaxed);
    if (agent) atomic_fetch_add_explicit(&agent->counters[index], (uint64_t)delta, memory_order_relaxed);
}

kvt_status kvt_count_result(kvt_agent *agent, kvt_status status) {
    if (kvt_is_error_code(status)) kvt_counter_add(agent, KVT_COUNTER_ERRORS_FIRST + (uint32_t)(-status - 1), 1);
    return status;
}

static const char *const counter_names[KVT_COUNTER_COUNT] = {
    "live_agents",
    "live_registrations",
    "registered_bytes",
    "live_allocations",
    "allocated_bytes",
    "live_peers",
    "live_operations",
    "inflight_operations",
    "operations_posted",
    "bytes_moved",
    "notifications_sent",
    "notifications_received",
    "pending_notifications",
    "notifications_dropped",
    "errors.KVT_ERR_INVALID_PARAM",
    "errors.KVT_ERR_BACKEND",
    "errors.KVT_ERR_NOT_FOUND",
    "errors.KVT_ERR_MISMATCH",
    "errors.KVT_ERR_NOT_ALLOWED",
    "errors.KVT_ERR_BUSY",
    "errors.KVT_ERR_NOT_SUPPORTED",
    "errors.KVT_ERR_REMOTE_DISCONNECT",
    "errors.KVT_ERR_CANCELED",
    "errors.KVT_ERR_TIMEOUT",
    "errors.KVT_ERR_NO_MEMORY",
    "requests_issued",
    "inflight_requests",
    "heartbeats_sent",
    "heartbeats_answered",
    "unresponsive_peers",
    "heartbeat_answers",
    "reader_fences",
    "file_read_bytes",
};

const char *kvt_counter_name(uint32_t index) { return index < KVT_COUNTER_COUNT ? counter_names[index] : NULL; }

kvt_status kvt_counters(uint32_t agent_id, uint64_t *values, uint32_t capacity, uint32_t *out_count) {
    kvt_detail_clear();
    if (!out_count || (capacity > 0 && !values))
        return kvt_count_result(NULL, kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_counters: values and out_count must not be NULL"));
    kvt_agent *agent = NULL;
    if (agent_id != 0) {
        kvt_status status = kvt_enter(agent_id, "kvt_counters", &agent);
        if (status != KVT_OK) return status;
    }
    _Atomic uint64_t *source = agent ? agent->counters : process_counters;
    uint32_t n = capacity < KVT_COUNTER_COUNT ? capacity : KVT_COUNTER_COUNT;
    for (uint32_t i = 0; i < n; i++) values[i] = atomic_load_explicit(&source[i], memory_order_relaxed);
    *out_count = n;
    if (agent) kvt_agent_release(agent);
    return KVT_OK;
}

/* ---- the agent table ----------------------------------------------------------------------------- */

/* A live agent, or (with `any_state`) also one still starting, whose start failed, or whose shutdown was
 * accepted: any agent not yet destroyed. */
static kvt_agent *find_agent_locked(uint32_t id, bool any_state) {
    for (uint32_t i = 0; i < agent_count; i++) {
        kvt_agent *agent = agents[i];
        if (agent->id == id && !agent->destroying && (agent->ready || any_state)) return agent;
    }
    return NULL;
}

/* While a shutdown is deciding (it may still refuse with BUSY), new calls wait for its outcome. */
static kvt_status acquire(uint32_t id, const char *call, bool any_state, kvt_agent **out) {
    pthread_mutex_lock(&agents_lock);
    kvt_agent *agent = find_agent_locked(id, any_state);
    while (agent && agent->closing) {
        pthread_cond_wait(&agents_cond, &agents_lock);
        agent = find_agent_locked(id, any_state);
    }
    if (agent) agent->api_refs++;
    pthread_mutex_unlock(&agents_lock);
    if (!agent) return kvt_fail(KVT_ERR_NOT_FOUND, "%s: no live agent with id %u", call, id);
    *out = agent;
    return KVT_OK;
}

kvt_status kvt_agent_acquire(uint32_t id, const char *call, kvt_agent **out) { return acquire(id, call, false, out); }

/* kvt_enter for the calls that also find an agent still starting, whose start failed, or shutting down. */
static kvt_status enter_any_state(uint32_t id, const char *call, kvt_agent **out) {
    kvt_detail_clear();
    return kvt_count_result(NULL, acquire(id, call, true, out));
}

kvt_status kvt_enter(uint32_t id, const char *call, kvt_agent **out) {
    kvt_detail_clear();
    return kvt_count_result(NULL, kvt_agent_acquire(id, call, out));
}

kvt_status kvt_poll_enter(uint32_t id, const char *call, bool arguments_present, const char *requirement,
                          kvt_agent **out) {
    if (!arguments_present) return kvt_count_result(NULL, kvt_fail(KVT_ERR_INVALID_PARAM, "%s: %s", call, requirement));
    return kvt_enter(id, call, out);
}

kvt_status kvt_agent_finish(kvt_agent *agent, kvt_status status) {
    kvt_count_result(agent, status);
    kvt_agent_release(agent);
    return status;
}

void kvt_agent_release(kvt_agent *agent) {
    pthread_mutex_lock(&agents_lock);
    agent->api_refs--;
    pthread_cond_broadcast(&agents_cond);
    pthread_mutex_unlock(&agents_lock);
}

kvt_agent *kvt_agent_find_live(const char *name, uint64_t incarnation) {
    kvt_agent *found = NULL;
    pthread_mutex_lock(&agents_lock);
    for (uint32_t i = 0; i < agent_count; i++) {
        kvt_agent *a = agents[i];
        if (a->ready && a->incarnation == incarnation && strcmp(a->name, name) == 0) {
            a->api_refs++;
            found = a;
            break;
        }
    }
    pthread_mutex_unlock(&agents_lock);
    return found;
}

/* ---- commands and the progress thread ------------------------------------------------------------ */

void kvt_agent_kick(kvt_agent *agent) {
    uint64_t one = 1;
    ssize_t written = write(agent->command_fd, &one, sizeof one);
    (void)written; /* EAGAIN: the counter is already non-zero, the thread will wake */
}

void kvt_command_submit_locked(kvt_agent *agent, kvt_command *command) {
    command->next = NULL;
    command->done = false;
    bool sync = command->sync; /* an asynchronous command may be run and freed once it is queued */
    pthread_mutex_lock(&agent->command_lock);
    if (agent->commands_tail)
        agent->commands_tail->next = command;
    else
        agent->commands = command;
    agent->commands_tail = command;
    /* Sequentially consistent, against the progress thread's store of `sleeping` and load of
     * `commands_pending`: one of the two sees the other, so an awake thread is not kicked (a system
     * call per post) and a sleeping one always is. */
    atomic_store(&agent->commands_pending, true);
    if (sync) atomic_store_explicit(&agent->caller_waiting, true, memory_order_relaxed);
    pthread_mutex_unlock(&agent->command_lock);
    if (atomic_load(&agent->sleeping)) kvt_agent_kick(agent);
    if (sync)
        while (!command->done) pthread_cond_wait(&agent->command_done, &agent->lock);
}

kvt_status kvt_agent_call(kvt_agent *agent, kvt_status (*call)(kvt_agent *, void *, char *, size_t), void *arg) {
    kvt_command command = {.kind = KVT_CMD_CALL, .call = call, .arg = arg, .sync = true};
    pthread_mutex_lock(&agent->lock);
    kvt_command_submit_locked(agent, &command);
    pthread_mutex_unlock(&agent->lock);
    if (command.result != KVT_OK && command.result != KVT_IN_PROGRESS)
        return kvt_fail(command.result, "%s", command.detail);
    return command.result;
}

bool kvt_agent_try_call_async(kvt_agent *agent, kvt_status (*call)(kvt_agent *, void *, char *, size_t),
                              const void *arg, size_t arg_size) {
    /* One block: the command, then a copy of the argument (suitably aligned after it). */
    size_t offset = (sizeof(kvt_command) + 15u) & ~(size_t)15u;
    kvt_command *command = malloc(offset + arg_size);
    if (!command) return false;
    *command = (kvt_command){.kind = KVT_CMD_CALL, .call = call, .arg = (char *)command + offset};
    memcpy(command->arg, arg, arg_size);
    pthread_mutex_lock(&agent->lock);
    kvt_command_submit_locked(agent, command);
    pthread_mutex_unlock(&agent->lock);
    return true;
}

void kvt_agent_call_async(kvt_agent *agent, kvt_status (*call)(kvt_agent *, void *, char *, size_t), const void *arg,
                          size_t arg_size) {
    if (!kvt_agent_try_call_async(agent, call, arg, arg_size))
        kvt_agent_call(agent, call, (void *)(uintptr_t)arg); /* no memory: wait for it instead */
}

static void complete_command(kvt_agent *agent, kvt_command *command) {
    pthread_mutex_lock(&agent->lock);
    command->done = true;
    pthread_cond_broadcast(&agent->command_done);
    pthread_mutex_unlock(&agent->lock);
}

/* Runs one batch of commands; returns false after KVT_CMD_STOP. */
static bool run_commands(kvt_agent *agent, bool *worked) {
    if (!atomic_load_explicit(&agent->commands_pending, memory_order_acquire)) return true;
    pthread_mutex_lock(&agent->command_lock);
    kvt_command *command = agent->commands;
    agent->commands = agent->commands_tail = NULL;
    atomic_store_explicit(&agent->commands_pending, false, memory_order_relaxed);
    atomic_store_explicit(&agent->caller_waiting, false, memory_order_relaxed);
    pthread_mutex_unlock(&agent->command_lock);
    bool keep_running = true;
    while (command) {
        kvt_command *next = command->next; /* a completed sync command may vanish */
        *worked = true;
        switch (command->kind) {
        case KVT_CMD_POST:
            kvt_ops_run(agent, command);
            kvt_heartbeat_wake(agent);
            break;
        case KVT_CMD_CALL:
            command->detail[0] = '\0';
            command->result = command->call(agent, command->arg, command->detail, sizeof command->detail);
            if (command->sync)
                complete_command(agent, command);
            else
                free(command); /* asynchronous calls are heap blocks owned by the queue */
            break;
        case KVT_CMD_STOP:
            keep_running = false; /* agent->stop_command: nobody waits on it */
            break;
        }
        command = next;
    }
    return keep_running;
}

static void drain_command_fd(kvt_agent *agent) {
    uint64_t value;
    ssize_t got = read(agent->command_fd, &value, sizeof value);
    (void)got;
}

/* kvt_fault_stall_progress: while stalled (until a shutdown is accepted, which clears the stall, or a
 * destroy is under way), the thread does nothing but wait for a kick, as a stopped process would. */
static bool stalled(kvt_agent *agent) {
    if (!atomic_load(&agent->progress_stalled) || atomic_load(&agent->closing)) return false;
    struct pollfd fd = {.fd = agent->command_fd, .events = POLLIN};
    atomic_store(&agent->sleeping, true);
    poll(&fd, 1, STALL_POLL_MS);
    atomic_store(&agent->sleeping, false);
    drain_command_fd(agent); /* commands stay queued (commands_pending) for after the stall */
    return true;
}

/* The sooner of two timeouts in ms, -1 meaning none. */
static int earliest_timeout_ms(int a, int b) {
    if (a < 0) return b;
    if (b < 0) return a;
    return a < b ? a : b;
}


static int ms_until(uint64_t deadline_ns) {
    uint64_t now = kvt_now_ns();
    if (now >= deadline_ns) return 0;
    uint64_t ms = (deadline_ns - now + 999999u) / 1000000u;
    return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

/* The progress thread's end: closes every connection (gracefully until the shutdown's deadline, then by
 * force), stops the backend, records the outcome and wakes the consumer through the wake-up pipe. */
static void shut_down(kvt_agent *agent) {
    pthread_mutex_lock(&agent->lock);
    uint64_t deadline_ns = agent->shutdown_deadline_ns;
    pthread_mutex_unlock(&agent->lock);
    kvt_peers_free_all(agent);
    kvt_reap_dead_conns(agent);
    char forced[512] = "";
    while (agent->backend->closing && agent->backend->closing(agent, deadline_ns, forced, sizeof forced)) {
        if (atomic_load_explicit(&agent->abandoned, memory_order_acquire)) return;
        if (!agent->backend->progress(agent)) agent->backend->sleep(agent, ms_until(deadline_ns));
        drain_command_fd(agent);
    }
    agent->backend->stop(agent);
    pthread_mutex_lock(&agent->lock);
    agent->shutdown_status = forced[0] ? KVT_ERR_TIMEOUT : KVT_OK;
    if (forced[0])
        snprintf(agent->shutdown_detail, sizeof agent->shutdown_detail,
                 "agent '%s': the shutdown's deadline passed before the peer(s) %.512s acknowledged the close; their "
                 "endpoints were force-closed",
                 agent->name, forced);
    agent->shutdown_done = true;
    pthread_cond_broadcast(&agent->pending_cond);
    pthread_mutex_unlock(&agent->lock);
    kvt_wake_consumer(agent); /* a byte of its own: the consumer is woken even when completions were left unpolled */
}

/* Starts the backend (for UCX, context and worker: tens of milliseconds), then makes the agent visible to
 * every call, records the outcome and wakes the consumer through the wake-up pipe. */
static bool start_backend(kvt_agent *agent) {
    char detail[sizeof agent->start_detail];
    detail[0] = '\0';
    kvt_status status = agent->backend->start(agent, detail, sizeof detail);
    if (status == KVT_OK) kvt_blocks_reserve(agent); /* the first post's memory, before anyone can post */
    if (status == KVT_OK) kvt_counter_add(NULL, KVT_COUNTER_LIVE_AGENTS, 1);
    pthread_mutex_lock(&agents_lock);
    agent->ready = status == KVT_OK;
    pthread_cond_broadcast(&agents_cond);
    pthread_mutex_unlock(&agents_lock);
    pthread_mutex_lock(&agent->lock);
    agent->start_status = status;
    snprintf(agent->start_detail, sizeof agent->start_detail, "%s", detail);
    agent->start_done = true;
    pthread_cond_broadcast(&agent->pending_cond);
    bool announce = agent->announce_start;
    pthread_mutex_unlock(&agent->lock);
    /* A byte of its own: the completion edge (wake_signaled) stays armed for what comes next. */
    if (announce) kvt_wake_consumer(agent);
    return status == KVT_OK;
}

static void *progress_main(void *arg) {
    kvt_agent *agent = arg;
    if (!start_backend(agent)) return NULL;

    /* The hot path (operations in flight) takes no lock and makes no system call per round. */
    bool was_active = false;
    uint64_t linger_until_ns = 0;
    for (;;) {
        if (atomic_load_explicit(&agent->abandoned, memory_order_acquire)) return NULL;
        if (stalled(agent)) continue;
        bool worked = false;
        if (!run_commands(agent, &worked)) break;
        worked |= agent->backend->progress(agent);
        kvt_ops_run(agent, NULL);
        kvt_reap_dead_conns(agent);
        kvt_heartbeat_tick(agent); /* after the operations: one that ended in this round is not probed */
        if (agent->active) { /* operations in flight: keep the backend busy */
            was_active = true;
            continue;
        }
        if (was_active) linger_until_ns = kvt_now_ns() + LINGER_NS;
        was_active = false;
        worked |= kvt_blocks_prepare(agent); /* idle: the next post's memory */
        if (worked || atomic_load_explicit(&agent->commands_pending, memory_order_acquire)) continue;
        if (linger_until_ns != 0 && kvt_now_ns() < linger_until_ns) {
            sched_yield(); /* a thread that waits for a core (Node's, to post the next one) goes first */
            continue;
        }
        linger_until_ns = 0;
        atomic_store(&agent->sleeping, true);
        if (!atomic_load(&agent->commands_pending))
            agent->backend->sleep(agent, earliest_timeout_ms(kvt_ops_next_timeout_ms(agent),
                                                             kvt_heartbeat_next_timeout_ms(agent)));
        atomic_store(&agent->sleeping, false);
        drain_command_fd(agent);
    }
    atomic_store(&agent->sleeping, true); /* from here on every command kicks */
    shut_down(agent);
    return NULL;
}

/* ---- create / destroy ---------------------------------------------------------------------------- */

static kvt_status validate_name(const char *name) {
    if (!name) return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_agent_create: name is NULL");
    size_t length = strnlen(name, KVT_MAX_NAME + 1);
    if (length == 0 || length > KVT_MAX_NAME)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_agent_create: name must be 1..%u bytes (got %s)", KVT_MAX_NAME,
                        length == 0 ? "an empty name" : "a longer one");
    for (size_t i = 0; i < length; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c <= 0x20 || c >= 0x7F)
            return kvt_fail(KVT_ERR_INVALID_PARAM,
                            "kvt_agent_create: name byte %zu is 0x%02x; names are printable ASCII without spaces", i, c);
    }
    return KVT_OK;
}

static void agent_free(kvt_agent *agent) {
    if (agent->wake_pipe[0] >= 0) close(agent->wake_pipe[0]);
    if (agent->wake_pipe[1] >= 0) close(agent->wake_pipe[1]);
    if (agent->command_fd >= 0) close(agent->command_fd);
    for (size_t i = 0; i < agent->notification_count; i++)
        free(agent->notifications[(agent->notification_head + i) % KVT_MAX_PENDING_NOTIFICATIONS]);
    free(agent->notifications);
    free(agent->allocations);
    kvt_mem_jobs_free(agent);
    free(agent->regions);
    kvt_liveness_table_free(agent);
    free(agent->peers);
    kvt_map_free(&agent->ops);
    kvt_templates_free_all(agent);
    kvt_blocks_free_all(agent);
    pthread_mutex_destroy(&agent->config_lock);
    pthread_mutex_destroy(&agent->lock);
    pthread_cond_destroy(&agent->command_done);
    pthread_cond_destroy(&agent->pending_cond);
    pthread_rwlock_destroy(&agent->region_lock);
    pthread_mutex_destroy(&agent->delivery_lock);
    pthread_mutex_destroy(&agent->command_lock);
    free(agent);
}

static kvt_status agent_init(kvt_agent *agent, const char *name, uint32_t backend) {
    strcpy(agent->name, name);
    agent->backend_kind = backend;
    agent->incarnation = kvt_random64();
    kvt_process_identity_self(&agent->process);
    agent->metadata_generation = 1;
    agent->next_region_id = agent->next_peer_id = 1;
    agent->next_op_id = 1;
    agent->next_template_id = 1;
    agent->next_mem_job_id = 1;
    agent->heartbeat_interval_ms = KVT_HEARTBEAT_DEFAULT_INTERVAL_MS;
    agent->heartbeat_misses = KVT_HEARTBEAT_DEFAULT_MISSES;
    agent->wake_pipe[0] = agent->wake_pipe[1] = agent->command_fd = -1;
    pthread_mutex_init(&agent->config_lock, NULL);
    pthread_mutex_init(&agent->lock, NULL);
    pthread_cond_init(&agent->command_done, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&agent->pending_cond, &attr);
    pthread_condattr_destroy(&attr);
    pthread_rwlock_init(&agent->region_lock, NULL);
    pthread_mutex_init(&agent->delivery_lock, NULL);
    pthread_mutex_init(&agent->command_lock, NULL);
    kvt_blocks_init(agent);
    agent->notifications = calloc(KVT_MAX_PENDING_NOTIFICATIONS, sizeof *agent->notifications);
    if (!agent->notifications) return kvt_fail(KVT_ERR_NO_MEMORY, "kvt_agent_create: out of memory");
    if (pipe2(agent->wake_pipe, O_NONBLOCK | O_CLOEXEC) != 0)
        return kvt_fail(KVT_ERR_BACKEND, "kvt_agent_create: pipe2 failed: %s", strerror(errno));
    agent->command_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (agent->command_fd < 0)
        return kvt_fail(KVT_ERR_BACKEND, "kvt_agent_create: eventfd failed: %s", strerror(errno));
    return KVT_OK;
}

/* Waits until the agent's backend started or failed to (agent->lock not held). */
static void wait_for_start(kvt_agent *agent) {
    pthread_mutex_lock(&agent->lock);
    while (!agent->start_done) pthread_cond_wait(&agent->pending_cond, &agent->lock);
    pthread_mutex_unlock(&agent->lock);
}

/* Removes the agent from the table (it was never started, or its start failed). */
static void forget_agent(kvt_agent *agent) {
    pthread_mutex_lock(&agents_lock);
    for (uint32_t i = 0; i < agent_count; i++)
        if (agents[i] == agent) agents[i] = agents[--agent_count];
    pthread_mutex_unlock(&agents_lock);
}

/* Creates the agent and its progress thread, which starts the backend; *out holds it, not yet started. */
static kvt_status create_agent(const char *name, uint32_t backend, uint32_t flags, const uint32_t *out_agent,
                               bool announce_start, kvt_agent **out) {
    kvt_status status = validate_name(name);
    if (status != KVT_OK) return kvt_count_result(NULL, status);
    if (!out_agent)
        return kvt_count_result(NULL, kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_agent_create: out_agent is NULL"));
    if (flags != 0)
        return kvt_count_result(NULL,
                                kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_agent_create: flags must be 0 (got 0x%x)", flags));
    const kvt_backend *impl = NULL;
    if (backend == KVT_BACKEND_LOOPBACK) impl = &kvt_loopback_backend;
#if KVT_HAVE_UCX
    if (backend == KVT_BACKEND_UCX) {
        const char *unavailable = kvt_ucx_unavailable();
        if (unavailable)
            return kvt_count_result(NULL, kvt_fail(KVT_ERR_NOT_SUPPORTED,
                                                   "kvt_agent_create: the ucx backend cannot run here: %s; "
                                                   "install UCX (Debian: libucx0) or use the loopback backend",
                                                   unavailable));
        impl = &kvt_ucx_backend;
    }
#else
    if (backend == KVT_BACKEND_UCX)
        return kvt_count_result(NULL, kvt_fail(KVT_ERR_NOT_SUPPORTED,
                                               "kvt_agent_create: the ucx backend is not built into this library "
                                               "(UCX headers were absent at build time)"));
#endif
    if (!impl)
        return kvt_count_result(NULL, kvt_fail(KVT_ERR_INVALID_PARAM,
                                               "kvt_agent_create: unknown backend %u (loopback = %u, ucx = %u)",
                                               backend, KVT_BACKEND_LOOPBACK, KVT_BACKEND_UCX));

    kvt_agent *agent = calloc(1, sizeof *agent);
    if (!agent) return kvt_count_result(NULL, kvt_fail(KVT_ERR_NO_MEMORY, "kvt_agent_create: out of memory"));
    agent->backend = impl;
    atomic_init(&agent->issue_limit, KVT_ISSUE_UNLIMITED);
    status = agent_init(agent, name, backend);

    /* Reserve the name, so two creations with one name cannot both succeed. */
    if (status == KVT_OK) {
        pthread_mutex_lock(&agents_lock);
        for (uint32_t i = 0; i < agent_count && status == KVT_OK; i++)
            if (strcmp(agents[i]->name, name) == 0)
                status = kvt_fail(KVT_ERR_NOT_ALLOWED, "kvt_agent_create: an agent named '%s' already exists (id %u)",
                                  name, agents[i]->id);
        if (status == KVT_OK && agent_count == agent_capacity) {
            uint32_t capacity = agent_capacity ? agent_capacity * 2 : 8;
            kvt_agent **grown = realloc(agents, capacity * sizeof *grown);
            if (!grown)
                status = kvt_fail(KVT_ERR_NO_MEMORY, "kvt_agent_create: out of memory");
            else {
                agents = grown;
                agent_capacity = capacity;
            }
        }
        if (status == KVT_OK) {
            agent->id = next_agent_id++;
            agents[agent_count++] = agent;
        }
        pthread_mutex_unlock(&agents_lock);
        if (status != KVT_OK) {
            agent_free(agent);
            return kvt_count_result(NULL, status);
        }
        agent->announce_start = announce_start;
        int rc = pthread_create(&agent->thread, NULL, progress_main, agent);
        if (rc != 0) status = kvt_fail(KVT_ERR_BACKEND, "kvt_agent_create: pthread_create failed: %s", strerror(rc));
        pthread_mutex_lock(&agents_lock);
        agent->thread_started = rc == 0;
        pthread_mutex_unlock(&agents_lock);
    }
    if (status != KVT_OK) {
        forget_agent(agent);
        agent_free(agent);
        return kvt_count_result(NULL, status);
    }
    *out = agent;
    return KVT_OK;
}

kvt_status kvt_agent_create_begin(const char *name, uint32_t backend, uint32_t flags, uint32_t *out_agent) {
    kvt_detail_clear();
    kvt_agent *agent;
    kvt_status status = create_agent(name, backend, flags, out_agent, true, &agent);
    if (status == KVT_OK) *out_agent = agent->id;
    return status == KVT_OK ? KVT_IN_PROGRESS : status;
}

kvt_status kvt_agent_create(const char *name, uint32_t backend, uint32_t flags, uint32_t *out_agent) {
    kvt_detail_clear();
    kvt_agent *agent;
    kvt_status status = create_agent(name, backend, flags, out_agent, false, &agent);
    if (status != KVT_OK) return status;
    wait_for_start(agent); /* the backend starts on the progress thread: wait for its outcome */
    if (agent->start_status != KVT_OK) {
        status = kvt_fail(agent->start_status, "kvt_agent_create: %s", agent->start_detail);
        pthread_join(agent->thread, NULL);
        forget_agent(agent);
        agent_free(agent);
        return kvt_count_result(NULL, status);
    }
    *out_agent = agent->id;
    return KVT_OK;
}

/* The outcome of a phase the progress thread reports through the wake-up pipe (start, shutdown):
 * KVT_IN_PROGRESS until it is done, then its status, with its detail when it failed. */
static kvt_status phase_outcome(kvt_agent *agent, const bool *done, const kvt_status *result, const char *detail) {
    pthread_mutex_lock(&agent->lock);
    kvt_status status = !*done ? KVT_IN_PROGRESS : *result == KVT_OK ? KVT_OK : kvt_fail(*result, "%s", detail);
    pthread_mutex_unlock(&agent->lock);
    kvt_agent_release(agent); /* the outcome is an answer, not a failing call: not counted */
    return status;
}

kvt_status kvt_agent_start_status(uint32_t agent_id) {
    kvt_agent *agent;
    kvt_status status = enter_any_state(agent_id, "kvt_agent_start_status", &agent);
    if (status != KVT_OK) return status;
    return phase_outcome(agent, &agent->start_done, &agent->start_status, agent->start_detail);
}

/* Waits until no other thread is inside an API call on the agent (agents_lock held). */
static void wait_for_other_calls_locked(kvt_agent *agent) {
    while (agent->api_refs > 1) pthread_cond_wait(&agents_cond, &agents_lock);
}

/*
 * Decides a shutdown of an acquired agent: refused (BUSY) while registrations, allocations or operations
 * remain; else the agent is hidden from every call but its shutdown status and destroy, and the progress
 * thread is told to close its connections by `deadline_ms` from now. KVT_IN_PROGRESS when accepted (also
 * when a shutdown was accepted before: the first deadline stays).
 */
static kvt_status begin_shutdown(kvt_agent *agent, const char *call, uint32_t deadline_ms) {
    /* Close the door to new calls and let running ones finish, so the check below stays true. */
    pthread_mutex_lock(&agents_lock);
    bool begun = agent->shutting_down, deciding = agent->closing;
    if (!begun && !deciding) agent->closing = true;
    pthread_mutex_unlock(&agents_lock);
    if (begun) return KVT_IN_PROGRESS;
    if (deciding)
        return kvt_fail(KVT_ERR_NOT_ALLOWED, "%s: another thread is deciding a shutdown of agent '%s'", call,
                        agent->name);
    pthread_mutex_lock(&agent->lock);
    pthread_cond_broadcast(&agent->pending_cond); /* kvt_agent_wait returns early */
    pthread_mutex_unlock(&agent->lock);
    pthread_mutex_lock(&agents_lock);
    wait_for_other_calls_locked(agent);
    pthread_mutex_unlock(&agents_lock);

    kvt_status status = KVT_IN_PROGRESS;
    pthread_mutex_lock(&agent->lock);
    if (agent->region_count || agent->allocation_count || agent->ops.size)
        status = kvt_fail(KVT_ERR_BUSY,
                          "%s: agent '%s' still has %u registration(s), %u allocation(s) and %zu operation(s) not "
                          "released",
                          call, agent->name, agent->region_count, agent->allocation_count, agent->ops.size);
    pthread_mutex_unlock(&agent->lock);
    pthread_mutex_lock(&agents_lock);
    pthread_cond_broadcast(&agents_cond); /* calls waiting for the outcome */
    agent->closing = false;
    if (status == KVT_IN_PROGRESS) {
        agent->ready = false; /* loopback peers see it gone */
        agent->shutting_down = true;
        wait_for_other_calls_locked(agent); /* loopback copies that found it just before */
    }
    pthread_mutex_unlock(&agents_lock);
    if (status != KVT_IN_PROGRESS) return status;

    atomic_store(&agent->progress_stalled, false); /* a shutdown ends kvt_fault_stall_progress */
    pthread_mutex_lock(&agent->lock);
    agent->shutdown_deadline_ns = kvt_now_ns() + (uint64_t)deadline_ms * 1000000u;
    agent->stop_command = (kvt_command){.kind = KVT_CMD_STOP};
    kvt_command_submit_locked(agent, &agent->stop_command);
    pthread_mutex_unlock(&agent->lock);
    return KVT_IN_PROGRESS;
}

kvt_status kvt_agent_shutdown(uint32_t agent_id, uint32_t deadline_ms) {
    kvt_agent *agent;
    kvt_status status = enter_any_state(agent_id, "kvt_agent_shutdown", &agent);
    if (status != KVT_OK) return status;
    if (deadline_ms > KVT_MAX_SHUTDOWN_MS)
        return kvt_agent_finish(agent, kvt_fail(KVT_ERR_INVALID_PARAM,
                                                "kvt_agent_shutdown: deadline_ms %u of agent '%s' exceeds %u", deadline_ms,
                                                agent->name, KVT_MAX_SHUTDOWN_MS));
    wait_for_start(agent);
    if (agent->start_status != KVT_OK)
        return kvt_agent_finish(agent, kvt_fail(KVT_ERR_NOT_ALLOWED,
                                                "kvt_agent_shutdown: agent '%s' did not start (%s); destroy it",
                                                agent->name, kvt_status_name(agent->start_status)));
    return kvt_agent_finish(agent, begin_shutdown(agent, "kvt_agent_shutdown", deadline_ms));
}

kvt_status kvt_agent_shutdown_status(uint32_t agent_id) {
    kvt_agent *agent;
    kvt_status status = enter_any_state(agent_id, "kvt_agent_shutdown_status", &agent);
    if (status != KVT_OK) return status;
    pthread_mutex_lock(&agents_lock);
    bool shutting_down = agent->shutting_down;
    pthread_mutex_unlock(&agents_lock);
    if (!shutting_down)
        return kvt_agent_finish(agent, kvt_fail(KVT_ERR_NOT_ALLOWED,
                                                "kvt_agent_shutdown_status: agent '%s' is not shutting down", agent->name));
    return phase_outcome(agent, &agent->shutdown_done, &agent->shutdown_status, agent->shutdown_detail);
}

kvt_status kvt_agent_destroy(uint32_t agent_id) {
    kvt_agent *agent;
    kvt_status status = enter_any_state(agent_id, "kvt_agent_destroy", &agent);
    if (status != KVT_OK) return status;
    wait_for_start(agent);
    bool started = agent->start_status == KVT_OK;
    if (started) status = begin_shutdown(agent, "kvt_agent_destroy", KVT_DEFAULT_SHUTDOWN_MS);
    if (started && status != KVT_IN_PROGRESS) return kvt_agent_finish(agent, status);
    pthread_mutex_lock(&agents_lock);
    bool raced = agent->destroying;
    agent->destroying = true;
    if (!raced) {
        wait_for_other_calls_locked(agent);
        for (uint32_t i = 0; i < agent_count; i++)
            if (agents[i] == agent) agents[i] = agents[--agent_count];
    }
    pthread_mutex_unlock(&agents_lock);
    if (raced)
        return kvt_agent_finish(agent, kvt_fail(KVT_ERR_NOT_FOUND, "kvt_agent_destroy: agent %u is being destroyed by "
                                                                   "another thread",
                                                agent_id));
    pthread_mutex_lock(&agent->lock);
    while (started && !agent->shutdown_done) pthread_cond_wait(&agent->pending_cond, &agent->lock);
    pthread_mutex_unlock(&agent->lock);
    pthread_join(agent->thread, NULL);
    if (started) kvt_counter_add(NULL, KVT_COUNTER_LIVE_AGENTS, -1);
    /* Per-agent gauges die with the agent; the process-wide ones were adjusted as things went. */
    kvt_counter_add(NULL, KVT_COUNTER_PENDING_NOTIFICATIONS, -(int64_t)agent->notification_count);
    agent_free(agent);
    return KVT_OK;
}

/* ---- library unload ------------------------------------------------------------------------------ */

/* Agents may still be open when the library goes away: Node's koffi unloads it when Node tears its
 * environment down, and a process may exit without closing them. Their progress threads must not run
 * this library's code once it is unmapped, nor UCX's once UCX's own destructors ran (they run after
 * this one): stop each thread where it is and wait for it. Nothing is freed; the process is going. An
 * agent whose destroy is under way is left to that destroy, which joins its thread. */
__attribute__((destructor)) static void abandon_agents_at_unload(void) {
    pthread_mutex_lock(&agents_lock);
    uint32_t count = 0;
    pthread_t *threads = agent_count ? calloc(agent_count, sizeof *threads) : NULL;
    for (uint32_t i = 0; threads && i < agent_count; i++) {
        kvt_agent *agent = agents[i];
        if (!agent->thread_started || agent->closing || agent->destroying) continue;
        atomic_store_explicit(&agent->abandoned, true, memory_order_release);
        kvt_agent_kick(agent);
        threads[count++] = agent->thread;
    }
    pthread_mutex_unlock(&agents_lock);
    for (uint32_t i = 0; i < count; i++) pthread_join(threads[i], NULL);
    free(threads);
}

/* ---- completion delivery -------------------------------------------------------------------------- */

void kvt_wake_consumer(kvt_agent *agent) {
    const char byte = 1;
    ssize_t written = write(agent->wake_pipe[1], &byte, 1);
    (void)written; /* EAGAIN: the pipe is full, so the reader is already woken */
}

/* Whether the wake-up edge fires now (delivery_lock held): the first time since the last poll. */
static bool fire_wake_delivery_locked(kvt_agent *agent) {
    if (agent->wake_signaled) return false;
    agent->wake_signaled = true;
    return true;
}

bool kvt_signal_pending_locked(kvt_agent *agent) {
    pthread_cond_broadcast(&agent->pending_cond);
    pthread_mutex_lock(&agent->delivery_lock);
    bool wake = fire_wake_delivery_locked(agent);
    pthread_mutex_unlock(&agent->delivery_lock);
    return wake;
}

void kvt_completion_push_locked(kvt_agent *agent, kvt_op *op) {
    pthread_mutex_lock(&agent->delivery_lock);
    op->completion_queued = true;
    op->completion_next = NULL;
    op->completion_prev = agent->completions_last;
    if (agent->completions_last)
        agent->completions_last->completion_next = op;
    else
        agent->completions_first = op;
    agent->completions_last = op;
    agent->completion_count++;
    pthread_mutex_unlock(&agent->delivery_lock);
}

/* Takes a queued op off the completion queue (delivery_lock held). */
static void completion_remove_delivery_locked(kvt_agent *agent, kvt_op *op) {
    if (!op->completion_queued) return;
    if (op->completion_prev)
        op->completion_prev->completion_next = op->completion_next;
    else
        agent->completions_first = op->completion_next;
    if (op->completion_next)
        op->completion_next->completion_prev = op->completion_prev;
    else
        agent->completions_last = op->completion_prev;
    op->completion_queued = false;
    op->completion_prev = op->completion_next = NULL;
    agent->completion_count--;
}

void kvt_completion_remove_locked(kvt_agent *agent, kvt_op *op) {
    pthread_mutex_lock(&agent->delivery_lock);
    completion_remove_delivery_locked(agent, op);
    pthread_mutex_unlock(&agent->delivery_lock);
}

/* Peer reports are counted before they are signalled (kvt_signal_pending_locked takes delivery_lock), so a
 * re-arm that reads none here is followed by that signal's byte. */
static bool anything_pending_delivery_locked(const kvt_agent *agent) {
    return agent->completion_count > 0 || agent->notification_count > 0 ||
           atomic_load(&agent->peer_events_pending) > 0;
}

static bool anything_pending(kvt_agent *agent) {
    pthread_mutex_lock(&agent->delivery_lock);
    bool pending = anything_pending_delivery_locked(agent);
    pthread_mutex_unlock(&agent->delivery_lock);
    return pending;
}

bool kvt_rearm_wake(kvt_agent *agent) {
    pthread_mutex_lock(&agent->delivery_lock);
    agent->wake_signaled = false;
    bool wake = anything_pending_delivery_locked(agent) && fire_wake_delivery_locked(agent);
    pthread_mutex_unlock(&agent->delivery_lock);
    return wake;
}

kvt_status kvt_agent_wake_fd(uint32_t agent_id, int32_t *out_fd) {
    kvt_detail_clear();
    if (!out_fd) return kvt_count_result(NULL, kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_agent_wake_fd: out_fd is NULL"));
    kvt_agent *agent;
    kvt_status status = enter_any_state(agent_id, "kvt_agent_wake_fd", &agent);
    if (status != KVT_OK) return status;
    *out_fd = agent->wake_pipe[0];
    kvt_agent_release(agent);
    return KVT_OK;
}

kvt_status kvt_agent_poll(uint32_t agent_id, uint32_t capacity, uint64_t *op_ids, int32_t *statuses,
                          uint64_t *bytes_done, uint32_t *out_count) {
    kvt_agent *agent;
    kvt_status status =
        kvt_poll_enter(agent_id, "kvt_agent_poll", out_count && (capacity == 0 || (op_ids && statuses && bytes_done)),
                       "out_count and (capacity > 0) the arrays must not be NULL", &agent);
    if (status != KVT_OK) return status;
    uint32_t n = 0;
    /* Without the agent lock: a queued op's fields are final (it was terminal before it was queued) and it
     * is not freed while queued (kvt_xfer_release takes it off the queue first). */
    pthread_mutex_lock(&agent->delivery_lock);
    while (n < capacity && agent->completions_first) {
        kvt_op *op = agent->completions_first;
        completion_remove_delivery_locked(agent, op);
        op_ids[n] = op->id;
        statuses[n] = op->status;
        bytes_done[n] = atomic_load_explicit(&op->bytes_done, memory_order_relaxed);
        n++;
    }
    pthread_mutex_unlock(&agent->delivery_lock);
    if (kvt_rearm_wake(agent)) kvt_wake_consumer(agent);
    *out_count = n;
    kvt_agent_release(agent);
    return KVT_OK;
}

kvt_status kvt_agent_wait(uint32_t agent_id, uint32_t timeout_ms) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_agent_wait", &agent);
    if (status != KVT_OK) return status;
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&agent->lock);
    agent->blocked_waits++;
    while (!anything_pending(agent) && !agent->closing) {
        if (pthread_cond_timedwait(&agent->pending_cond, &agent->lock, &deadline) == ETIMEDOUT) break;
    }
    agent->blocked_waits--;
    bool pending = anything_pending(agent);
    pthread_mutex_unlock(&agent->lock);
    kvt_agent_release(agent);
    /* Not counted as an error: "nothing pending yet" is an ordinary answer of a wait. */
    if (!pending)
        return kvt_fail(KVT_ERR_TIMEOUT, "kvt_agent_wait: nothing pending on agent %u after %u ms", agent_id,
                        timeout_ms);
    return KVT_OK;
}

kvt_status kvt_agent_blocked_waits(uint32_t agent_id, uint32_t *out_count) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_agent_blocked_waits", &agent);
    if (status != KVT_OK) return status;
    pthread_mutex_lock(&agent->lock);
    *out_count = agent->blocked_waits;
    pthread_mutex_unlock(&agent->lock);
    return kvt_agent_finish(agent, KVT_OK);
}

kvt_status kvt_test_hold_serving(uint32_t agent_id, bool hold) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_test_hold_serving", &agent);
    if (status != KVT_OK) return status;
    atomic_store(&agent->serving_held, hold);
    kvt_agent_kick(agent);
    return kvt_agent_finish(agent, KVT_OK);
}

/* ---- notifications (receiving side) ---------------------------------------------------------------- */

void kvt_agent_deliver_notification(kvt_agent *agent, const char *sender, const uint8_t *data, uint32_t length) {
    kvt_notification *note = NULL;
    if (length <= KVT_MAX_NOTIFICATION) note = malloc(sizeof *note + length);
    if (note) {
        snprintf(note->sender, sizeof note->sender, "%s", sender);
        note->length = length;
        if (length) memcpy(note->data, data, length);
    }
    pthread_mutex_lock(&agent->lock); /* kvt_agent_wait looks for it under the lock */
    pthread_mutex_lock(&agent->delivery_lock);
    bool queued = note && agent->notification_count < KVT_MAX_PENDING_NOTIFICATIONS;
    if (queued) {
        agent->notifications[(agent->notification_head + agent->notification_count) % KVT_MAX_PENDING_NOTIFICATIONS] =
            note;
        agent->notification_count++;
        kvt_counter_add(agent, KVT_COUNTER_NOTIFICATIONS_RECEIVED, 1);
        kvt_counter_add(agent, KVT_COUNTER_PENDING_NOTIFICATIONS, 1);
    } else {
        kvt_counter_add(agent, KVT_COUNTER_NOTIFICATIONS_DROPPED, 1);
    }
    pthread_mutex_unlock(&agent->delivery_lock);
    bool wake = queued && kvt_signal_pending_locked(agent);
    pthread_mutex_unlock(&agent->lock);
    if (!queued) free(note);
    if (wake) kvt_wake_consumer(agent);
}

kvt_status kvt_notify_poll(uint32_t agent_id, char *sender, uint32_t sender_capacity, uint8_t *data,
                           uint32_t data_capacity, uint32_t *out_length, uint32_t *out_got) {
    kvt_agent *agent;
    kvt_status status = kvt_poll_enter(agent_id, "kvt_notify_poll", sender && data && out_length && out_got,
                                       "sender, data, out_length and out_got must not be NULL", &agent);
    if (status != KVT_OK) return status;
    *out_got = 0;
    kvt_notification *taken = NULL;
    size_t name_length = 0;
    uint32_t needed_length = 0;
    pthread_mutex_lock(&agent->delivery_lock); /* not the agent lock: see delivery_lock */
    if (agent->notification_count > 0) {
        kvt_notification *note = agent->notifications[agent->notification_head];
        name_length = strlen(note->sender);
        needed_length = note->length;
        if (sender_capacity > name_length && data_capacity >= note->length) {
            taken = note;
            agent->notifications[agent->notification_head] = NULL;
            agent->notification_head = (agent->notification_head + 1) % KVT_MAX_PENDING_NOTIFICATIONS;
            agent->notification_count--;
            kvt_counter_add(agent, KVT_COUNTER_PENDING_NOTIFICATIONS, -1);
        } else {
            status = KVT_ERR_INVALID_PARAM;
        }
    }
    pthread_mutex_unlock(&agent->delivery_lock);
    if (taken) {
        memcpy(sender, taken->sender, name_length + 1);
        memcpy(data, taken->data, taken->length);
        *out_length = taken->length;
        *out_got = 1;
        free(taken);
    } else if (status != KVT_OK) {
        kvt_fail(status,
                 "kvt_notify_poll: the next notification needs sender capacity %zu and data capacity %u (got %u and "
                 "%u); it stays queued",
                 name_length + 1, needed_length, sender_capacity, data_capacity);
    }
    if (kvt_rearm_wake(agent)) kvt_wake_consumer(agent);
    return kvt_agent_finish(agent, status);
}

/* ---- fault injection ------------------------------------------------------------------------------- */

kvt_status kvt_fault_take_locked(kvt_agent *agent, uint32_t point) {
    kvt_fault *fault = &agent->faults[point];
    if (fault->remaining == 0) return KVT_OK;
    if (--fault->remaining > 0) return KVT_OK;
    return fault->code;
}

kvt_status kvt_fault_fail(uint32_t agent_id, uint32_t point, uint32_t nth, kvt_status code) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_fault_fail", &agent);
    if (status != KVT_OK) return status;
    if (point > KVT_FAULT_ALLOCATION)
        status = kvt_fail(KVT_ERR_INVALID_PARAM,
                          "kvt_fault_fail: unknown point %u (register 0, post 1, completion 2, allocation 3)", point);
    else if (nth == 0)
        status = kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_fault_fail: nth must be >= 1 (1 = the next call)");
    else if (!kvt_is_error_code(code))
        status = kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_fault_fail: code %d is not a KVT_ERR_* code", code);
    if (status == KVT_OK) {
        pthread_mutex_lock(&agent->lock);
        agent->faults[point] = (kvt_fault){.remaining = nth, .code = code};
        pthread_mutex_unlock(&agent->lock);
    }
    return kvt_agent_finish(agent, status);
}

kvt_status kvt_fault_delay_completions(uint32_t agent_id, uint32_t ms) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_fault_delay_completions", &agent);
    if (status != KVT_OK) return status;
    pthread_mutex_lock(&agent->lock);
    atomic_store(&agent->delay_ms, ms);
    kvt_agent_kick(agent);
    pthread_mutex_unlock(&agent->lock);
    kvt_agent_release(agent);
    return KVT_OK;
}

kvt_status kvt_fault_pause_issue(uint32_t agent_id, uint64_t bytes) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_fault_pause_issue", &agent);
    if (status != KVT_OK) return status;
    pthread_mutex_lock(&agent->lock);
    atomic_store(&agent->issue_limit, bytes);
    kvt_agent_kick(agent);
    pthread_mutex_unlock(&agent->lock);
    kvt_agent_release(agent);
    return KVT_OK;
}

kvt_status kvt_fault_stall_progress(uint32_t agent_id, uint32_t stall) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_fault_stall_progress", &agent);
    if (status != KVT_OK) return status;
    if (stall > 1)
        return kvt_agent_finish(agent, kvt_fail(KVT_ERR_INVALID_PARAM,
                                                "kvt_fault_stall_progress: stalled must be 0 or 1 (got %u)", stall));
    atomic_store(&agent->progress_stalled, stall == 1);
    kvt_agent_kick(agent);
    return kvt_agent_finish(agent, KVT_OK);
}

kvt_status kvt_fault_clear(uint32_t agent_id) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_fault_clear", &agent);
    if (status != KVT_OK) return status;
    pthread_mutex_lock(&agent->lock);
    memset(agent->faults, 0, sizeof agent->faults);
    atomic_store(&agent->delay_ms, 0);
    atomic_store(&agent->issue_limit, KVT_ISSUE_UNLIMITED);
    atomic_store(&agent->progress_stalled, false);
    kvt_agent_kick(agent);
    pthread_mutex_unlock(&agent->lock);
    kvt_agent_release(agent);
    return KVT_OK;
}
