/* Which UCX transports a UCX_TLS value leaves in, read as UCX 1.13 reads it (ucx_tls.c). */
#ifndef KVT_UCX_TLS_H
#define KVT_UCX_TLS_H

#include <stdbool.h>

/* Whether UCX 1.13 uses `transport` (a transport's own name: "posix", "sysv", "tcp", "rc_mlx5", ...) under `tls`, a
 * UCX_TLS value (NULL: unset, so every transport). */
bool ucx_tls_uses(const char *tls, const char *transport);

#endif
