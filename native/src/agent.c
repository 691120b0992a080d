/* Agents: their lifecycle (create, start, shutdown, destroy) and the progress thread, which runs the
 * commands, the backend, the operations and the heartbeat. */
#include "agent.h"

#include "blocks.h"
#include "checksums.h"
#include "file_regions.h"
#include "heartbeat.h"
#include "jobs.h"
#include "services/status.h"
#include "services/stretch.h"
#include "template.h"
#include "vram_holds.h"
#include "vram_xfer.h"

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

#define STALL_POLL_MS 50 /* a stalled progress thread looks for the end of the stall this often */
/* How long the progress thread keeps progressing after its last operation ended before it sleeps: a
 * consumer that posts the next operation as it learns of the last one (measured: 60-110 us from the
 * completion to the next post here) finds it awake instead of paying its wake-up. */
#define LINGER_NS 200000u

kvt_status kvt_counters(uint32_t agent_id, uint64_t *values, uint32_t capacity, uint32_t *out_count) {
    kvt_detail_clear();
    if (!out_count || (capacity > 0 && !values))
        return kvt_count_result(NULL,
                                kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_counters: values and out_count must not be NULL"));
    kvt_agent *agent = NULL;
    if (agent_id != 0) {
        kvt_status status = kvt_enter(agent_id, "kvt_counters", &agent);
        if (status != KVT_OK) return status;
    }
    *out_count = kvt_counters_copy(agent ? &agent->counters : NULL, values, capacity);
    if (agent) kvt_agent_release(agent);
    return KVT_OK;
}

/* ---- commands and the progress thread ------------------------------------------------------------ */

/* Runs one batch of commands; returns false after KVT_CMD_STOP. */
static bool run_commands(kvt_agent *agent, bool *worked) {
    kvt_command *command = kvt_commands_take(&agent->commands);
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
            kvt_command_run_call(&agent->commands, agent, command);
            break;
        case KVT_CMD_STOP:
            keep_running = false; /* agent->stop_command: nobody waits on it */
            break;
        }
        command = next;
    }
    /* One byte of its own for the batch's jobs (the completion edge, wake_signaled, stays armed): a consumer
     * that began several finds them all ended when it wakes, instead of waking again for the last ones. */
    if (agent->jobs_ended) {
        agent->jobs_ended = false;
        kvt_wake_consumer(&agent->delivery);
    }
    return keep_running;
}

/* kvt_fault_stall_progress: while stalled (until a shutdown is accepted, which clears the stall, or a
 * destroy is under way), the thread does nothing but wait for a kick, as a stopped process would. */
static bool stalled(kvt_agent *agent) {
    if (!atomic_load(&agent->faults.progress_stalled) || atomic_load(&agent->entry.closing)) return false;
    atomic_store(&agent->faults.stall_entered, true);
    struct pollfd fd = {.fd = agent->commands.fd, .events = POLLIN};
    atomic_store(&agent->commands.sleeping, true);
    poll(&fd, 1, STALL_POLL_MS);
    atomic_store(&agent->commands.sleeping, false);
    kvt_commands_drain_fd(&agent->commands); /* commands stay queued (commands.pending) for after the stall */
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
    uint32_t deadline_ms = agent->shutdown_deadline_ms;
    pthread_mutex_unlock(&agent->lock);
    kvt_peers_free_all(agent);
    kvt_reap_dead_conns(agent);
    char forced[512] = "";
    while (agent->backend->closing && agent->backend->closing(agent, deadline_ns, forced, sizeof forced)) {
        if (atomic_load_explicit(&agent->entry.abandoned, memory_order_acquire)) return;
        if (!agent->backend->progress(agent)) agent->backend->sleep(agent, ms_until(deadline_ns));
        kvt_commands_drain_fd(&agent->commands);
    }
    char freed_held[256];
    kvt_vram_frees_finish(agent, deadline_ns, freed_held, sizeof freed_held);
    agent->backend->stop(agent);
    kvt_vram_agent_stop(agent);
    pthread_mutex_lock(&agent->lock);
    agent->shutdown_status = forced[0] || freed_held[0] ? KVT_ERR_TIMEOUT : KVT_OK;
    /* Both may have happened: the detail names each. */
    int written = 0;
    if (forced[0])
        written = snprintf(agent->shutdown_detail, sizeof agent->shutdown_detail,
                           "agent '%s': the shutdown's deadline of %u ms passed before the peer(s) %.512s acknowledged "
                           "the close; their endpoints were force-closed",
                           agent->name, deadline_ms, forced);
    if (freed_held[0] && (size_t)written < sizeof agent->shutdown_detail)
        snprintf(agent->shutdown_detail + written, sizeof agent->shutdown_detail - (size_t)written,
                 "%sagent '%s': the shutdown's deadline of %u ms passed while readers in other processes still had "
                 "its vram %.200s open; it was freed under them",
                 written ? "; " : "", agent->name, deadline_ms, freed_held);
    agent->shutdown_done = true;
    pthread_cond_broadcast(&agent->delivery.pending_cond);
    pthread_mutex_unlock(&agent->lock);
    kvt_wake_consumer(
        &agent->delivery); /* a byte of its own: the consumer is woken even when completions were left unpolled */
}

