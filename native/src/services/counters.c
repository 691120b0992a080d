/* Counters: one set per agent and one for the process. */
#include "services/counters.h"

#include "services/status.h"

static kvt_counter_set process_counters;

void kvt_counter_add(kvt_counter_set *set, uint32_t index, int64_t delta) {
    atomic_fetch_add_explicit(&process_counters.values[index], (uint64_t)delta, memory_order_relaxed);
    if (set) atomic_fetch_add_explicit(&set->values[index], (uint64_t)delta, memory_order_relaxed);
}

kvt_status kvt_count_result(kvt_counter_set *set, kvt_status status) {
    if (kvt_is_error_code(status)) kvt_counter_add(set, KVT_COUNTER_ERRORS_FIRST + (uint32_t)(-status - 1), 1);
    return status;
}

uint32_t kvt_counters_copy(const kvt_counter_set *set, uint64_t *values, uint32_t capacity) {
    const kvt_counter_set *source = set ? set : &process_counters;
    uint32_t n = capacity < KVT_COUNTER_COUNT ? capacity : KVT_COUNTER_COUNT;
    for (uint32_t i = 0; i < n; i++) values[i] = atomic_load_explicit(&source->values[i], memory_order_relaxed);
    return n;
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
    "inline_operations",
    "deferred_vram_frees",
    "withdrawals_awaiting_writes",
};

const char *kvt_counter_name(uint32_t index) { return index < KVT_COUNTER_COUNT ? counter_names[index] : NULL; }
