/* Agents: the process-wide table, lifecycle, the progress thread, completion delivery, counters and
 * fault injection. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
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

static kvt_agent *find_agent_locked(uint32_t id) {
    for (uint32_t i = 0; i < agent_count; i++)
        if (agents[i]->id == id && agents[i]->ready) return agents[i];
    return NULL;
}

/* While a destroy is deciding (it may still refuse with BUSY), new calls wait for its outcome. */
kvt_status kvt_agent_acquire(uint32_t id, const char *call, kvt_agent **out) {
    pthread_mutex_lock(&agents_lock);
    kvt_agent *agent = find_agent_locked(id);
    while (agent && agent->closing) {
        pthread_cond_wait(&agents_cond, &agents_lock);
        agent = find_agent_locked(id);
    }
    if (agent) agent->api_refs++;
    pthread_mutex_unlock(&agents_lock);
    if (!agent) return kvt_fail(KVT_ERR_NOT_FOUND, "%s: no live agent with id %u", call, id);
    *out = agent;
    return KVT_OK;
}

kvt_status kvt_enter(uint32_t id, const char *call, kvt_agent **out) {
    kvt_detail_clear();
    return kvt_count_result(NULL, kvt_agent_acquire(id, call, out));
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
    if (agent->commands_tail)
        agent->commands_tail->next = command;
    else
        agent->commands = command;
    agent->commands_tail = command;
    atomic_store_explicit(&agent->commands_pending, true, memory_order_release);
    kvt_agent_kick(agent);
    if (command->sync)
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

void kvt_agent_call_async(kvt_agent *agent, kvt_status (*call)(kvt_agent *, void *, char *, size_t), const void *arg,
                          size_t arg_size) {
    /* One block: the command, then a copy of the argument (suitably aligned after it). */
    size_t offset = (sizeof(kvt_command) + 15u) & ~(size_t)15u;
    kvt_command *command = malloc(offset + arg_size);
    if (!command) {
        kvt_agent_call(agent, call, (void *)(uintptr_t)arg); /* no memory: wait for it instead */
        return;
    }
    *command = (kvt_command){.kind = KVT_CMD_CALL, .call = call, .arg = (char *)command + offset};
    memcpy(command->arg, arg, arg_size);
    pthread_mutex_lock(&agent->lock);
    kvt_command_submit_locked(agent, command);
    pthread_mutex_unlock(&agent->lock);
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
    pthread_mutex_lock(&agent->lock);
    kvt_command *command = agent->commands;
    agent->commands = agent->commands_tail = NULL;
    atomic_store_explicit(&agent->commands_pending, false, memory_order_relaxed);
    pthread_mutex_unlock(&agent->lock);
    bool keep_running = true;
    while (command) {
        kvt_command *next = command->next; /* a completed sync command may vanish */
        *worked = true;
        switch (command->kind) {
        case KVT_CMD_POST:
            kvt_ops_run(agent, command);
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
            keep_running = false;
            complete_command(agent, command);
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

typedef struct {
    kvt_agent *agent;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool ready;
    kvt_status status;
    char detail[512];
} start_context;

static void *progress_main(void *arg) {
    start_context *start = arg;
    kvt_agent *agent = start->agent;
    kvt_status status = agent->backend->start(agent, start->detail, sizeof start->detail);
    pthread_mutex_lock(&start->lock);
    start->status = status;
    start->ready = true;
    pthread_cond_signal(&start->cond);
    pthread_mutex_unlock(&start->lock); /* `start` is gone after this */
    if (status != KVT_OK) return NULL;

    /* The hot path (operations in flight) takes no lock and makes no system call per round. */
    for (;;) {
        if (atomic_load_explicit(&agent->abandoned, memory_order_acquire)) return NULL;
        bool worked = false;
        if (!run_commands(agent, &worked)) break;
        worked |= agent->backend->progress(agent);
        kvt_ops_run(agent, NULL);
        kvt_reap_dead_conns(agent);
        if (agent->active) continue; /* operations in flight: keep the backend busy */
        if (worked || atomic_load_explicit(&agent->commands_pending, memory_order_acquire)) continue;
        agent->backend->sleep(agent, kvt_ops_next_timeout_ms(agent));
        drain_command_fd(agent);
    }
    kvt_peers_free_all(agent);
    kvt_reap_dead_conns(agent);
    agent->backend->stop(agent);
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
    free(agent->regions);
    free(agent->peers);
    kvt_map_free(&agent->ops);
    pthread_mutex_destroy(&agent->config_lock);
    pthread_mutex_destroy(&agent->lock);
    pthread_cond_destroy(&agent->command_done);
    pthread_cond_destroy(&agent->pending_cond);
    pthread_rwlock_destroy(&agent->region_lock);
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
    agent->notifications = calloc(KVT_MAX_PENDING_NOTIFICATIONS, sizeof *agent->notifications);
    if (!agent->notifications) return kvt_fail(KVT_ERR_NO_MEMORY, "kvt_agent_create: out of memory");
    if (pipe2(agent->wake_pipe, O_NONBLOCK | O_CLOEXEC) != 0)
        return kvt_fail(KVT_ERR_BACKEND, "kvt_agent_create: pipe2 failed: %s", strerror(errno));
    agent->command_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (agent->command_fd < 0)
        return kvt_fail(KVT_ERR_BACKEND, "kvt_agent_create: eventfd failed: %s", strerror(errno));
    return KVT_OK;
}

static kvt_status start_progress_thread(kvt_agent *agent) {
    start_context start = {.agent = agent};
    pthread_mutex_init(&start.lock, NULL);
    pthread_cond_init(&start.cond, NULL);
    int rc = pthread_create(&agent->thread, NULL, progress_main, &start);
    kvt_status status = KVT_OK;
    if (rc != 0) {
        status = kvt_fail(KVT_ERR_BACKEND, "kvt_agent_create: pthread_create failed: %s", strerror(rc));
    } else {
        pthread_mutex_lock(&start.lock);
        while (!start.ready) pthread_cond_wait(&start.cond, &start.lock);
        pthread_mutex_unlock(&start.lock);
        if (start.status != KVT_OK) {
            pthread_join(agent->thread, NULL);
            status = kvt_fail(start.status, "kvt_agent_create: %s", start.detail);
        }
    }
    pthread_mutex_destroy(&start.lock);
    pthread_cond_destroy(&start.cond);
    return status;
}

kvt_status kvt_agent_create(const char *name, uint32_t backend, uint32_t flags, uint32_t *out_agent) {
    kvt_detail_clear();
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
    if (backend == KVT_BACKEND_UCX) impl = &kvt_ucx_backend;
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
        status = start_progress_thread(agent);
    }

    pthread_mutex_lock(&agents_lock);
    if (status == KVT_OK) {
        agent->ready = true;
    } else {
        for (uint32_t i = 0; i < agent_count; i++)
            if (agents[i] == agent) agents[i] = agents[--agent_count];
    }
    pthread_mutex_unlock(&agents_lock);
    if (status != KVT_OK) {
        agent_free(agent);
        return kvt_count_result(NULL, status);
    }
    kvt_counter_add(NULL, KVT_COUNTER_LIVE_AGENTS, 1);
    *out_agent = agent->id;
    return KVT_OK;
}

/* Waits until no other thread is inside an API call on the agent (agents_lock held). */
static void wait_for_other_calls_locked(kvt_agent *agent) {
    while (agent->api_refs > 1) pthread_cond_wait(&agents_cond, &agents_lock);
}

kvt_status kvt_agent_destroy(uint32_t agent_id) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_agent_destroy", &agent);
    if (status != KVT_OK) return status;
    /* Close the door to new calls and let running ones finish, so the check below stays true. */
    pthread_mutex_lock(&agents_lock);
    agent->closing = true;
    pthread_mutex_unlock(&agents_lock);
    pthread_mutex_lock(&agent->lock);
    pthread_cond_broadcast(&agent->pending_cond); /* kvt_agent_wait returns early */
    pthread_mutex_unlock(&agent->lock);
    pthread_mutex_lock(&agents_lock);
    wait_for_other_calls_locked(agent);
    pthread_mutex_unlock(&agents_lock);

    pthread_mutex_lock(&agent->lock);
    if (agent->region_count || agent->allocation_count || agent->ops.size)
        status = kvt_fail(KVT_ERR_BUSY,
                          "kvt_agent_destroy: agent '%s' still has %u registration(s), %u allocation(s) and %zu "
                          "operation(s) not released",
                          agent->name, agent->region_count, agent->allocation_count, agent->ops.size);
    pthread_mutex_unlock(&agent->lock);
    pthread_mutex_lock(&agents_lock);
    pthread_cond_broadcast(&agents_cond); /* calls waiting for the outcome */
    if (status != KVT_OK) {
        agent->closing = false;
    } else {
        agent->ready = false; /* loopback peers see it gone */
        for (uint32_t i = 0; i < agent_count; i++)
            if (agents[i] == agent) agents[i] = agents[--agent_count];
        wait_for_other_calls_locked(agent); /* loopback copies that found it just before */
    }
    pthread_mutex_unlock(&agents_lock);
    if (status != KVT_OK) return kvt_agent_finish(agent, status);

    kvt_command stop = {.kind = KVT_CMD_STOP, .sync = true};
    pthread_mutex_lock(&agent->lock);
    kvt_command_submit_locked(agent, &stop);
    pthread_mutex_unlock(&agent->lock);
    pthread_join(agent->thread, NULL);
    kvt_counter_add(NULL, KVT_COUNTER_LIVE_AGENTS, -1);
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
        if (!agent->ready || agent->closing) continue;
        atomic_store_explicit(&agent->abandoned, true, memory_order_release);
        kvt_agent_kick(agent);
        threads[count++] = agent->thread;
    }
    pthread_mutex_unlock(&agents_lock);
    for (uint32_t i = 0; i < count; i++) pthread_join(threads[i], NULL);
    free(threads);
}

/* ---- completion delivery -------------------------------------------------------------------------- */

void kvt_signal_pending_locked(kvt_agent *agent) {
    pthread_cond_broadcast(&agent->pending_cond);
    if (agent->wake_signaled) return;
    agent->wake_signaled = true;
    const char byte = 1;
    ssize_t written = write(agent->wake_pipe[1], &byte, 1);
    (void)written; /* EAGAIN: the pipe is full, so the reader is already woken */
}

void kvt_completion_push_locked(kvt_agent *agent, kvt_op *op) {
    op->completion_queued = true;
    op->completion_next = NULL;
    op->completion_prev = agent->completions_last;
    if (agent->completions_last)
        agent->completions_last->completion_next = op;
    else
        agent->completions_first = op;
    agent->completions_last = op;
    agent->completion_count++;
}

void kvt_completion_remove_locked(kvt_agent *agent, kvt_op *op) {
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

static bool anything_pending_locked(const kvt_agent *agent) {
    return agent->completion_count > 0 || agent->notification_count > 0;
}

/* After a poll: re-arm the wake-up edge, and fire it again if something is still pending. */
static void rearm_wake_locked(kvt_agent *agent) {
    agent->wake_signaled = false;
    if (anything_pending_locked(agent)) kvt_signal_pending_locked(agent);
}

kvt_status kvt_agent_wake_fd(uint32_t agent_id, int32_t *out_fd) {
    kvt_detail_clear();
    if (!out_fd) return kvt_count_result(NULL, kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_agent_wake_fd: out_fd is NULL"));
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_agent_wake_fd", &agent);
    if (status != KVT_OK) return status;
    *out_fd = agent->wake_pipe[0];
    kvt_agent_release(agent);
    return KVT_OK;
}

kvt_status kvt_agent_poll(uint32_t agent_id, uint32_t capacity, uint64_t *op_ids, int32_t *statuses,
                          uint64_t *bytes_done, uint32_t *out_count) {
    kvt_detail_clear();
    if (!out_count || (capacity > 0 && (!op_ids || !statuses || !bytes_done)))
        return kvt_count_result(
            NULL, kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_agent_poll: out_count and (capacity %u > 0) the arrays must "
                                                  "not be NULL",
                           capacity));
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_agent_poll", &agent);
    if (status != KVT_OK) return status;
    uint32_t n = 0;
    pthread_mutex_lock(&agent->lock);
    while (n < capacity && agent->completions_first) {
        kvt_op *op = agent->completions_first;
        kvt_completion_remove_locked(agent, op);
        op_ids[n] = op->id;
        statuses[n] = op->status;
        bytes_done[n] = atomic_load_explicit(&op->bytes_done, memory_order_relaxed);
        n++;
    }
    rearm_wake_locked(agent);
    pthread_mutex_unlock(&agent->lock);
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
    while (!anything_pending_locked(agent) && !agent->closing) {
        if (pthread_cond_timedwait(&agent->pending_cond, &agent->lock, &deadline) == ETIMEDOUT) break;
    }
    agent->blocked_waits--;
    bool pending = anything_pending_locked(agent);
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
    pthread_mutex_lock(&agent->lock);
    if (!note || agent->notification_count >= KVT_MAX_PENDING_NOTIFICATIONS) {
        kvt_counter_add(agent, KVT_COUNTER_NOTIFICATIONS_DROPPED, 1);
        pthread_mutex_unlock(&agent->lock);
        free(note);
        return;
    }
    snprintf(note->sender, sizeof note->sender, "%s", sender);
    note->length = length;
    if (length) memcpy(note->data, data, length);
    agent->notifications[(agent->notification_head + agent->notification_count) % KVT_MAX_PENDING_NOTIFICATIONS] =
        note;
    agent->notification_count++;
    kvt_counter_add(agent, KVT_COUNTER_NOTIFICATIONS_RECEIVED, 1);
    kvt_counter_add(agent, KVT_COUNTER_PENDING_NOTIFICATIONS, 1);
    kvt_signal_pending_locked(agent);
    pthread_mutex_unlock(&agent->lock);
}

kvt_status kvt_notify_poll(uint32_t agent_id, char *sender, uint32_t sender_capacity, uint8_t *data,
                           uint32_t data_capacity, uint32_t *out_length, uint32_t *out_got) {
    kvt_detail_clear();
    if (!sender || !data || !out_length || !out_got)
        return kvt_count_result(
            NULL, kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_notify_poll: sender, data, out_length and out_got must not be NULL"));
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_notify_poll", &agent);
    if (status != KVT_OK) return status;
    pthread_mutex_lock(&agent->lock);
    *out_got = 0;
    if (agent->notification_count > 0) {
        kvt_notification *note = agent->notifications[agent->notification_head];
        size_t name_length = strlen(note->sender);
        if (sender_capacity <= name_length || data_capacity < note->length) {
            status = kvt_fail(KVT_ERR_INVALID_PARAM,
                              "kvt_notify_poll: the next notification needs sender capacity %zu and data capacity %u "
                              "(got %u and %u); it stays queued",
                              name_length + 1, note->length, sender_capacity, data_capacity);
        } else {
            memcpy(sender, note->sender, name_length + 1);
            memcpy(data, note->data, note->length);
            *out_length = note->length;
            *out_got = 1;
            agent->notifications[agent->notification_head] = NULL;
            agent->notification_head = (agent->notification_head + 1) % KVT_MAX_PENDING_NOTIFICATIONS;
            agent->notification_count--;
            kvt_counter_add(agent, KVT_COUNTER_PENDING_NOTIFICATIONS, -1);
            free(note);
        }
    }
    rearm_wake_locked(agent);
    pthread_mutex_unlock(&agent->lock);
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
    agent->delay_ms = ms;
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

kvt_status kvt_fault_clear(uint32_t agent_id) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_fault_clear", &agent);
    if (status != KVT_OK) return status;
    pthread_mutex_lock(&agent->lock);
    memset(agent->faults, 0, sizeof agent->faults);
    agent->delay_ms = 0;
    atomic_store(&agent->issue_limit, KVT_ISSUE_UNLIMITED);
    kvt_agent_kick(agent);
    pthread_mutex_unlock(&agent->lock);
    kvt_agent_release(agent);
    return KVT_OK;
}