/* Starts the backend (for UCX, context and worker: tens of milliseconds), then makes the agent visible to
 * every call, records the outcome and wakes the consumer through the wake-up pipe. */
static bool start_backend(kvt_agent *agent) {
    char detail[sizeof agent->start_detail];
    detail[0] = '\0';
    kvt_status status = agent->backend->start(agent, detail, sizeof detail);
    if (status == KVT_OK) kvt_blocks_reserve(agent); /* the first post's memory, before anyone can post */
    if (status == KVT_OK) kvt_counter_add(NULL, KVT_COUNTER_LIVE_AGENTS, 1);
    kvt_entry_set_ready(&agent->entry, status == KVT_OK);
    pthread_mutex_lock(&agent->lock);
    agent->start_status = status;
    snprintf(agent->start_detail, sizeof agent->start_detail, "%s", detail);
    agent->start_done = true;
    pthread_cond_broadcast(&agent->delivery.pending_cond);
    bool announce = agent->announce_start;
    pthread_mutex_unlock(&agent->lock);
    /* A byte of its own: the completion edge (wake_signaled) stays armed for what comes next. */
    if (announce) kvt_wake_consumer(&agent->delivery);
    return status == KVT_OK;
}

/*
 * The thread is a batch thread (SCHED_BATCH, same share of the CPU): its wake-ups do not preempt the thread
 * that woke it. Node's thread posts and wakes it from inside a native call; sharing a core (a virtual
 * machine's scheduler packs threads onto few cores), a normal thread would take that core at once and keep
 * it for a slice of copies (up to 15 ms measured), the call waiting out those milliseconds. A thread under
 * a policy of the application's own (real-time, idle) keeps it.
 */
static void yield_to_wakers(void) {
    int policy;
    struct sched_param param;
    if (pthread_getschedparam(pthread_self(), &policy, &param) != 0 || policy != SCHED_OTHER) return;
    param.sched_priority = 0;
    (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &param); /* refused: the default policy stays */
}

