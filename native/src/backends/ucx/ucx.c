/* The UCX backend. Everything here runs on the agent's progress thread, which alone drives the two workers
 * (UCS_THREAD_MODE_SINGLE): endpoints, remote keys, gets and puts, active-message notifications and
 * progress, and registration (it serves the registered memory). Allocation may also run on the caller's
 * thread: the context is shared (mt_workers_shared), so UCX serializes it under the context's lock. */
#include "backends/ucx/ucx_staging.h"
#include "backends/ucx/ucx_tls.h"

#include "backend.h"
#include "file_regions.h"
#include "heartbeat.h"
#include "services/copy.h"
#include "services/mapping.h"
#include "services/notify_header.h"
#include "services/status.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- notifications received ------------------------------------------------------------------ */

static ucs_status_t on_notification(void *arg, const void *header, size_t header_length, void *data, size_t length,
                                    const ucp_am_recv_param_t *param) {
    kvt_agent *agent = arg;
    char sender[KVT_MAX_NAME + 1];
    bool well_formed = !(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) && length >= 1 &&
                       length <= KVT_MAX_NOTIFICATION && kvt_notify_header_parse(header, header_length, sender);
    if (!well_formed) {
        kvt_counter_add(&agent->counters, KVT_COUNTER_NOTIFICATIONS_DROPPED, 1);
        return UCS_OK;
    }
    kvt_deliver_notification(&agent->delivery, sender, data, (uint32_t)length);
    return UCS_OK;
}

/* ---- heartbeat -------------------------------------------------------------------------------------- */

/* A peer probes this agent: the answer goes back on the endpoint the probe came through. That this runs
 * at all is the answer's meaning: this agent's progress thread is alive. */
static ucs_status_t on_probe(void *arg, const void *header, size_t header_length, void *data, size_t length,
                             const ucp_am_recv_param_t *param) {
    (void)header;
    (void)header_length;
    kvt_agent *agent = arg;
    if (length != PROBE_BYTES || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ||
        !(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP))
        return UCS_OK;
    kvt_counter_add(&agent->counters, KVT_COUNTER_HEARTBEATS_ANSWERED, 1);
    ucx_send_heartbeat(agent, param->reply_ep, KVT_AM_ANSWER, data, 0);
    return UCS_OK;
}

static uint64_t read_le(const uint8_t *bytes, unsigned count) {
    uint64_t value = 0;
    for (unsigned i = 0; i < count; i++) value |= (uint64_t)bytes[i] << (8 * i);
    return value;
}

static ucs_status_t on_answer(void *arg, const void *header, size_t header_length, void *data, size_t length,
                              const ucp_am_recv_param_t *param) {
    (void)header;
    (void)header_length;
    kvt_agent *agent = arg;
    const uint8_t *message = data;
    if (length != PROBE_BYTES || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ||
        read_le(message + 4, 8) != agent->entry.incarnation)
        return UCS_OK;
    kvt_heartbeat_answered(agent, (uint32_t)read_le(message, 4));
    return UCS_OK;
}

/* ---- start / stop ----------------------------------------------------------------------------- */

static kvt_status ucx_fail(char *detail, size_t detail_size, const char *what, ucs_status_t status) {
    snprintf(detail, detail_size, "%s failed: %s", what, ucs_status_string(status));
    return KVT_ERR_BACKEND;
}

/* How long a serving worker may take to send what it began before it is destroyed. */
#define SERVING_FLUSH_NS (200u * 1000u * 1000u)

/*
 * Lets the serving worker send what it began, waiting at most SERVING_FLUSH_NS, before it is destroyed. UCX
 * 1.13 aborts (an assertion in ucp_request_send_state_ff) when a worker is destroyed while a wireup message it
 * began waits in a tcp endpoint's queue, as when a reader over tcp is still being wired up:
 * `ucx-confinement.test.ts` aborted so in its reader fence in 3 of 30 runs with both cores busy.
 */
static void finish_serving_sends(ucx_state *state) {
    ucp_worker_h worker = state->serving.worker;
    if (!worker) return;
    ucp_request_param_t param = {.op_attr_mask = 0};
    void *flush = ucp_worker_flush_nbx(worker, &param);
    if (flush == NULL || UCS_PTR_IS_ERR(flush)) return;
    uint64_t deadline = kvt_now_ns() + SERVING_FLUSH_NS;
    while (ucp_request_check_status(flush) == UCS_INPROGRESS && kvt_now_ns() < deadline) ucp_worker_progress(worker);
    ucp_request_free(flush); /* released by UCX once complete, if it is not yet */
}

static void address_free(ucx_addresses *address) {
    free(address->full);
    free(address->network);
    *address = (ucx_addresses){0};
}

