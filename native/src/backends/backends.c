/* The backends built into this library: the choice of one for an agent, and what the library says of them
 * (its version string, its capabilities). */
#include "backend.h"

#include "services/cuda_driver.h"
#include "services/status.h"

#include <pthread.h>
#include <stdio.h>

#if KVT_HAVE_UCX
#include <ucp/api/ucp.h>
#define UCP_API_VERSION_TEXT KVT_STRINGIFY(UCP_API_MAJOR) "." KVT_STRINGIFY(UCP_API_MINOR)
#endif

kvt_status kvt_backend_select(uint32_t kind, const kvt_backend **out) {
    if (kind == KVT_BACKEND_LOOPBACK) {
        *out = &kvt_loopback_backend;
        return KVT_OK;
    }
#if KVT_HAVE_UCX
    if (kind == KVT_BACKEND_UCX) {
        const char *unavailable = kvt_ucx_unavailable();
        if (unavailable)
            return kvt_fail(KVT_ERR_NOT_SUPPORTED,
                            "kvt_agent_create: the ucx backend cannot run here: %s; "
                            "install UCX (Debian: libucx0) or use the loopback backend",
                            unavailable);
        *out = &kvt_ucx_backend;
        return KVT_OK;
    }
#else
    if (kind == KVT_BACKEND_UCX)
        return kvt_fail(KVT_ERR_NOT_SUPPORTED, "kvt_agent_create: the ucx backend is not built into this library "
                                               "(UCX headers were absent at build time)");
#endif
    return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_agent_create: unknown backend %u (loopback = %u, ucx = %u)", kind,
                    KVT_BACKEND_LOOPBACK, KVT_BACKEND_UCX);
}

#define KVT_VERSION_TEXT                                                                                               \
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

static pthread_once_t vram_detail_once = PTHREAD_ONCE_INIT;
static char vram_detail[720];

static void describe_vram(void) {
    const char *unavailable = kvt_cuda_unavailable();
    if (unavailable)
        snprintf(vram_detail, sizeof vram_detail, "no: %s", unavailable);
    else
        snprintf(vram_detail, sizeof vram_detail, "yes: CUDA driver %d.%d (loaded at run time), %u GPU(s)",
                 kvt_cuda_driver_version() / 1000, kvt_cuda_driver_version() % 1000 / 10, kvt_cuda_device_count());
}

kvt_status kvt_capabilities(uint64_t *values, uint32_t capacity, uint32_t *out_count) {
    kvt_detail_clear();
    if (!out_count || (capacity > 0 && !values))
        return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_capabilities: values and out_count must not be NULL");
    const uint64_t all[KVT_CAP_COUNT] = {
        [KVT_CAP_BACKENDS] = (1u << KVT_BACKEND_LOOPBACK) | (ucx_usable() ? (1u << KVT_BACKEND_UCX) : 0u),
        [KVT_CAP_VRAM] = kvt_cuda_unavailable() == NULL,
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
        pthread_once(&vram_detail_once, describe_vram);
        return vram_detail;
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