static void *progress_main(void *arg) {
    kvt_agent *agent = arg;
    /* Named, so that `top -H`, `perf` and /proc tell it from the application's own threads (UCX names its
     * own "async"); the name is the same for every agent, as the kernel keeps only 15 bytes. */
    (void)pthread_setname_np(pthread_self(), KVT_PROGRESS_THREAD_NAME);
    yield_to_wakers();
    kvt_stretch_begin();
    if (!start_backend(agent)) return NULL;

    /* The hot path (operations in flight) takes no lock, and makes no system call in a round that did work. A
     * round that did none gives up the core: an operation that waits on its peer (a host-staged chunk, carried
     * through a shared-memory FIFO that only the peer's progress thread drains) needs that thread on a core, and
     * on a machine with more runnable threads than cores a thread that spins through its time slice keeps it
     * off for a whole slice per hand-off. */
    bool was_active = false;
    uint64_t linger_until_ns = 0;
    for (;;) {
        if (atomic_load_explicit(&agent->entry.abandoned, memory_order_acquire)) return NULL;
        if (stalled(agent)) continue;
        bool worked = false;
        if (!run_commands(agent, &worked)) break;
        /* Operations in this round (posted now or before): once none is left, the thread lingers, also when
         * they all ended within this one round, as an operation of a batch of small pieces does. */
        was_active |= agent->active != NULL;
        worked |= agent->backend->progress(agent);
        worked |= kvt_ops_run(agent, NULL);
        kvt_reap_dead_conns(agent);
        kvt_vram_sweep_withdrawn(agent); /* readers' mappings of withdrawn vram, which owners' frees wait for */
        kvt_vram_frees_retry(agent);
        kvt_heartbeat_tick(agent); /* after the operations: one that ended in this round is not probed */
        kvt_stretch_check();       /* rounds of warming a peer's pages run back to back too */
        if (agent->active) {       /* operations in flight: keep the backend busy */
            if (!worked) kvt_stretch_yield();
            continue;
        }
        if (was_active) linger_until_ns = kvt_now_ns() + LINGER_NS;
        was_active = false;
        worked |= kvt_blocks_prepare(agent); /* idle: the next post's memory */
        if (worked || atomic_load_explicit(&agent->commands.pending, memory_order_acquire)) continue;
        if (linger_until_ns != 0 && kvt_now_ns() < linger_until_ns) {
            kvt_stretch_yield(); /* a thread that waits for a core (Node's, to post the next one) goes first */
            continue;
        }
        linger_until_ns = 0;
        if (kvt_commands_sleep_begin(&agent->commands))
            agent->backend->sleep(
                agent, earliest_timeout_ms(kvt_ops_next_timeout_ms(agent), kvt_heartbeat_next_timeout_ms(agent)));
        kvt_commands_sleep_end(&agent->commands);
        kvt_stretch_begin();
    }
    atomic_store(&agent->commands.sleeping, true); /* from here on every command kicks */
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
                            "kvt_agent_create: name byte %zu is 0x%02x; names are printable ASCII without spaces", i,
                            c);
    }
    return KVT_OK;
}

static void agent_free(kvt_agent *agent) {
    kvt_delivery_destroy(&agent->delivery);
    kvt_commands_destroy(&agent->commands);
    free(agent->allocations);
    kvt_mem_jobs_free(agent);
    free(agent->regions);
    kvt_liveness_table_free(agent);
    free(agent->peers);
    kvt_map_free(&agent->ops);
    kvt_templates_free_all(agent);
    kvt_blocks_free_all(agent);
    kvt_checksums_agent_free(agent);
    pthread_mutex_destroy(&agent->checksum_lock);
    pthread_mutex_destroy(&agent->config_lock);
    pthread_mutex_destroy(&agent->lock);
    pthread_rwlock_destroy(&agent->region_lock);
    free(agent);
}

static kvt_status agent_init(kvt_agent *agent, const char *name, uint32_t backend) {
    strcpy(agent->name, name);
    agent->backend_kind = backend;
    agent->entry = (kvt_registration){.name = agent->name,
                                      .incarnation = kvt_random64(),
                                      .lock = &agent->lock,
                                      .counters = &agent->counters,
                                      .commands = &agent->commands,
                                      .delivery = &agent->delivery,
                                      .faults = &agent->faults};
    kvt_process_identity_self(&agent->process);
    agent->metadata_generation = 1;
    agent->next_region_id = agent->next_peer_id = 1;
    agent->next_op_id = 1;
    agent->next_template_id = 1;
    agent->next_mem_job_id = 1;
    agent->heartbeat_interval_ms = KVT_HEARTBEAT_DEFAULT_INTERVAL_MS;
    agent->heartbeat_misses = KVT_HEARTBEAT_DEFAULT_MISSES;
    kvt_faults_init(&agent->faults);
    atomic_init(&agent->poster_cpu, -1);
    atomic_init(&agent->staged_fd_forgery, -1);
    pthread_mutex_init(&agent->config_lock, NULL);
    pthread_mutex_init(&agent->lock, NULL);
    pthread_mutex_init(&agent->checksum_lock, NULL);
    pthread_rwlock_init(&agent->region_lock, NULL);
    kvt_blocks_init(agent);
    bool commands_ready = kvt_commands_init(&agent->commands, &agent->lock);
    int commands_error = errno;
    kvt_status status = kvt_delivery_init(&agent->delivery, &agent->lock, &agent->counters, kvt_notify_peer);
    if (status == KVT_OK && !commands_ready)
        status = kvt_fail(KVT_ERR_BACKEND, "kvt_agent_create: eventfd failed: %s", strerror(commands_error));
    return status;
}