static void ucx_stop(kvt_agent *agent) {
    ucx_state *state = state_of(agent);
    if (!state) return;
    uint64_t deadline = kvt_now_ns() + CLOSE_DRAIN_NS;
    while (state->closing > 0 && kvt_now_ns() < deadline) ucp_worker_progress(state->worker);
    finish_serving_sends(state);
    state->stopping = true; /* what the worker's destruction still completes frees nothing: freed below */
    state->warming = NULL;
    if (state->serving.worker) ucp_worker_destroy(state->serving.worker);
    if (state->worker) ucp_worker_destroy(state->worker);
    while (state->detached) {
        ucx_endpoint *endpoint = state->detached;
        state->detached = endpoint->next_detached;
        free(endpoint);
    }
    ucx_staging_free(state); /* no request can use its buffers any more */
    if (state->context) ucp_cleanup(state->context);
    address_free(&state->address);
    free(state);
    agent->backend_state = NULL;
}

/* Whether `tls` (a UCX_TLS value) leaves in one of `transports`. */
static bool tls_uses_any(const char *tls, const char *const *transports, size_t count) {
    for (size_t i = 0; i < count; i++)
        if (ucx_tls_uses(tls, transports[i])) return true;
    return false;
}

/* Whether UCX opens one of its memory-mapping transports under `tls`: sysv where `tls` leaves it in; posix where it
 * leaves it in and statvfs can ask its directory (UCX 1.13 drops posix otherwise: "could not stat shared memory
 * device"); xpmem where it leaves it in and the xpmem driver's device is there (UCX's xpmem_version() opens it). */
static bool opens_memory_mapper(const char *tls) {
    return ucx_tls_uses(tls, "sysv") || (ucx_tls_uses(tls, "posix") && kvt_posix_segment_dir_usable()) ||
           (ucx_tls_uses(tls, "xpmem") && access("/dev/xpmem", R_OK | W_OK) == 0);
}

static ucs_status_t open_worker(ucx_state *state, ucp_worker_h *out, int *out_event_fd) {
    ucp_worker_params_t worker_params = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                                         .thread_mode = UCS_THREAD_MODE_SINGLE};
    ucs_status_t status = ucp_worker_create(state->context, &worker_params, out);
    if (status != UCS_OK) return status;
    if (ucp_worker_get_efd(*out, out_event_fd) != UCS_OK) *out_event_fd = -1;
    return UCS_OK;
}

/* A copy of the worker's address (`flags`: ucp_worker_address_flags_t) into *out and *out_length. */
static kvt_status copy_address(ucp_worker_h worker, uint32_t flags, uint8_t **out, uint32_t *out_length, char *detail,
                               size_t detail_size) {
    ucp_worker_attr_t attr = {.field_mask = UCP_WORKER_ATTR_FIELD_ADDRESS | UCP_WORKER_ATTR_FIELD_ADDRESS_FLAGS,
                              .address_flags = flags};
    ucs_status_t status = ucp_worker_query(worker, &attr);
    if (status != UCS_OK) return ucx_fail(detail, detail_size, "ucp_worker_query (address)", status);
    *out = malloc(attr.address_length);
    if (*out) memcpy(*out, attr.address, attr.address_length);
    *out_length = (uint32_t)attr.address_length;
    ucp_worker_release_address(worker, attr.address);
    if (*out) return KVT_OK;
    snprintf(detail, detail_size, "out of memory");
    return KVT_ERR_NO_MEMORY;
}

/* Creates a serving worker with the notification and probe handlers, and copies of its addresses. */
static kvt_status open_serving(kvt_agent *agent, ucx_worker *out, ucx_addresses *out_address, char *detail,
                               size_t detail_size) {
    ucx_state *state = state_of(agent);
    *out = (ucx_worker){.event_fd = -1};
    *out_address = (ucx_addresses){0};
    ucs_status_t status = open_worker(state, &out->worker, &out->event_fd);
    if (status != UCS_OK) {
        out->worker = NULL;
        return ucx_fail(detail, detail_size, "ucp_worker_create (serving)", status);
    }
    ucp_am_handler_param_t handler = {
        .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                      UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
        .id = KVT_AM_NOTIFY,
        .flags = UCP_AM_FLAG_WHOLE_MSG,
        .cb = on_notification,
        .arg = agent,
    };
    status = ucp_worker_set_am_recv_handler(out->worker, &handler);
    /* Peers probe the address the metadata advertises: this worker answers, on the probe's reply endpoint. */
    handler.id = KVT_AM_PROBE;
    handler.cb = on_probe;
    if (status == UCS_OK) status = ucp_worker_set_am_recv_handler(out->worker, &handler);
    handler.id = KVT_AM_STAGE_REQUEST; /* readers of this agent's memory ask for staged chunks here */
    handler.cb = ucx_on_stage_request;
    if (status == UCS_OK) status = ucp_worker_set_am_recv_handler(out->worker, &handler);
    if (status != UCS_OK) return ucx_fail(detail, detail_size, "ucp_worker_set_am_recv_handler", status);
    kvt_status copied =
        copy_address(out->worker, 0, &out_address->full, &out_address->full_length, detail, detail_size);
    if (copied == KVT_OK && state->network)
        copied = copy_address(out->worker, UCP_WORKER_ADDRESS_FLAG_NET_ONLY, &out_address->network,
                              &out_address->network_length, detail, detail_size);
    if (copied != KVT_OK) address_free(out_address);
    return copied;
}

