/* Status names and texts, the thread-local error detail and the version. */
#include "services/status.h"

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

bool kvt_is_error_code(kvt_status status) { return status <= KVT_ERR_INVALID_PARAM && status >= -KVT_ERROR_CODE_COUNT; }

int32_t kvt_version(uint32_t *major, uint32_t *minor, uint32_t *patch) {
    kvt_detail_clear();
    if (major) *major = KVT_VERSION_MAJOR;
    if (minor) *minor = KVT_VERSION_MINOR;
    if (patch) *patch = KVT_VERSION_PATCH;
    return KVT_OK;
}
