/* Entry and exit of API calls: the process-wide table of agents, their lookup and pinning, and the
 * stop of every progress thread when the library is unloaded. */
#include "services/entry.h"

#include "services/status.h"

#include <stdlib.h>
#include <string.h>

static pthread_mutex_t entries_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t entries_cond = PTHREAD_COND_INITIALIZER; /* an agent's api_refs dropped */
static kvt_registration **entries;
static uint32_t entry_count, entry_capacity;
static uint32_t next_agent_id = 1;

/* The agent begins with its entry (agent.h). */
static kvt_agent *agent_of(kvt_registration *entry) { return (kvt_agent *)(void *)entry; }
kvt_registration *kvt_entry_of(kvt_agent *agent) { return (kvt_registration *)(void *)agent; }

kvt_status kvt_entry_add(kvt_registration *entry) {
    kvt_status status = KVT_OK;
    pthread_mutex_lock(&entries_lock);
    for (uint32_t i = 0; i < entry_count && status == KVT_OK; i++)
        if (strcmp(entries[i]->name, entry->name) == 0)
            status = kvt_fail(KVT_ERR_NOT_ALLOWED, "kvt_agent_create: an agent named '%s' already exists (id %u)",
                              entry->name, entries[i]->id);
    if (status == KVT_OK && entry_count == entry_capacity) {
        uint32_t capacity = entry_capacity ? entry_capacity * 2 : 8;
        kvt_registration **grown = realloc(entries, capacity * sizeof *grown);
        if (!grown)
            status = kvt_fail(KVT_ERR_NO_MEMORY, "kvt_agent_create: out of memory");
        else {
            entries = grown;
            entry_capacity = capacity;
        }
    }
    if (status == KVT_OK) {
        entry->id = next_agent_id++;
        entries[entry_count++] = entry;
    }
    pthread_mutex_unlock(&entries_lock);
    return status;
}

static void remove_locked(kvt_registration *entry) {
    for (uint32_t i = 0; i < entry_count; i++)
        if (entries[i] == entry) entries[i] = entries[--entry_count];
}

void kvt_entry_remove(kvt_registration *entry) {
    pthread_mutex_lock(&entries_lock);
    remove_locked(entry);
    pthread_mutex_unlock(&entries_lock);
}

void kvt_entry_set_thread_started(kvt_registration *entry, bool started) {
    pthread_mutex_lock(&entries_lock);
    entry->thread_started = started;
    pthread_mutex_unlock(&entries_lock);
}

void kvt_entry_set_ready(kvt_registration *entry, bool ready) {
    pthread_mutex_lock(&entries_lock);
    entry->ready = ready;
    pthread_cond_broadcast(&entries_cond);
    pthread_mutex_unlock(&entries_lock);
}

bool kvt_entry_shutting_down(kvt_registration *entry) {
    pthread_mutex_lock(&entries_lock);
    bool shutting_down = entry->shutting_down;
    pthread_mutex_unlock(&entries_lock);
    return shutting_down;
}

/* A live agent, or (with `any_state`) also one still starting, whose start failed, or whose shutdown was
 * accepted: any agent not yet destroyed. */
static kvt_registration *find_locked(uint32_t id, bool any_state) {
    for (uint32_t i = 0; i < entry_count; i++) {
        kvt_registration *entry = entries[i];
        if (entry->id == id && !entry->destroying && (entry->ready || any_state)) return entry;
    }
    return NULL;
}

/* While a shutdown is deciding (it may still refuse with BUSY), new calls wait for its outcome. */
static kvt_status acquire(uint32_t id, const char *call, bool any_state, kvt_registration **out) {
    pthread_mutex_lock(&entries_lock);
    kvt_registration *entry = find_locked(id, any_state);
    while (entry && entry->closing) {
        pthread_cond_wait(&entries_cond, &entries_lock);
        entry = find_locked(id, any_state);
    }
    if (entry) entry->api_refs++;
    pthread_mutex_unlock(&entries_lock);
    if (!entry) return kvt_fail(KVT_ERR_NOT_FOUND, "%s: no live agent with id %u", call, id);
    *out = entry;
    return KVT_OK;
}

kvt_status kvt_agent_acquire(uint32_t id, const char *call, kvt_agent **out) {
    kvt_registration *entry = NULL;
    kvt_status status = acquire(id, call, false, &entry);
    if (status == KVT_OK) *out = agent_of(entry);
    return status;
}

kvt_status kvt_enter_entry(uint32_t id, const char *call, kvt_registration **out) {
    kvt_detail_clear();
    return kvt_count_result(NULL, acquire(id, call, false, out));
}

kvt_status kvt_enter(uint32_t id, const char *call, kvt_agent **out) {
    kvt_registration *entry = NULL;
    kvt_status status = kvt_enter_entry(id, call, &entry);
    if (status == KVT_OK) *out = agent_of(entry);
    return status;
}