/* Applies the agent's own NET_DEVICES and TLS (kvt_agent_create_ucx_begin) over UCX's configuration. */
static ucs_status_t confine(const kvt_agent *agent, ucp_config_t *config, char *detail, size_t detail_size) {
    const char *names[] = {"NET_DEVICES", "TLS"};
    const char *values[] = {agent->ucx_net_devices, agent->ucx_transports};
    for (size_t i = 0; i < 2; i++) {
        if (!values[i][0]) continue;
        ucs_status_t status = ucp_config_modify(config, names[i], values[i]);
        if (status != UCS_OK) {
            snprintf(detail, detail_size, "ucp_config_modify(%s=%s) failed: %s", names[i], values[i],
                     ucs_status_string(status));
            return status;
        }
    }
    return UCS_OK;
}

/*
 * What the shared-memory transports need, each unless the user set it (UCX_<NAME>), set only where UCX opens one
 * (opens_memory_mapper: with none to take it, UCX warns "invalid configuration: MM_ERROR_HANDLING=y"):
 * - MM_ERROR_HANDLING=y. Endpoints use UCP_ERR_HANDLING_MODE_PEER (a killed peer must end operations, not
 *   hang them), and UCX 1.13 keeps the shared-memory transports out of such endpoints unless they expose
 *   error handling, which leaves tcp: four orders of magnitude slower for small gets on one machine.
 * - ADAPTIVE_PROGRESS=n. With it, UCX polls an interface only once it has endpoints or a sender woke it,
 *   and sysv/posix wake an idle receiver with a datagram to an abstract unix socket, which exists only in
 *   the receiver's network namespace; from another one the datagram is refused and UCX ignores that. So
 *   between two network namespaces of one machine a serving worker never read the first message of a
 *   new peer (the wireup request its first WRITE's flush or probe waits for): the peer's writes hung.
 *   Every interface polled, a lost wake-up costs at most the idle progress period (IDLE_PROGRESS_MS).
 */
static ucs_status_t shared_memory_settings(ucp_config_t *config, char *detail, size_t detail_size) {
    static const char *const settings[][2] = {{"MM_ERROR_HANDLING", "y"}, {"ADAPTIVE_PROGRESS", "n"}};
    for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++) {
        char variable[64];
        snprintf(variable, sizeof variable, "UCX_%s", settings[i][0]);
        if (getenv(variable)) continue;
        ucs_status_t status = ucp_config_modify(config, settings[i][0], settings[i][1]);
        if (status != UCS_OK) {
            snprintf(detail, detail_size, "ucp_config_modify(%s=%s) failed: %s", settings[i][0], settings[i][1],
                     ucs_status_string(status));
            return status;
        }
    }
    return UCS_OK;
}

static kvt_status ucx_open(kvt_agent *agent, ucx_state *state, char *detail, size_t detail_size) {
    ucp_config_t *config;
    ucs_status_t status = ucp_config_read(NULL, NULL, &config);
    if (status != UCS_OK) return ucx_fail(detail, detail_size, "ucp_config_read", status);
    char tls_read[256];
    const char *tls;
    if (!ucx_tls_read(config, agent->ucx_transports, tls_read, sizeof tls_read, &tls)) {
        snprintf(detail, detail_size, "UCX's configuration could not be read for UCX_TLS: %s", strerror(errno));
        ucp_config_release(config);
        return KVT_ERR_NO_MEMORY;
    }
    static const char *const networks[] = {"tcp", "rc_verbs", "rc_mlx5", "ud_verbs", "ud_mlx5", "dc_mlx5"};
    state->shared_memory = opens_memory_mapper(tls);
    state->allocates_from =
        (kvt_shared_memory_kinds){.sysv = ucx_tls_uses(tls, "sysv"), .posix = ucx_tls_uses(tls, "posix")};
    state->network = tls_uses_any(tls, networks, sizeof networks / sizeof networks[0]);
    status = confine(agent, config, detail, detail_size);
    if (status != UCS_OK) {
        ucp_config_release(config);
        return KVT_ERR_BACKEND;
    }
    if (state->shared_memory) {
        status = shared_memory_settings(config, detail, detail_size);
        if (status != UCS_OK) {
            ucp_config_release(config);
            return KVT_ERR_BACKEND;
        }
    }
    ucp_params_t params = {
        .field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_REQUEST_SIZE | UCP_PARAM_FIELD_NAME |
                      UCP_PARAM_FIELD_MT_WORKERS_SHARED,
        .features = UCP_FEATURE_RMA | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP,
        .request_size = sizeof(ucx_request),
        .name = agent->name,
        .mt_workers_shared = 1, /* allocation on the caller's thread, beside the progress thread */
    };
    status = ucp_init(&params, config, &state->context);
    ucp_config_release(config);
    if (status != UCS_OK) return ucx_fail(detail, detail_size, "ucp_init", status);

    status = open_worker(state, &state->worker, &state->event_fd);
    if (status != UCS_OK) return ucx_fail(detail, detail_size, "ucp_worker_create", status);
    ucp_am_handler_param_t answers = {
        .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                      UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
        .id = KVT_AM_ANSWER, /* answers to this agent's probes come back to the worker that sent them */
        .flags = UCP_AM_FLAG_WHOLE_MSG,
        .cb = on_answer,
        .arg = agent,
    };
    status = ucp_worker_set_am_recv_handler(state->worker, &answers);
    answers.id = KVT_AM_STAGE_DATA; /* and the chunks of this agent's staged moves */
    answers.cb = ucx_on_stage_data;
    if (status == UCS_OK) status = ucp_worker_set_am_recv_handler(state->worker, &answers);
    if (status != UCS_OK) return ucx_fail(detail, detail_size, "ucp_worker_set_am_recv_handler", status);
    return open_serving(agent, &state->serving, &state->address, detail, detail_size);
}

