/* The header a notification travels with between processes: "KVTN", the sender's name length (u16,
 * little-endian), the name. Written by the sender, checked by the receiver before anything is queued. */
#include "services/notify_header.h"

#include "services/status.h"

#include <string.h>

#define NOTIFY_MAGIC 0x4E54564Bu /* "KVTN" */

size_t kvt_notify_header_write(uint8_t *buffer, const char *sender) {
    size_t name_length = strlen(sender);
    for (unsigned i = 0; i < 4; i++) buffer[i] = (uint8_t)(NOTIFY_MAGIC >> (8 * i));
    buffer[4] = (uint8_t)name_length;
    buffer[5] = (uint8_t)(name_length >> 8);
    memcpy(buffer + KVT_NOTIFY_HEADER_FIXED, sender, name_length);
    return KVT_NOTIFY_HEADER_FIXED + name_length;
}

bool kvt_notify_header_parse(const uint8_t *header, size_t header_length, char sender[KVT_MAX_NAME + 1]) {
    if (header_length < KVT_NOTIFY_HEADER_FIXED) return false;
    uint32_t magic =
        (uint32_t)header[0] | (uint32_t)header[1] << 8 | (uint32_t)header[2] << 16 | (uint32_t)header[3] << 24;
    uint32_t name_length = (uint32_t)header[4] | (uint32_t)header[5] << 8;
    if (magic != NOTIFY_MAGIC || name_length < 1 || name_length > KVT_MAX_NAME ||
        header_length != KVT_NOTIFY_HEADER_FIXED + name_length)
        return false;
    for (uint32_t i = 0; i < name_length; i++) {
        uint8_t c = header[KVT_NOTIFY_HEADER_FIXED + i];
        if (c <= 0x20 || c >= 0x7F) return false;
        sender[i] = (char)c;
    }
    sender[name_length] = '\0';
    return true;
}
