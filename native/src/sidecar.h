/* What the sidecar's listener (sidecar.c) and the engine's client (sidecar_client.c) share. */
#ifndef KVT_SIDECAR_H
#define KVT_SIDECAR_H

#include "kvreuse_transport.h"

#include <sys/un.h>

/* The unix socket address of `path` (1..KVT_SIDECAR_MAX_PATH bytes); INVALID_PARAM naming `call` otherwise. */
kvt_status kvt_sidecar_address(const char *call, const char *path, struct sockaddr_un *out);

#endif