static kvt_status ucx_start(kvt_agent *agent, char *detail, size_t detail_size) {
    ucx_state *state = calloc(1, sizeof *state);
    if (!state) {
        snprintf(detail, detail_size, "out of memory");
        return KVT_ERR_NO_MEMORY;
    }
    state->event_fd = -1;
    state->serving.event_fd = -1;
    agent->backend_state = state;
    kvt_status status = ucx_open(agent, state, detail, detail_size);
    if (status != KVT_OK) ucx_stop(agent);
    return status;
}

/* ---- memory ----------------------------------------------------------------------------------- */

static kvt_status ucx_alloc(kvt_agent *agent, kvt_allocation *allocation, char *detail, size_t detail_size) {
    ucx_state *state = state_of(agent);
    /* Refused before UCX tries: it tests its posix directory by writing the whole segment there, filling it meanwhile. */
    bool allocates_shared = state->allocates_from.sysv || state->allocates_from.posix;
    char why_not_shared[KVT_SHARED_MEMORY_DESCRIPTION_SIZE];
    if (allocates_shared &&
        !kvt_shared_memory_room(allocation->length, state->allocates_from, why_not_shared, sizeof why_not_shared)) {
        snprintf(detail, detail_size, "kvt_mem_alloc: no shared memory for %llu bytes: %s",
                 (unsigned long long)allocation->length, why_not_shared);
        return KVT_ERR_NO_MEMORY;
    }
    ucp_mem_map_params_t params = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS,
        .address = NULL,
        .length = allocation->length,
        .flags = UCP_MEM_MAP_ALLOCATE,
    };
    ucp_mem_h memh;
    ucs_status_t status = ucp_mem_map(state->context, &params, &memh);
    if (status != UCS_OK) {
        char room[KVT_SHARED_MEMORY_DESCRIPTION_SIZE];
        kvt_shared_memory_describe(state->allocates_from, room, sizeof room);
        snprintf(detail, detail_size, "kvt_mem_alloc: ucp_mem_map(ALLOCATE, %llu bytes) failed: %s (%s)",
                 (unsigned long long)allocation->length, ucs_status_string(status), room);
        return status == UCS_ERR_NO_MEMORY ? KVT_ERR_NO_MEMORY : KVT_ERR_BACKEND;
    }
    ucp_mem_attr_t attr = {.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH};
    status = ucp_mem_query(memh, &attr);
    long page = sysconf(_SC_PAGESIZE);
    if (status != UCS_OK || attr.length < allocation->length || (uintptr_t)attr.address % (uintptr_t)page != 0) {
        ucp_mem_unmap(state->context, memh);
        snprintf(detail, detail_size, "kvt_mem_alloc: UCX returned unusable memory (%s, %zu bytes at %p)",
                 ucs_status_string(status), attr.length, attr.address);
        return KVT_ERR_BACKEND;
    }
    /* UCX tries SysV shared memory, then a posix segment (written through first, so a full directory
     * refuses it), then falls back to private memory that no other process can map: readers would take
     * the slow path, and the allocation is not what it promises. Refuse it instead — unless UCX_TLS
     * leaves both sysv and posix out, where private memory is all UCX allocates. */
    char backing[256];
    bool shared = false;
    kvt_mapping_describe((uint64_t)(uintptr_t)attr.address, backing, sizeof backing, &shared);
    if (!shared && allocates_shared) {
        ucp_mem_unmap(state->context, memh);
        kvt_shared_memory_refusal_describe(state->allocates_from, why_not_shared, sizeof why_not_shared);
        snprintf(detail, detail_size,
                 "kvt_mem_alloc: no shared memory for %llu bytes: %s, so UCX fell back to private memory (%s) that "
                 "readers cannot map",
                 (unsigned long long)allocation->length, why_not_shared, backing);
        return KVT_ERR_NO_MEMORY;
    }
    allocation->address = (uint64_t)(uintptr_t)attr.address;
    allocation->backend = memh;
    allocation->shared_memory = state->allocates_from;
    return KVT_OK;
}

