/* Temporary: calls not yet implemented answer KVT_ERR_NOT_SUPPORTED. */
#include "internal.h"

kvt_status kvt_agent_create(const char *name, uint32_t backend, uint32_t flags, uint32_t *out_agent) {
    (void)name;
    (void)backend;
    (void)flags;
    (void)out_agent;
    return kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_agent_create: not implemented yet");
}
kvt_status kvt_agent_destroy(uint32_t agent) {
    (void)agent;
    return kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_agent_destroy: not implemented yet");
}
kvt_status kvt_agent_wake_fd(uint32_t agent, int32_t *out_fd) {
    (void)agent;
    (void)out_fd;
    return kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_agent_wake_fd: not implemented yet");
}
kvt_status kvt_agent_poll(uint32_t agent, uint32_t capacity, uint64_t *op_ids, int32_t *statuses, uint64_t *bytes_done, uint32_t *out_count) {
    (void)agent;
    (void)capacity;
    (void)op_ids;
    (void)statuses;
    (void)bytes_done;
    (void)out_count;
    return kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_agent_poll: not implemented yet");
}
kvt_status kvt_agent_wait(uint32_t agent, uint32_t timeout_ms) {
    (void)agent;
    (void)timeout_ms;
    return kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_agent_wait: not implemented yet");
}
kvt_status kvt_mem_alloc(uint32_t agent, uint64_t length, uint32_t flags, uint64_t *out_address) {
    (void)agent;
    (void)length;
    (void)flags;
    (void)out_address;
    return kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_mem_alloc: not implemented yet");
}
kvt_status kvt_mem_free(uint32_t agent, uint64_t address) {
    (void)agent;
    (void)address;
    return kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_mem_free: not implemented yet");
}
kvt_status kvt_mem_register(uint32_t agent, uint64_t address, uint64_t length, uint32_t kind, uint32_t device, uint32_t *out_region) {
    (void)agent;
    (void)address;
    (void)length;
    (void)kind;
    (void)device;
    (void)out_region;
    return kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_mem_register: not implemented yet");
}
kvt_status kvt_mem_deregister(uint32_t agent, uint32_t region) {
    (void)agent;
    (void)region;
    return kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_mem_deregister: not implemented yet");
}
kvt_status kvt_region_info(uint32_t agent, uint32_t region, uint64_t *out_address, uint64_t *out_length, uint32_t *out_kind, uint32_t *out_device) {
    (void)agent;
    (void)region;
    (void)out_address;
    (void)out_length;
    (void)out_kind;
    (void)out_device;
    return kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_region_info: not implemented yet");
}
kvt_status kvt_agent_metadata(uint32_t agent, uint8_t *buffer, uint64_t capacity, uint64_t *out_length) {
    (void)agent;
    (void)buffer;
    (void)capacity;
    (void)out_length;
    return kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_agent_metadata: not implemented yet");
}
kvt_status kvt_peer_load(uint32_t agent, const uint8_t *blob, uint64_t length, uint32_t *out_peer, uint64_t *out_generation) {
    (void)agent;
    (void)blob;
    (void)length;
    (void)out_peer;
    (void)out_generation;
    return kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_peer_load: not implemented yet");
}
kvt_status kvt_peer_find(uint32_t agent, const char *name, uint32_t *out_peer, uint64_t *out_generation) {
    (void)agent;
    (void)name;
    (void)out_peer;
    (void)out_generation;
    return kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_peer_find: not implemented yet");
}
kvt_status kvt_peer_info(uint32_t agent, uint32_t peer, uint64_t *out_generation, uint32_t *out_state, uint32_t *out_region_count) {
    (void)agent;
    (void)peer;
    (void)out_generation;
    (void)out_state;
    (void)out_region_count;
    return kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_peer_info: not implemented yet");
}
kvt_status kvt_peer_invalidate(uint32_t agent, uint32_t peer) {
    (void)agent;
    (void)peer;
    return kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_peer_invalidate: not implemented yet");
}
kvt_status kvt_peer_unload(uint32_t agent, uint32_t peer) {
    (void)agent;
    (void)peer;
    return kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_peer_unload: not implemented yet");
}
kvt_status kvt_xfer_post(uint32_t agent, uint32_t direction, uint32_t peer, uint64_t peer_generation, uint32_t count, const uint32_t *local_index, const uint64_t *local_offset, const uint32_t *remote_index, const uint64_t *remote_offset, const uint64_t *length, uint32_t local_region_count, const uint32_t *local_regions, uint32_t remote_region_count, const uint32_t *remote_regions, const uint8_t *notification, uint32_t notification_length, uint64_t *out_op) {
    (void)agent;
    (void)direction;
    (void)peer;
    (void)peer_generation;
    (void)count;
    (void)local_index;
    (void)local_offset;
    (void)remote_index;
    (void)remote_offset;
    (void)length;
    (void)local_region_count;
    (void)local_regions;
    (void)remote_region_count;
    (void)remote_regions;
    (void)notification;
    (void)notification_length;
    (void)out_op;
    return kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_xfer_post: not implemented yet");
}
kvt_status kvt_xfer_status(uint32_t agent, uint64_t op, int32_t *out_status, uint64_t *out_bytes_done, uint64_t *out_bytes_total) {
    (void)agent;
    (void)op;
    (void)out_status;
    (void)out_bytes_done;
    (void)out_bytes_total;
    return kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_xfer_status: not implemented yet");
}
kvt_status kvt_xfer_cancel(uint32_t agent, uint64_t op) {
    (void)agent;
    (void)op;
    return kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_xfer_cancel: not implemented yet");
}
kvt_status kvt_xfer_release(uint32_t agent, uint64_t op) {
    (void)agent;
    (void)op;
    return kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_xfer_release: not implemented yet");
}
kvt_status kvt_notify_send(uint32_t agent, uint32_t peer, uint64_t peer_generation, const uint8_t *data, uint32_t length) {
    (void)agent;
    (void)peer;
    (void)peer_generation;
    (void)data;
    (void)length;
    return kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_notify_send: not implemented yet");
}
kvt_status kvt_notify_poll(uint32_t agent, char *sender, uint32_t sender_capacity, uint8_t *data, uint32_t data_capacity, uint32_t *out_length, uint32_t *out_got) {
    (void)agent;
    (void)sender;
    (void)sender_capacity;
    (void)data;
    (void)data_capacity;
    (void)out_length;
    (void)out_got;
    return kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_notify_poll: not implemented yet");
}
kvt_status kvt_counters(uint32_t agent, uint64_t *values, uint32_t capacity, uint32_t *out_count) {
    (void)agent;
    (void)values;
    (void)capacity;
    (void)out_count;
    return kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_counters: not implemented yet");
}
kvt_status kvt_fault_fail(uint32_t agent, uint32_t point, uint32_t nth, kvt_status code) {
    (void)agent;
    (void)point;
    (void)nth;
    (void)code;
    return kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_fault_fail: not implemented yet");
}
kvt_status kvt_fault_delay_completions(uint32_t agent, uint32_t ms) {
    (void)agent;
    (void)ms;
    return kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_fault_delay_completions: not implemented yet");
}
kvt_status kvt_fault_clear(uint32_t agent) {
    (void)agent;
    return kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_fault_clear: not implemented yet");
}
const char *kvt_counter_name(uint32_t index) { (void)index; return NULL; }
