/* libFuzzer target: the header of a notification received from another process (kvt_notify_header_parse).
 * A header is either refused, or names a printable sender and is exactly the header the sender's side
 * writes for that name. */
#include "services/notify_header.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char sender[KVT_MAX_NAME + 1];
    if (!kvt_notify_header_parse(data, size, sender)) return 0;
    uint8_t written[KVT_NOTIFY_HEADER_FIXED + KVT_MAX_NAME];
    size_t length = kvt_notify_header_write(written, sender);
    if (length != size || memcmp(written, data, size) != 0) __builtin_trap();
    return 0;
}