static void ucx_free(kvt_agent *agent, kvt_allocation *allocation) {
    ucp_mem_unmap(state_of(agent)->context, allocation->backend);
}

static kvt_status ucx_map(kvt_agent *agent, kvt_region *region, const kvt_allocation *exact, char *detail,
                          size_t detail_size) {
    ucx_state *state = state_of(agent);
    ucp_mem_h memh;
    if (exact) {
        memh = exact->backend;
        region->backend_borrowed = true;
    } else {
        ucp_mem_map_params_t params = {
            .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
            .address = (void *)(uintptr_t)region->address,
            .length = region->length,
        };
        ucs_status_t status = ucp_mem_map(state->context, &params, &memh);
        if (status != UCS_OK) {
            snprintf(detail, detail_size, "kvt_mem_register: ucp_mem_map of [0x%llx, +%llu) failed: %s",
                     (unsigned long long)region->address, (unsigned long long)region->length,
                     ucs_status_string(status));
            return KVT_ERR_BACKEND;
        }
    }
    void *packed;
    size_t packed_length;
    ucs_status_t status = ucp_rkey_pack(state->context, memh, &packed, &packed_length);
    if (status == UCS_OK) {
        region->rkey = malloc(packed_length ? packed_length : 1);
        if (region->rkey) memcpy(region->rkey, packed, packed_length);
        region->rkey_length = (uint32_t)packed_length;
        ucp_rkey_buffer_release(packed);
    }
    if (status != UCS_OK || !region->rkey) {
        if (!exact) ucp_mem_unmap(state->context, memh);
        snprintf(detail, detail_size, "kvt_mem_register: ucp_rkey_pack failed: %s",
                 status != UCS_OK ? ucs_status_string(status) : "out of memory");
        return status != UCS_OK ? KVT_ERR_BACKEND : KVT_ERR_NO_MEMORY;
    }
    region->backend = memh;
    return KVT_OK;
}

static void ucx_unmap(kvt_agent *agent, kvt_region *region) {
    if (!region->backend_borrowed) ucp_mem_unmap(state_of(agent)->context, region->backend);
}

static const uint8_t *ucx_address(kvt_agent *agent, bool network_only, uint32_t *length) {
    const ucx_addresses *address = &state_of(agent)->address;
    *length = network_only ? address->network_length : address->full_length;
    return network_only ? address->network : address->full;
}

/*
 * Stops answering readers that may hold metadata naming memory about to be withdrawn: destroys the
 * serving worker — with its endpoints, its tcp connections and shared-memory receive queues, and the
 * replies it had not sent yet — and opens a new one, whose address the next metadata export carries.
 * Requests still on their way to the old worker, or sent to it later, reach nothing. Readers over tcp
 * see their connection reset (REMOTE_DISCONNECT); over shared memory their requests go unanswered
 * until they cancel. Either way they reload the metadata to read again.
 */
static void ucx_fence(kvt_agent *agent) {
    ucx_state *state = state_of(agent);
    finish_serving_sends(state);
    if (state->serving.worker) ucp_worker_destroy(state->serving.worker);
    ucx_staging_forget_answers(state);
    char detail[256] = "";
    ucx_addresses address;
    if (open_serving(agent, &state->serving, &address, detail, sizeof detail) != KVT_OK) {
        if (state->serving.worker) ucp_worker_destroy(state->serving.worker);
        state->serving = (ucx_worker){.event_fd = -1}; /* unreachable until the agent is recreated */
    }
    pthread_mutex_lock(&agent->lock);
    ucx_addresses old = state->address;
    state->address = address;
    agent->exported_region_high = 0; /* nobody knows the new worker yet */
    pthread_mutex_unlock(&agent->lock);
    address_free(&old);
}

/* ---- connections ------------------------------------------------------------------------------- */

/*
 * Closes the connection's endpoint without waiting: a failed one is force-closed; a live one first
 * flushes what it still carries (e.g. notifications sent without waiting) and is force-closed when the
 * flush ends or GRACEFUL_CLOSE_NS passed (a stopped peer never acknowledges it), whichever is first;
 * once the agent's shutdown began, when its deadline passed instead (ucx_closing names those peers).
 */