kvt_status kvt_enter_any_state(uint32_t id, const char *call, kvt_agent **out) {
    kvt_detail_clear();
    kvt_registration *entry = NULL;
    kvt_status status = kvt_count_result(NULL, acquire(id, call, true, &entry));
    if (status == KVT_OK) *out = agent_of(entry);
    return status;
}

kvt_status kvt_poll_enter(uint32_t id, const char *call, bool arguments_present, const char *requirement,
                          kvt_agent **out) {
    if (!arguments_present) return kvt_count_result(NULL, kvt_fail(KVT_ERR_INVALID_PARAM, "%s: %s", call, requirement));
    return kvt_enter(id, call, out);
}

void kvt_entry_release(kvt_registration *entry) {
    pthread_mutex_lock(&entries_lock);
    entry->api_refs--;
    pthread_cond_broadcast(&entries_cond);
    pthread_mutex_unlock(&entries_lock);
}

void kvt_agent_release(kvt_agent *agent) { kvt_entry_release(kvt_entry_of(agent)); }

kvt_status kvt_entry_finish(kvt_registration *entry, kvt_status status) {
    kvt_count_result(entry->counters, status);
    kvt_entry_release(entry);
    return status;
}

kvt_status kvt_agent_finish(kvt_agent *agent, kvt_status status) {
    return kvt_entry_finish(kvt_entry_of(agent), status);
}

kvt_agent *kvt_agent_find_live(const char *name, uint64_t incarnation) {
    kvt_registration *found = NULL;
    pthread_mutex_lock(&entries_lock);
    for (uint32_t i = 0; i < entry_count; i++) {
        kvt_registration *entry = entries[i];
        if (entry->ready && entry->incarnation == incarnation && strcmp(entry->name, name) == 0) {
            entry->api_refs++;
            found = entry;
            break;
        }
    }
    pthread_mutex_unlock(&entries_lock);
    return found ? agent_of(found) : NULL;
}

/* Waits until no other thread is inside an API call on the agent (entries_lock held). */
static void wait_for_other_calls_locked(kvt_registration *entry) {
    while (entry->api_refs > 1) pthread_cond_wait(&entries_cond, &entries_lock);
}

kvt_status kvt_entry_close_door(kvt_registration *entry, const char *call) {
    pthread_mutex_lock(&entries_lock);
    bool begun = entry->shutting_down, deciding = entry->closing;
    if (!begun && !deciding) entry->closing = true;
    pthread_mutex_unlock(&entries_lock);
    if (begun) return KVT_IN_PROGRESS;
    if (deciding)
        return kvt_fail(KVT_ERR_NOT_ALLOWED, "%s: another thread is deciding a shutdown of agent '%s'", call,
                        entry->name);
    return KVT_OK;
}

void kvt_entry_wait_alone(kvt_registration *entry) {
    pthread_mutex_lock(&entries_lock);
    wait_for_other_calls_locked(entry);
    pthread_mutex_unlock(&entries_lock);
}

void kvt_entry_decide_shutdown(kvt_registration *entry, bool accepted) {
    pthread_mutex_lock(&entries_lock);
    pthread_cond_broadcast(&entries_cond); /* calls waiting for the outcome */
    entry->closing = false;
    if (accepted) {
        entry->ready = false; /* loopback peers see it gone */
        entry->shutting_down = true;
        wait_for_other_calls_locked(entry); /* loopback copies that found it just before */
    }
    pthread_mutex_unlock(&entries_lock);
}

bool kvt_entry_begin_destroy(kvt_registration *entry) {
    pthread_mutex_lock(&entries_lock);
    bool raced = entry->destroying;
    entry->destroying = true;
    if (!raced) {
        wait_for_other_calls_locked(entry);
        remove_locked(entry);
    }
    pthread_mutex_unlock(&entries_lock);
    return !raced;
}

/* Agents may still be open when the library goes away: Node's koffi unloads it when Node tears its
 * environment down, and a process may exit without closing them. Their progress threads must not run
 * this library's code once it is unmapped, nor UCX's once UCX's own destructors ran (they run after
 * this one): stop each thread where it is and wait for it. Nothing is freed; the process is going. An
 * agent whose destroy is under way is left to that destroy, which joins its thread. */
__attribute__((destructor)) static void abandon_agents_at_unload(void) {
    pthread_mutex_lock(&entries_lock);
    uint32_t count = 0;
    pthread_t *threads = entry_count ? calloc(entry_count, sizeof *threads) : NULL;
    for (uint32_t i = 0; threads && i < entry_count; i++) {
        kvt_registration *entry = entries[i];
        if (!entry->thread_started || entry->closing || entry->destroying) continue;
        atomic_store_explicit(&entry->abandoned, true, memory_order_release);
        kvt_command_kick(entry->commands);
        threads[count++] = entry->thread;
    }
    pthread_mutex_unlock(&entries_lock);
    for (uint32_t i = 0; i < count; i++) pthread_join(threads[i], NULL);
    free(threads);
}