/* Waits until the agent's backend started or failed to (agent->lock not held). */
static void wait_for_start(kvt_agent *agent) {
    pthread_mutex_lock(&agent->lock);
    while (!agent->start_done) pthread_cond_wait(&agent->delivery.pending_cond, &agent->lock);
    pthread_mutex_unlock(&agent->lock);
}

/* Removes the agent from the table (it was never started, or its start failed). */
static void forget_agent(kvt_agent *agent) { kvt_entry_remove(&agent->entry); }

/* UCX options an agent is confined by (NULL: none). */
typedef struct {
    const char *net_devices;
    const char *transports;
} ucx_options;

/* Refuses a UCX option value that is too long or holds a byte that is not printable ASCII (or a space). */
static kvt_status validate_ucx_option(const char *what, const char *value) {
    if (!value) return KVT_OK;
    size_t length = strnlen(value, KVT_MAX_UCX_OPTION + 1);
    if (length > KVT_MAX_UCX_OPTION)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_agent_create_ucx_begin: %s is longer than %u bytes", what,
                        KVT_MAX_UCX_OPTION);
    for (size_t i = 0; i < length; i++) {
        unsigned char c = (unsigned char)value[i];
        if (c <= 0x20 || c >= 0x7F)
            return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_agent_create_ucx_begin: %s byte %zu is 0x%02x", what, i, c);
    }
    return KVT_OK;
}