static void ucx_disconnect(kvt_agent *agent, kvt_conn *conn) {
    ucx_state *state = state_of(agent);
    ucx_endpoint *endpoint = conn->backend;
    /* Force-closed at once: a failed endpoint; a peer whose process is gone; and a probe to a peer whose answers are
     * lost (another pid namespace over shared memory), which waits in UCX for the peer's endpoint id forever
     * (UCP_AM_SEND_FLAG_REPLY), as a graceful close would wait for it. A peer that has not answered yet (stopped, or
     * its answer on its way) is closed gracefully: it may still acknowledge. */
    bool waits_forever = conn->answers_lost && atomic_load(&conn->probed) && !atomic_load(&conn->answered);
    if (endpoint && endpoint->ep && (atomic_load(&conn->failed) || waits_forever || kvt_conn_process_gone(conn)))
        ucx_force_close(state, conn);
    if (endpoint) {
        ucx_close_mapping_endpoint(state, endpoint); /* it carries no request: nothing to flush */
        ucx_unlist_warming(state, endpoint);         /* the mappings end with the remote keys below */
        endpoint->conn = NULL;
        snprintf(endpoint->peer, sizeof endpoint->peer, "%s", conn->meta.name);
        endpoint->next_detached = state->detached;
        state->detached = endpoint;
        if (endpoint->ep) {
            ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                                         .cb = {.send = ucx_on_flush_done},
                                         .user_data = endpoint};
            void *request = ucp_ep_flush_nbx(endpoint->ep, &param);
            if (request != NULL && !UCS_PTR_IS_ERR(request)) {
                endpoint->flush = request;
                endpoint->flush_deadline_ns = kvt_now_ns() + GRACEFUL_CLOSE_NS;
            } else {
                ucx_close_endpoint(state, endpoint);
            }
        }
        ucx_free_if_finished(endpoint);
    }
    conn->backend = NULL;
    for (uint32_t i = 0; i < conn->meta.region_count; i++) {
        if (conn->meta.regions[i].backend) ucp_rkey_destroy(conn->meta.regions[i].backend);
        conn->meta.regions[i].backend = NULL;
        conn->meta.regions[i].mapped = NULL;
    }
}

/* Agent shutdown (progress thread): whether endpoint closes are still finishing. At `deadline_ns` every
 * graceful close still flushing is force-closed and named in `forced`. */
static bool ucx_closing(kvt_agent *agent, uint64_t deadline_ns, char *forced, size_t forced_size) {
    ucx_state *state = state_of(agent);
    state->shutting_down = true; /* ucx_progress leaves overdue closes to this hook, which names them */
    if (kvt_now_ns() < deadline_ns) return state->detached != NULL;
    ucx_close_overdue_endpoints(state, UINT64_MAX, forced, forced_size);
    return false; /* ucx_stop gives the force-closes CLOSE_DRAIN_NS to finish */
}

/*
 * UCX 1.13 does not notice a killed peer on shared memory: a get that needs the peer's progress
 * (caller memory is read through active messages) waits forever, even with keepalive. So peers with
 * operations in flight are checked against the process identity in their metadata (liveness.c); a
 * peer whose process is gone gets its endpoint force-closed, which ends the outstanding requests.
 */
static void on_process_gone(kvt_agent *agent, kvt_conn *conn) { ucx_force_close(state_of(agent), conn); }

/*
 * Where this process maps the peer's whole region, when a shared-memory transport attached it while
 * unpacking the key (kvt_mem_alloc banks on one host): gets and puts to it are then a copy the
 * progress thread makes itself, with no UCX request per descriptor. NULL otherwise (caller memory,
 * other hosts): those go through ucp_get_nbx / ucp_put_nbx.
 */
static uint8_t *shared_mapping(ucp_rkey_h rkey, const kvt_remote_region *region) {
    void *first, *last;
    if (ucp_rkey_ptr(rkey, region->address, &first) != UCS_OK ||
        ucp_rkey_ptr(rkey, region->address + region->length - 1, &last) != UCS_OK)
        return NULL;
    if ((uintptr_t)last - (uintptr_t)first != region->length - 1) return NULL; /* not one contiguous view */
    return first;
}

/* An endpoint of `endpoint` to the peer's `address`, with peer error handling: a killed peer ends its requests (and
 * the shared-memory transports then take no lane of tcp beside theirs). */
static ucs_status_t create_ep(ucx_state *state, ucx_endpoint *endpoint, const uint8_t *address, ucp_ep_h *out) {
    ucp_ep_params_t params = {
        .field_mask =
            UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .address = (const ucp_address_t *)address,
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = {.cb = ucx_on_endpoint_error, .arg = endpoint},
    };
    return ucp_ep_create(state->worker, &params, out);
}

