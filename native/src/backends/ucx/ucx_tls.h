/* The UCX_TLS that UCX applies, and which UCX transports it leaves in, read as UCX 1.13 reads it (ucx_tls.c). */
#ifndef KVT_UCX_TLS_H
#define KVT_UCX_TLS_H

#include "backends/ucx/ucx_api.h"

#include <stdbool.h>
#include <stddef.h>

/* Whether UCX 1.13 uses `transport` (a transport's own name: "posix", "sysv", "tcp", "rc_mlx5", ...) under `tls`, a
 * UCX_TLS value (NULL: unset, so every transport). */
bool ucx_tls_uses(const char *tls, const char *transport);

/* The UCX_TLS that UCX applies to an agent, into *out_tls: `own` (the agent's transports) unless empty, else the
 * environment's UCX_TLS, else what `config` (from ucp_config_read) holds: the value UCX 1.13 read from a ucx.conf
 * (/etc/ucx, $HOME, $UCX_CONFIG_DIR, ...) or its default, copied into `out`. NULL (every transport) where that value
 * may be cut short: 125 characters or more, as ucp_config_print prints at most 125. False (errno set) when the
 * configuration could not be printed. */
bool ucx_tls_read(const ucp_config_t *config, const char *own, char *out, size_t size, const char **out_tls);

#endif
