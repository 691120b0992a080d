/* Status names and texts, the thread-local error detail, version and capabilities. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_error_detail[1024];

const char *kvt_last_error_detail(void) { return last_error_detail; }

void kvt_detail_clear(void) { last_error_detail[0] = '\0'; }

kvt_status kvt_fail(kvt_status code, const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(last_error_detail, sizeof last_error_detail, format, args);
    va_end(args);
    return code;
}

typedef struct {
    kvt_status code;
    const char *name;
    const char *text;
} status_entry;

static const status_entry status_table[] = {
    {KVT_OK, "KVT_OK", "success"},
    {KVT_IN_PROGRESS, "KVT_IN_PROGRESS", "operation in progress"},
    {KVT_ERR_INVALID_PARAM, "KVT_ERR_INVALID_PARAM", "invalid parameter"},
    {KVT_ERR_BACKEND, "KVT_ERR_BACKEND", "backend failure"},
    {KVT_ERR_NOT_FOUND, "KVT_ERR_NOT_FOUND", "not found"},
    {KVT_ERR_MISMATCH, "KVT_ERR_MISMATCH", "mismatch"},
    {KVT_ERR_NOT_ALLOWED, "KVT_ERR_NOT_ALLOWED", "not allowed"},
    {KVT_ERR_BUSY, "KVT_ERR_BUSY", "resource busy"},
    {KVT_ERR_NOT_SUPPORTED, "KVT_ERR_NOT_SUPPORTED", "not supported"},
    {KVT_ERR_REMOTE_DISCONNECT, "KVT_ERR_REMOTE_DISCONNECT", "remote peer disconnected"},
    {KVT_ERR_CANCELED, "KVT_ERR_CANCELED", "operation canceled"},
    {KVT_ERR_TIMEOUT, "KVT_ERR_TIMEOUT", "timed out"},
    {KVT_ERR_NO_MEMORY, "KVT_ERR_NO_MEMORY", "out of memory"},
};

static const status_entry *find_status(kvt_status status) {
    for (size_t i = 0; i < sizeof status_table / sizeof status_table[0]; i++)
        if (status_table[i].code == status) return &status_table[i];
    return NULL;
}

const char *kvt_strerror(kvt_status status) {
    const status_entry *entry = find_status(status);
    return entry ? entry->text : "unknown status";
}

const char *kvt_status_name(kvt_status status) {
    const status_entry *entry = find_status(status);
    return entry ? entry->name : "KVT_UNKNOWN_STATUS";
}

bool kvt_is_error_code(kvt_status status) {
    return status <= KVT_ERR_INVALID_PARAM && status >= -KVT_ERROR_CODE_COUNT;
}

int32_t kvt_version(uint32_t *major, uint32_t *minor, uint32_t *patch) {
    kvt_detail_clear();
    if (major) *major = KVT_VERSION_MAJOR;
    if (minor) *minor = KVT_VERSION_MINOR;
    if (patch) *patch = KVT_VERSION_PATCH;
    return KVT_OK;
}

#define KVT_VERSION_TEXT                                                                                              \
    KVT_STRINGIFY(KVT_VERSION_MAJOR) "." KVT_STRINGIFY(KVT_VERSION_MINOR) "." KVT_STRINGIFY(KVT_VERSION_PATCH)

const char *kvt_version_string(void) {
#if KVT_HAVE_UCX
    return KVT_VERSION_TEXT " (loopback, ucx " UCP_API_VERSION_TEXT ")";
#else
    return KVT_VERSION_TEXT " (loopback)";
#endif
}

/* Whether the ucx backend is built in and UCX loads (the first call loads it). */
static bool ucx_usable(void) {
#if KVT_HAVE_UCX
    return kvt_ucx_unavailable() == NULL;
#else
    return false;
#endif
}

#if KVT_HAVE_UCX
static pthread_once_t ucx_detail_once = PTHREAD_ONCE_INIT;
static char ucx_unavailable_detail[640];

static void describe_ucx_unavailable(void) {
    snprintf(ucx_unavailable_detail, sizeof ucx_unavailable_detail,
             "loopback only: the ucx backend is built in, but %s", kvt_ucx_unavailable());
}
#endif

kvt_status kvt_capabilities(uint64_t *values, uint32_t capacity, uint32_t *out_count) {
    kvt_detail_clear();
    if (!out_count || (capacity > 0 && !values))
        return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_capabilities: values and out_count must not be NULL");
    const uint64_t all[KVT_CAP_COUNT] = {
        [KVT_CAP_BACKENDS] = (1u << KVT_BACKEND_LOOPBACK) | (ucx_usable() ? (1u << KVT_BACKEND_UCX) : 0u),
        [KVT_CAP_VRAM] = 0,
        [KVT_CAP_MAX_DESCRIPTORS] = KVT_MAX_DESCRIPTORS,
        [KVT_CAP_MAX_NOTIFICATION] = KVT_MAX_NOTIFICATION,
        [KVT_CAP_MAX_NAME] = KVT_MAX_NAME,
        [KVT_CAP_MAX_REGIONS] = KVT_MAX_REGIONS,
        [KVT_CAP_MAX_PENDING_NOTIFICATIONS] = KVT_MAX_PENDING_NOTIFICATIONS,
    };
    uint32_t n = capacity < KVT_CAP_COUNT ? capacity : KVT_CAP_COUNT;
    for (uint32_t i = 0; i < n; i++) values[i] = all[i];
    *out_count = n;
    return KVT_OK;
}

const char *kvt_capability_detail(uint32_t cap) {
    switch (cap) {
    case KVT_CAP_BACKENDS:
        if (ucx_usable()) return "loopback (always) and ucx (built in; UCX's libucp.so.0 loaded at run time)";
#if KVT_HAVE_UCX
        pthread_once(&ucx_detail_once, describe_ucx_unavailable);
        return ucx_unavailable_detail;
#else
        return "loopback only: UCX headers (<ucp/api/ucp.h>) were not found at build time";
#endif
    case KVT_CAP_VRAM:
        return "no: this library is built without GPU memory support (no CUDA/ROCm memory domain is used), so "
               "only dram can be registered";
    case KVT_CAP_MAX_DESCRIPTORS:
        return "most descriptors one kvt_xfer_post batch accepts";
    case KVT_CAP_MAX_NOTIFICATION:
        return "most bytes in one notification (sent as one eager active message over UCX)";
    case KVT_CAP_MAX_NAME:
        return "most bytes in an agent name";
    case KVT_CAP_MAX_REGIONS:
        return "most live registrations per agent";
    case KVT_CAP_MAX_PENDING_NOTIFICATIONS:
        return "received notifications queued per agent; more are dropped and counted";
    default:
        return NULL;
    }
}