/*
 * Connects to the peer's serving worker. A peer on this host in another pid namespace (a container beside this
 * one) is connected through its network address: over the shared-memory transports UCX 1.13 picks there, nothing
 * it sends comes back (probe answers, staged chunks, software gets of caller memory, a WRITE's completion). Its
 * kvreuse-owned banks are still mapped, through a second endpoint to its full address that only unpacks their
 * keys. Without a network transport on either side it is connected through its full address, as before.
 */
static ucs_status_t connect_endpoints(ucx_state *state, ucx_endpoint *endpoint, const kvt_metadata *meta) {
    bool network =
        state->network && meta->network_address_length > 0 && kvt_process_in_another_pid_namespace(&meta->process);
    ucs_status_t status = UCS_ERR_UNREACHABLE;
    if (network) status = create_ep(state, endpoint, meta->network_address, &endpoint->ep);
    endpoint->through_network = status == UCS_OK;
    if (!endpoint->through_network) return create_ep(state, endpoint, meta->worker_address, &endpoint->ep);
    if (state->shared_memory && create_ep(state, endpoint, meta->worker_address, &endpoint->mapping_ep) != UCS_OK)
        endpoint->mapping_ep = NULL; /* its banks are then read through UCX requests */
    return UCS_OK;
}

/* The remote key of the peer's `region`, and its mapping here when shared memory maps it (else NULL): unpacked on
 * the mapping endpoint when it maps the region there, else on the endpoint that carries the requests. */
static ucs_status_t unpack_key(ucx_endpoint *endpoint, kvt_remote_region *region, ucp_rkey_h *out) {
    if (endpoint->mapping_ep && ucp_ep_rkey_unpack(endpoint->mapping_ep, region->rkey, out) == UCS_OK) {
        region->mapped = shared_mapping(*out, region);
        if (region->mapped) return UCS_OK;
        ucp_rkey_destroy(*out);
    }
    ucs_status_t status = ucp_ep_rkey_unpack(endpoint->ep, region->rkey, out);
    if (status == UCS_OK) region->mapped = shared_mapping(*out, region);
    return status;
}

static kvt_status ucx_connect(kvt_agent *agent, kvt_conn *conn, char *detail, size_t detail_size) {
    ucx_state *state = state_of(agent);
    if (kvt_conn_process_gone(conn)) {
        snprintf(detail, detail_size, "kvt_peer_load: the process (pid %llu) of peer '%s' is gone",
                 (unsigned long long)conn->meta.process.pid, conn->meta.name);
        return KVT_ERR_REMOTE_DISCONNECT;
    }
    ucx_endpoint *endpoint = calloc(1, sizeof *endpoint);
    if (!endpoint) {
        snprintf(detail, detail_size, "kvt_peer_load: out of memory");
        return KVT_ERR_NO_MEMORY;
    }
    *endpoint = (ucx_endpoint){.state = state, .conn = conn};
    ucs_status_t status = connect_endpoints(state, endpoint, &conn->meta);
    if (status != UCS_OK) {
        free(endpoint);
        snprintf(detail, detail_size, "kvt_peer_load: ucp_ep_create to peer '%s' failed: %s", conn->meta.name,
                 ucs_status_string(status));
        return ucx_map_status(status, NULL) == KVT_ERR_REMOTE_DISCONNECT ? KVT_ERR_REMOTE_DISCONNECT : KVT_ERR_BACKEND;
    }
    conn->backend = endpoint;
    conn->answers_lost = !endpoint->through_network && kvt_process_in_another_pid_namespace(&conn->meta.process);
    bool mapped = false;
    for (uint32_t i = 0; i < conn->meta.region_count; i++) {
        kvt_remote_region *region = &conn->meta.regions[i];
        if (region->kind == KVT_MEM_VRAM) continue; /* no UCX key: vram is not moved through UCX */
        ucp_rkey_h rkey;
        status = unpack_key(endpoint, region, &rkey);
        if (status != UCS_OK) {
            snprintf(detail, detail_size, "kvt_peer_load: remote key of region %u of peer '%s' unusable: %s",
                     region->id, conn->meta.name, ucs_status_string(status));
            return KVT_ERR_BACKEND; /* the caller's unref closes what was opened */
        }
        region->backend = rkey;
        mapped |= region->mapped != NULL;
    }
    if (state->shared_memory) { /* readers elsewhere, or without shared memory, stay on UCX */
        kvt_file_regions_map(conn);
        for (uint32_t i = 0; i < conn->meta.region_count; i++) mapped |= conn->meta.regions[i].file_view != NULL;
    }
    if (mapped) { /* listed only once every key is unpacked: a failed connect is never warmed */
        endpoint->warming = true;
        endpoint->next_warming = state->warming;
        state->warming = endpoint;
    }
    return KVT_OK;
}

/* ---- progress and sleep ----------------------------------------------------------------------- */

