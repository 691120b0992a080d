/* Internal declarations shared by the library's sources. */
#ifndef KVT_INTERNAL_H
#define KVT_INTERNAL_H

#include "kvreuse_transport.h"

#include <stdbool.h>

#define KVT_STRINGIFY_(x) #x
#define KVT_STRINGIFY(x) KVT_STRINGIFY_(x)

#ifndef KVT_HAVE_UCX
#define KVT_HAVE_UCX 0
#endif
#if KVT_HAVE_UCX
#include <ucp/api/ucp.h>
#define UCP_API_VERSION_TEXT                                                                                          \
    KVT_STRINGIFY(UCP_API_MAJOR) "." KVT_STRINGIFY(UCP_API_MINOR)
#endif

/* Records the calling thread's error detail (printf-style) and returns `code`. */
kvt_status kvt_fail(kvt_status code, const char *format, ...) __attribute__((format(printf, 2, 3)));
void kvt_detail_clear(void);
bool kvt_is_error_code(kvt_status status);

#endif