/* Creates the agent and its progress thread, which starts the backend; *out holds it, not yet started. */
static kvt_status create_agent(const char *name, uint32_t backend, uint32_t flags, const ucx_options *ucx,
                               const uint32_t *out_agent, bool announce_start, kvt_agent **out) {
    kvt_status status = validate_name(name);
    if (status != KVT_OK) return kvt_count_result(NULL, status);
    if (!out_agent)
        return kvt_count_result(NULL, kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_agent_create: out_agent is NULL"));
    if (flags & ~(uint32_t)KVT_AGENT_VRAM_STAGED)
        return kvt_count_result(NULL,
                                kvt_fail(KVT_ERR_INVALID_PARAM,
                                         "kvt_agent_create: flags 0x%x are unknown (KVT_AGENT_VRAM_STAGED = 0x%x)",
                                         flags, (unsigned)KVT_AGENT_VRAM_STAGED));
    const kvt_backend *impl = NULL;
    status = kvt_backend_select(backend, &impl);
    if (status != KVT_OK) return kvt_count_result(NULL, status);

    kvt_agent *agent = calloc(1, sizeof *agent);
    if (!agent) return kvt_count_result(NULL, kvt_fail(KVT_ERR_NO_MEMORY, "kvt_agent_create: out of memory"));
    agent->backend = impl;
    status = agent_init(agent, name, backend);
    agent->vram_staged = (flags & KVT_AGENT_VRAM_STAGED) != 0;
    if (ucx->net_devices) strcpy(agent->ucx_net_devices, ucx->net_devices);
    if (ucx->transports) strcpy(agent->ucx_transports, ucx->transports);

    /* Reserve the name, so two creations with one name cannot both succeed. */
    if (status == KVT_OK) {
        status = kvt_entry_add(&agent->entry);
        if (status != KVT_OK) {
            agent_free(agent);
            return kvt_count_result(NULL, status);
        }
        agent->announce_start = announce_start;
        int rc = pthread_create(&agent->entry.thread, NULL, progress_main, agent);
        if (rc != 0) status = kvt_fail(KVT_ERR_BACKEND, "kvt_agent_create: pthread_create failed: %s", strerror(rc));
        kvt_entry_set_thread_started(&agent->entry, rc == 0);
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
    kvt_status status = create_agent(name, backend, flags, &(ucx_options){0}, out_agent, true, &agent);
    if (status == KVT_OK) *out_agent = agent->entry.id;
    return status == KVT_OK ? KVT_IN_PROGRESS : status;
}

kvt_status kvt_agent_create_ucx_begin(const char *name, const char *net_devices, const char *transports,
                                      uint32_t *out_agent) {
    kvt_detail_clear();
    kvt_status status = validate_ucx_option("net_devices", net_devices);
    if (status == KVT_OK) status = validate_ucx_option("transports", transports);
    if (status != KVT_OK) return kvt_count_result(NULL, status);
    kvt_agent *agent;
    ucx_options ucx = {.net_devices = net_devices, .transports = transports};
    status = create_agent(name, KVT_BACKEND_UCX, 0, &ucx, out_agent, true, &agent);
    if (status == KVT_OK) *out_agent = agent->entry.id;
    return status == KVT_OK ? KVT_IN_PROGRESS : status;
}

kvt_status kvt_agent_create(const char *name, uint32_t backend, uint32_t flags, uint32_t *out_agent) {
    kvt_detail_clear();
    kvt_agent *agent;
    kvt_status status = create_agent(name, backend, flags, &(ucx_options){0}, out_agent, false, &agent);
    if (status != KVT_OK) return status;
    wait_for_start(agent); /* the backend starts on the progress thread: wait for its outcome */
    if (agent->start_status != KVT_OK) {
        status = kvt_fail(agent->start_status, "kvt_agent_create: %s", agent->start_detail);
        pthread_join(agent->entry.thread, NULL);
        forget_agent(agent);
        agent_free(agent);
        return kvt_count_result(NULL, status);
    }
    *out_agent = agent->entry.id;
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
    kvt_status status = kvt_enter_any_state(agent_id, "kvt_agent_start_status", &agent);
    if (status != KVT_OK) return status;
    return phase_outcome(agent, &agent->start_done, &agent->start_status, agent->start_detail);
}

/*
 * Decides a shutdown of an acquired agent: refused (BUSY) while registrations, allocations or operations
 * remain; else the agent is hidden from every call but its shutdown status and destroy, and the progress
 * thread is told to close its connections by `deadline_ms` from now. KVT_IN_PROGRESS when accepted (also
 * when a shutdown was accepted before: the first deadline stays).
 */
static kvt_status begin_shutdown(kvt_agent *agent, const char *call, uint32_t deadline_ms) {
    /* Close the door to new calls and let running ones finish, so the check below stays true. */
    kvt_status status = kvt_entry_close_door(&agent->entry, call);
    if (status != KVT_OK) return status;
    pthread_mutex_lock(&agent->lock);
    pthread_cond_broadcast(&agent->delivery.pending_cond); /* kvt_agent_wait returns early */
    pthread_mutex_unlock(&agent->lock);
    kvt_entry_wait_alone(&agent->entry);

    status = KVT_IN_PROGRESS;
    pthread_mutex_lock(&agent->lock);
    if (agent->region_count || agent->allocation_count || agent->ops.size)
        status = kvt_fail(KVT_ERR_BUSY,
                          "%s: agent '%s' still has %u registration(s), %u allocation(s) and %zu operation(s) not "
                          "released",
                          call, agent->name, agent->region_count, agent->allocation_count, agent->ops.size);
    pthread_mutex_unlock(&agent->lock);
    kvt_entry_decide_shutdown(&agent->entry, status == KVT_IN_PROGRESS);
    if (status != KVT_IN_PROGRESS) return status;

    atomic_store(&agent->faults.progress_stalled, false); /* a shutdown ends kvt_fault_stall_progress */
    pthread_mutex_lock(&agent->lock);
    agent->shutdown_deadline_ns = kvt_now_ns() + (uint64_t)deadline_ms * 1000000u;
    agent->shutdown_deadline_ms = deadline_ms;
    agent->stop_command = (kvt_command){.kind = KVT_CMD_STOP};
    kvt_command_submit_locked(&agent->commands, &agent->stop_command);
    pthread_mutex_unlock(&agent->lock);
    return KVT_IN_PROGRESS;
}

kvt_status kvt_agent_shutdown(uint32_t agent_id, uint32_t deadline_ms) {
    kvt_agent *agent;
    kvt_status status = kvt_enter_any_state(agent_id, "kvt_agent_shutdown", &agent);
    if (status != KVT_OK) return status;
    if (deadline_ms > KVT_MAX_SHUTDOWN_MS)
        return kvt_agent_finish(agent, kvt_fail(KVT_ERR_INVALID_PARAM,
                                                "kvt_agent_shutdown: deadline_ms %u of agent '%s' exceeds %u",
                                                deadline_ms, agent->name, KVT_MAX_SHUTDOWN_MS));
    wait_for_start(agent);
    if (agent->start_status != KVT_OK)
        return kvt_agent_finish(agent, kvt_fail(KVT_ERR_NOT_ALLOWED,
                                                "kvt_agent_shutdown: agent '%s' did not start (%s); destroy it",
                                                agent->name, kvt_status_name(agent->start_status)));
    return kvt_agent_finish(agent, begin_shutdown(agent, "kvt_agent_shutdown", deadline_ms));
}

kvt_status kvt_agent_shutdown_status(uint32_t agent_id) {
    kvt_agent *agent;
    kvt_status status = kvt_enter_any_state(agent_id, "kvt_agent_shutdown_status", &agent);
    if (status != KVT_OK) return status;
    if (!kvt_entry_shutting_down(&agent->entry))
        return kvt_agent_finish(
            agent,
            kvt_fail(KVT_ERR_NOT_ALLOWED, "kvt_agent_shutdown_status: agent '%s' is not shutting down", agent->name));
    return phase_outcome(agent, &agent->shutdown_done, &agent->shutdown_status, agent->shutdown_detail);
}

kvt_status kvt_agent_destroy(uint32_t agent_id) {
    kvt_agent *agent;
    kvt_status status = kvt_enter_any_state(agent_id, "kvt_agent_destroy", &agent);
    if (status != KVT_OK) return status;
    wait_for_start(agent);
    bool started = agent->start_status == KVT_OK;
    if (started) status = begin_shutdown(agent, "kvt_agent_destroy", KVT_DEFAULT_SHUTDOWN_MS);
    if (started && status != KVT_IN_PROGRESS) return kvt_agent_finish(agent, status);
    bool raced = !kvt_entry_begin_destroy(&agent->entry);
    if (raced)
        return kvt_agent_finish(agent, kvt_fail(KVT_ERR_NOT_FOUND,
                                                "kvt_agent_destroy: agent %u is being destroyed by "
                                                "another thread",
                                                agent_id));
    pthread_mutex_lock(&agent->lock);
    while (started && !agent->shutdown_done) pthread_cond_wait(&agent->delivery.pending_cond, &agent->lock);
    pthread_mutex_unlock(&agent->lock);
    pthread_join(agent->entry.thread, NULL);
    if (started) kvt_counter_add(NULL, KVT_COUNTER_LIVE_AGENTS, -1);
    agent_free(agent);
    return KVT_OK;
}

static kvt_status hold_serving_call(kvt_agent *agent, void *arg, char *detail, size_t detail_size) {
    (void)detail;
    (void)detail_size;
    atomic_store(&agent->serving_held, *(const bool *)arg);
    return KVT_OK;
}

/* Set on the progress thread, between its rounds: once this returns, no round still runs that read the
 * old value, so a request posted afterwards is never answered by a round already under way. */
kvt_status kvt_test_forge_staged_requests(uint32_t agent_id, uint64_t shift) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_test_forge_staged_requests", &agent);
    if (status != KVT_OK) return status;
    atomic_store(&agent->staged_forgery, shift);
    return kvt_agent_finish(agent, KVT_OK);
}

kvt_status kvt_test_forge_staged_buffers(uint32_t agent_id, int32_t fd, uint64_t token) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_test_forge_staged_buffers", &agent);
    if (status != KVT_OK) return status;
    atomic_store(&agent->staged_fd_forgery, fd);
    atomic_store(&agent->staged_token_forgery, token);
    return kvt_agent_finish(agent, KVT_OK);
}

kvt_status kvt_test_hold_serving(uint32_t agent_id, bool hold) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_test_hold_serving", &agent);
    if (status != KVT_OK) return status;
    status = kvt_command_call(&agent->commands, hold_serving_call, &hold);
    return kvt_agent_finish(agent, status);
}
