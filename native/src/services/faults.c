/* Fault injection: one-shot failures at the points of kvt_fault_fail, delayed completions, paused issuing
 * and a stalled progress thread, which the modules above consult. */
#include "services/faults.h"

#include "services/entry.h"
#include "services/status.h"

#include <string.h>
#include <time.h>

void kvt_faults_init(kvt_faults *faults) { atomic_init(&faults->issue_limit, KVT_ISSUE_UNLIMITED); }

/* Whether some point is still armed (the agent's lock held). */
static bool any_armed_locked(const kvt_faults *faults) {
    for (uint32_t point = 0; point <= KVT_FAULT_ALLOCATION; point++)
        if (faults->points[point].remaining > 0) return true;
    return false;
}

kvt_status kvt_fault_take_locked(kvt_faults *faults, uint32_t point) {
    kvt_fault *fault = &faults->points[point];
    if (fault->remaining == 0) return KVT_OK;
    if (--fault->remaining > 0) return KVT_OK;
    atomic_store_explicit(&faults->armed, any_armed_locked(faults), memory_order_relaxed);
    return fault->code;
}

kvt_status kvt_fault_take(kvt_faults *faults, pthread_mutex_t *lock, uint32_t point) {
    if (!atomic_load_explicit(&faults->armed, memory_order_acquire)) return KVT_OK;
    pthread_mutex_lock(lock);
    kvt_status status = kvt_fault_take_locked(faults, point);
    pthread_mutex_unlock(lock);
    return status;
}

kvt_status kvt_fault_fail(uint32_t agent_id, uint32_t point, uint32_t nth, kvt_status code) {
    kvt_registration *entry;
    kvt_status status = kvt_enter_entry(agent_id, "kvt_fault_fail", &entry);
    if (status != KVT_OK) return status;
    if (point > KVT_FAULT_ALLOCATION)
        status = kvt_fail(KVT_ERR_INVALID_PARAM,
                          "kvt_fault_fail: unknown point %u (register 0, post 1, completion 2, allocation 3)", point);
    else if (nth == 0)
        status = kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_fault_fail: nth must be >= 1 (1 = the next call)");
    else if (!kvt_is_error_code(code))
        status = kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_fault_fail: code %d is not a KVT_ERR_* code", code);
    if (status == KVT_OK) {
        pthread_mutex_lock(entry->lock);
        entry->faults->points[point] = (kvt_fault){.remaining = nth, .code = code};
        atomic_store_explicit(&entry->faults->armed, true, memory_order_release);
        pthread_mutex_unlock(entry->lock);
    }
    return kvt_entry_finish(entry, status);
}

kvt_status kvt_fault_delay_completions(uint32_t agent_id, uint32_t ms) {
    kvt_registration *entry;
    kvt_status status = kvt_enter_entry(agent_id, "kvt_fault_delay_completions", &entry);
    if (status != KVT_OK) return status;
    pthread_mutex_lock(entry->lock);
    atomic_store(&entry->faults->delay_ms, ms);
    kvt_command_kick(entry->commands);
    pthread_mutex_unlock(entry->lock);
    kvt_entry_release(entry);
    return KVT_OK;
}

kvt_status kvt_fault_pause_issue(uint32_t agent_id, uint64_t bytes) {
    kvt_registration *entry;
    kvt_status status = kvt_enter_entry(agent_id, "kvt_fault_pause_issue", &entry);
    if (status != KVT_OK) return status;
    pthread_mutex_lock(entry->lock);
    atomic_store(&entry->faults->issue_limit, bytes);
    kvt_command_kick(entry->commands);
    pthread_mutex_unlock(entry->lock);
    kvt_entry_release(entry);
    return KVT_OK;
}

kvt_status kvt_fault_stall_progress(uint32_t agent_id, uint32_t stall) {
    kvt_registration *entry;
    kvt_status status = kvt_enter_entry(agent_id, "kvt_fault_stall_progress", &entry);
    if (status != KVT_OK) return status;
    if (stall > 1)
        return kvt_entry_finish(
            entry, kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_fault_stall_progress: stalled must be 0 or 1 (got %u)", stall));
    atomic_store(&entry->faults->stall_entered, false);
    atomic_store(&entry->faults->progress_stalled, stall == 1);
    kvt_command_kick(entry->commands);
    /* A stall is in force once the thread saw it: a command queued from here on waits for its end. */
    while (stall == 1 && !atomic_load(&entry->faults->stall_entered) && !atomic_load(&entry->closing))
        nanosleep(&(struct timespec){.tv_nsec = 100000}, NULL);
    return kvt_entry_finish(entry, KVT_OK);
}

kvt_status kvt_fault_clear(uint32_t agent_id) {
    kvt_registration *entry;
    kvt_status status = kvt_enter_entry(agent_id, "kvt_fault_clear", &entry);
    if (status != KVT_OK) return status;
    pthread_mutex_lock(entry->lock);
    memset(entry->faults->points, 0, sizeof entry->faults->points);
    atomic_store_explicit(&entry->faults->armed, false, memory_order_relaxed);
    atomic_store(&entry->faults->delay_ms, 0);
    atomic_store(&entry->faults->issue_limit, KVT_ISSUE_UNLIMITED);
    atomic_store(&entry->faults->progress_stalled, false);
    atomic_store(&entry->faults->heartbeat_held, false);
    kvt_command_kick(entry->commands);
    pthread_mutex_unlock(entry->lock);
    kvt_entry_release(entry);
    return KVT_OK;
}
