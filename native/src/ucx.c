/* The UCX backend (work in progress: agents cannot be created on it yet). */
#include "internal.h"

#include <stdio.h>

static kvt_status ucx_start(kvt_agent *agent, char *detail, size_t detail_size) {
    (void)agent;
    snprintf(detail, detail_size, "the ucx backend is not implemented yet");
    return KVT_ERR_NOT_SUPPORTED;
}

const kvt_backend kvt_ucx_backend = {.start = ucx_start};