/*
 * The first access to each page of a freshly mapped peer region is what costs on a virtual machine with
 * shadow paging (measured here: ~5 µs per 4 KiB page, ~0.2 GB/s, whether the page is read or written,
 * and MADV_POPULATE does not avoid it; native/README.md, "First touch of a peer's memory"). An
 * operation that is the first to touch a peer's banks would pay it inside its own time and timeout, so
 * the idle progress thread reads one byte per page of every mapped region of a loaded peer, a slice per
 * round, ahead of the operations. A read is enough: the page stays writable for later WRITEs.
 */
static bool warm_step(kvt_agent *agent, ucx_state *state) {
    ucx_endpoint *endpoint = state->warming;
    if (!endpoint) return false;
    kvt_conn *conn = endpoint->conn;
    uint64_t budget = WARM_SLICE_BYTES;
    while (budget > 0 && endpoint->warm_region < conn->meta.region_count) {
        const kvt_remote_region *region = &conn->meta.regions[endpoint->warm_region];
        const uint8_t *view = region->mapped ? region->mapped : region->file_view;
        uint64_t end = view ? region->length : 0;
        uint64_t stop = end - endpoint->warm_offset > budget ? endpoint->warm_offset + budget : end;
        for (uint64_t offset = endpoint->warm_offset; offset < stop; offset += WARM_STRIDE)
            (void)*(volatile const uint8_t *)(view + offset);
        budget -= stop - endpoint->warm_offset;
        endpoint->warm_offset = stop;
        if (stop == end) {
            endpoint->warm_region++;
            endpoint->warm_offset = 0;
            kvt_conn_describe(agent, conn); /* it says which regions are warm */
        }
    }
    if (endpoint->warm_region == conn->meta.region_count) ucx_unlist_warming(state, endpoint);
    return true;
}

static bool ucx_progress(kvt_agent *agent) {
    ucp_worker_h worker = state_of(agent)->worker;
    bool worked = false;
    ucx_state *state = state_of(agent);
    for (int round = 0; round < 64 && ucp_worker_progress(worker) != 0; round++) worked = true;
    if (state->serving.worker && !atomic_load_explicit(&agent->serving_held, memory_order_relaxed))
        for (int round = 0; round < 64 && ucp_worker_progress(state->serving.worker) != 0; round++) worked = true;
    ucx_close_failed_endpoints(state);
    if (state->staging && state->staging->answers > 0) { /* staged chunks on their way out: no sleep */
        if (!worked) sched_yield(); /* the destination drains the FIFO they go through (agent.c, progress_main) */
        worked = true;
    }
    if (state->detached && !state->shutting_down) ucx_close_overdue_endpoints(state, kvt_now_ns(), NULL, 0);
    if (state->staging) ucx_stage_targets_sweep(state, kvt_now_ns());
    if (agent->active)
        kvt_liveness_check(agent, &state->next_liveness_check_ns, on_process_gone);
    else
        worked |= warm_step(agent, state);
    return worked;
}

static void ucx_sleep(kvt_agent *agent, int timeout_ms) {
    ucx_state *state = state_of(agent);
    bool serving = state->serving.worker && !atomic_load_explicit(&agent->serving_held, memory_order_relaxed);
    bool evented = state->event_fd >= 0 && (!serving || state->serving.event_fd >= 0);
    int cap = evented ? IDLE_PROGRESS_MS : 1;
    int timeout = (timeout_ms < 0 || timeout_ms > cap) ? cap : timeout_ms;
    struct pollfd fds[3] = {{.fd = agent->commands.fd, .events = POLLIN}};
    nfds_t count = 1;
    if (evented) {
        if (ucp_worker_arm(state->worker) == UCS_ERR_BUSY) return; /* events pending */
        fds[count++] = (struct pollfd){.fd = state->event_fd, .events = POLLIN};
        if (serving) {
            if (ucp_worker_arm(state->serving.worker) == UCS_ERR_BUSY) return;
            fds[count++] = (struct pollfd){.fd = state->serving.event_fd, .events = POLLIN};
        }
    }
    poll(fds, count, timeout);
}

const kvt_backend kvt_ucx_backend = {
    .start = ucx_start,
    .stop = ucx_stop,
    .alloc = ucx_alloc,
    .free_allocation = ucx_free,
    .map = ucx_map,
    .unmap = ucx_unmap,
    .address = ucx_address,
    .connect = ucx_connect,
    .disconnect = ucx_disconnect,
    .closing = ucx_closing,
    .advance = ucx_advance,
    .move_inline = ucx_move_inline,
    .confirm_peer = ucx_confirm_peer,
    .advance_staged = ucx_advance_staged,
    .notify = ucx_notify,
    .probe = ucx_probe,
    .describe = ucx_describe,
    .fence = ucx_fence,
    .allocation_on_any_thread = true,
    .registration_on_any_thread = false,
    .notify_on_any_thread = false,
    .progress = ucx_progress,
    .sleep = ucx_sleep,
};
