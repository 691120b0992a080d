/* Errors: the calling thread's detail and the status codes (status.c). */
#ifndef KVT_STATUS_H
#define KVT_STATUS_H

#include "kvreuse_transport.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KVT_STRINGIFY_(x) #x
#define KVT_STRINGIFY(x) KVT_STRINGIFY_(x)

/* Records the calling thread's error detail (printf-style) and returns `code`. */
kvt_status kvt_fail(kvt_status code, const char *format, ...) __attribute__((format(printf, 2, 3)));
void kvt_detail_clear(void);
bool kvt_is_error_code(kvt_status status);

#endif
